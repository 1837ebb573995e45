"""How the history's database is connected to: the engine for a URL, with SQLite's settings on every connection.

SQLite runs in WAL mode with a busy timeout, and every writing transaction starts with ``BEGIN IMMEDIATE``
(reading ones, marked ``gpuperf_read``, with ``BEGIN``): concurrent sessions on one machine queue for the write
lock instead of failing half-way. PostgreSQL's engine checks a pooled connection before it is used.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from gpuperf.store.history_target import HistoryError

#: Seconds a writer waits for SQLite's write lock before giving up.
SQLITE_BUSY_TIMEOUT_S = 60
#: SQLite's page cache per connection: the series index's pages of a long history stay in memory during a
#: backfill instead of being read back for every run.
SQLITE_CACHE_KIB = 64 * 1024
#: A new database's page size: a backfill's writing takes a quarter less time than with 4 KiB pages (fewer pages
#: to split and to log for the same rows), and reading whole series does not slow.
SQLITE_PAGE_BYTES = 16384
#: WAL pages between SQLite's checkpoints (each syncs the WAL and the database): 64 MiB rather than the default
#: 4 MiB saves a backfill of a gigabyte some 250 pairs of syncs; what is committed is as durable either way.
SQLITE_CHECKPOINT_PAGES = 64 * 2**20 // SQLITE_PAGE_BYTES


def describe(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def _sqlite_engine(url: sa.URL, create: bool) -> sa.Engine:
    database = url.database or ""
    if database and database != ":memory:" and not create and not Path(database).is_file():
        raise HistoryError(f"history {database}: no such file; pass --history the database that pytest "
                           "perf_tests appends to (default results/history.sqlite), or build one with python -m "
                           "gpuperf history ingest results/")
    if database and database != ":memory:" and create:
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"history {database}: its folder cannot be created ({exc.strerror or exc}); "
                               "choose a writable path with --history, or --history none") from exc
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions begin below, not in the driver
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.execute(f"PRAGMA page_size = {SQLITE_PAGE_BYTES}")  # a new database's; an existing one keeps its own
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        cursor.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_CHECKPOINT_PAGES}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        reading = connection.get_execution_options().get("gpuperf_read", False)
        connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")

    return engine


def create_engine(url: str, create: bool = True) -> sa.Engine:
    """The engine for ``url``; ``create``: a SQLite file (and its folder) that is not there is made, else it is
    a ``HistoryError`` that names the fix (a command that reads a history never makes one)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, create)
    try:
        return sa.create_engine(parsed, pool_pre_ping=True)
    except ImportError as exc:
        raise HistoryError(f"history {describe(url)}: the PostgreSQL driver is missing ({exc}): "
                           "pip install 'gpuperf[postgres]'") from exc
