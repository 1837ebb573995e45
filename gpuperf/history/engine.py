"""How the history's database is connected to: the engine for a URL, with SQLite's settings on every connection.

SQLite runs in WAL mode with a busy timeout, and every writing transaction starts with ``BEGIN IMMEDIATE``
(reading ones, marked ``gpuperf_read``, with ``BEGIN``): concurrent sessions on one machine queue for the write
lock instead of failing half-way. PostgreSQL's engine checks a pooled connection before it is used.

An engine for a command that only reads (``read_only``) cannot change its database: SQLite's file is opened
with ``mode=ro`` (and left in the journal mode it has: no WAL switched on), PostgreSQL's sessions are read-only
transactions. A 0-byte file, another program's database or a file that is not one is left byte for byte as
it was.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

from gpuperf.store.history_target import HistoryError, mask_text, mask_url

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
    """The URL without its password, for messages (``history_target.mask_url``: the one rule)."""
    return mask_url(url)


def _sqlite_engine(url: sa.URL, create: bool, read_only: bool) -> sa.Engine:
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
    if read_only and database and database != ":memory:":  # SQLite's own guard: no write reaches the file
        url = url.set(database=f"file:{quote(str(Path(database).resolve()))}", query={"mode": "ro", "uri": "true"})
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions begin below, not in the driver
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        if not read_only:  # each of these writes the file (a reader leaves it in the mode it has)
            cursor.execute(f"PRAGMA page_size = {SQLITE_PAGE_BYTES}")  # a new database's; one there keeps its own
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_CHECKPOINT_PAGES}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        reading = connection.get_execution_options().get("gpuperf_read", False)
        connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")

    return engine


def create_engine(url: str, create: bool = True, read_only: bool = False) -> sa.Engine:
    """The engine for ``url``; ``create``: a SQLite file (and its folder) that is not there is made, else it is
    a ``HistoryError`` that names the fix (a command that reads a history never makes one); ``read_only``: an
    engine that cannot write (the module's docstring)."""
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as exc:
        cause = mask_text(str(exc), url).splitlines()[0][:200]
        raise HistoryError(f"history {mask_url(url)!r}: not a database URL ({cause}); "
                           "write sqlite:///PATH or postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE") from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, create, read_only)
    options = {"connect_args": {"options": "-c default_transaction_read_only=on"}} if read_only else {}
    try:
        return sa.create_engine(parsed, pool_pre_ping=True, **options)
    except ImportError as exc:
        from gpuperf.install.command import install_command

        raise HistoryError(f"history {describe(url)}: the PostgreSQL driver is missing ({exc}): "
                           f"{install_command('postgres')}") from exc


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (``None`` for another engine's, or one naming no file)."""
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


@contextmanager
def removed_unless_kept(url: str) -> Iterator[list[bool]]:
    """A SQLite file that is not there yet, and the folders made for it, removed again at the end unless the
    caller sets the flag it is given (``kept[0] = True``): a command that fails, or adds nothing, leaves no new
    file behind. Another engine's database is left as it is."""
    kept = [False]
    path = sqlite_file(url)
    if path is None or os.path.lexists(path):
        yield kept
        return
    made = [folder for folder in [path.parent, *path.parent.parents] if not folder.exists()]
    try:
        yield kept
    finally:
        if not kept[0]:
            for name in (path, *(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
                name.unlink(missing_ok=True)
            for folder in made:  # the innermost first
                try:
                    folder.rmdir()
                except OSError:
                    break
