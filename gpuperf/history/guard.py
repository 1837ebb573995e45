"""Reading a history that may be damaged, and checking one before a long run appends to it: a damaged page, a
row edited by hand, a server that does not answer, each told in one line that names the database and the fix.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from gpuperf.history.engine import create_engine, describe, sqlite_file
from gpuperf.install.command import upgrade_command
from gpuperf.history.schema import (BASES, SCHEMA_VERSION, STATUSES, SchemaError, meaningless_records,
                                    recorded_version)
from gpuperf.store.history_target import HistoryError, mask_text
from gpuperf.vocabulary import Status


#: What a damaged page or a row edited by hand raises while its values are read and decoded (a driver's error
#: is SQLAlchemy's); each is told as one line that names the database and the fix.
#: (``driver_rows.fetch`` reads through the driver's cursor: its errors are the driver's own.)
DAMAGE_ERRORS: tuple[type[BaseException], ...] = (
    SQLAlchemyError, sqlite3.Error, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
    zlib.error, orjson.JSONDecodeError, UnicodeError)


@contextmanager
def damage_told(url: str) -> Iterator[None]:
    """Reading the history at ``url``: a damaged database (a page overwritten, a row edited by
    hand) is a ``HistoryError`` that names the database, the cause and the fix, not a traceback."""
    try:
        yield
    except (HistoryError, SchemaError):
        raise
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:  # the server or the file, not its rows
        if missing_table(exc):
            raise damaged(url, exc) from None
        raise HistoryError(f"history {describe(url)}: cannot be opened ({mask_text(_reason(exc), url)[:300]}); "
                           "check the path or the server, or pass --history none") from None
    except DAMAGE_ERRORS as exc:
        raise damaged(url, exc) from None
    except Exception as exc:  # the PostgreSQL driver's own error, where a query runs on the driver's cursor
        if type(exc).__module__.partition(".")[0] != "psycopg":
            raise
        raise damaged(url, exc) from None


def missing_table(exc: BaseException) -> bool:
    """A table or column the schema has is not there (SQLite's "no such table", PostgreSQL's undefined table or
    column, SQLSTATE 42P01 / 42703): a history with a table dropped by hand, not an unreachable file or server."""
    sqlstate = getattr(exc, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", None)
    return sqlstate in ("42P01", "42703") or \
        "no such table" in str(exc) or "no such column" in str(exc)


def damaged(url: str, exc: BaseException) -> HistoryError:
    """The one line of a history that is damaged or was edited by hand, naming ``exc`` without the password."""
    cause = mask_text(_reason(exc), url)[:200] or type(exc).__name__
    return HistoryError(f"history {describe(url)}: cannot be read, it is damaged or was edited by hand "
                        f"({type(exc).__name__}: {cause}); restore it from a copy, or build a new one with "
                        "python -m gpuperf history ingest results/ --history NEW")


def require_readable(connection: sa.Connection, where: str, url: str, pages: bool = True) -> None:
    """A history a reader can read as it is: of this gpuperf's schema (``require_current``), and whole (its pages
    checked here unless ``pages`` is off: the caller checks them aside, ``History``'s ``check_aside``)."""
    require_current(recorded_version(connection), where)
    with damage_told(url):
        if pages:
            check_integrity(connection)
        check_meaning(connection)


#: ``runs.started_utc`` as ``rows.started_instant`` writes it (``2026-11-30T12:49:51.000000+00:00``), as a SQLite
#: GLOB and a PostgreSQL regular expression.
_INSTANT_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]+00:00"
_INSTANT_REGEX = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\+00:00$"
def check_meaning(connection: sa.Connection) -> None:
    """Rows that decode but say what no run could (edited by hand: a run started ``'yesterday'``, a status
    ``'BOGUS'``, a figure of ``-1`` or ``'abc'``) make the history unreadable for every reader alike, with the
    first such row named: a ``ValueError`` that ``damage_told`` tells. One scan of the runs, and the records'
    partial index of such rows (``schema.MEANING_INDEX``: empty unless a row was edited so, it costs what it
    holds; the query's condition is the index's, which is how the planner takes it) where the history has it,
    else a scan of every record."""
    sqlite = connection.dialect.name == "sqlite"
    instant = "started_utc GLOB :instant" if sqlite else "started_utc ~ :instant"
    run = connection.execute(sa.text(f"SELECT run_id, source, started_utc FROM runs WHERE started_utc IS NOT NULL "
                                     f"AND NOT ({instant}) LIMIT 1"),
                             {"instant": _INSTANT_GLOB if sqlite else _INSTANT_REGEX}).first()
    if run is not None:
        raise ValueError(f"run {str(run[0])[:10]} (from {run[1]}) has started_utc {str(run[2])[:40]!r}, which is not "
                         "an instant in UTC")
    found = connection.execute(sa.text(f"SELECT pk, status, basis, value, value_at_max_clock FROM records WHERE "
                                       f"{meaningless_records(connection.dialect.name)} LIMIT 1")).first()
    if found is not None:
        case = connection.execute(sa.text("SELECT case_id, run_pk FROM records WHERE pk = :pk"),
                                  {"pk": found[0]}).first()
        _, status, basis, value, at_max = found
        field, said, rule = (("status", status, f"not one of {', '.join(STATUSES)}")
                             if status is not None and status not in STATUSES else
                             ("basis", basis, "neither time nor cycles") if basis is not None and basis not in BASES else
                             ("value", value, "not a positive number") if not _positive(value, status) else
                             ("value_at_max_clock", at_max, "not a positive number"))
        raise ValueError(f"{field} {str(said)[:24]!r} of {str(case[0] if case else '?')[-80:]} in run "
                         f"{case[1] if case else '?'}: {rule}")


def _positive(value: object, status: object) -> bool:
    """A figure as a record holds it: a number, positive unless the record is an ``ERROR``'s (or none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value is None
    return value > 0 or status == Status.ERROR


def check_integrity(connection: sa.Connection) -> None:
    """A SQLite history read as it is: SQLite reads only the pages a query touches, so a page overwritten where the
    query does not look (an index, a run's document) would pass unseen; ``PRAGMA quick_check`` reads every page once
    (milliseconds for a history of megabytes). Raises ``sqlite3.DatabaseError`` naming the first problem, which
    ``damage_told`` tells as a damaged database."""
    if connection.dialect.name != "sqlite":
        return  # a server checks its own pages
    problems = [str(row[0]) for row in connection.exec_driver_sql("PRAGMA quick_check(1)")]
    if problems != ["ok"]:
        said = " ".join(line for line in "\n".join(problems).splitlines() if not line.startswith("***"))
        raise sqlite3.DatabaseError(f"quick_check: {said[:200] or 'no answer'}")


def _reason(exc: BaseException) -> str:
    original = getattr(exc, "orig", None)
    return str(original or exc).strip().splitlines()[0] if str(original or exc).strip() else ""


def check_appendable(url: str) -> None:
    """Before a long run that appends to the history only at its end (``ab``): a ``HistoryError`` now, naming the
    cause and the fix, unless the history at ``url`` can be appended to. A SQLite file that is there must be a
    gpuperf history (or empty) this gpuperf can read, in a writable folder; one that is not there, a folder that
    is or can be made writable; a PostgreSQL server must answer. Nothing is created or changed."""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        folder = next(folder for folder in path.parents if folder.exists())
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise HistoryError(f"history {describe(url)}: {folder} is not a writable folder, so the history "
                               "cannot be made there; choose a writable path with --history")
        return
    if path is not None and (not os.access(path, os.R_OK | os.W_OK) or not os.access(path.parent, os.W_OK)):
        raise HistoryError(f"history {describe(url)}: the file (or its folder) is not writable for this user, so "
                           "no run could be appended; make it writable, or choose another --history")
    engine = create_engine(url, create=False, read_only=True)
    try:
        with damage_told(url), engine.connect() as connection:
            version = recorded_version(connection)
            tables = sa.inspect(connection).get_table_names()
    finally:
        engine.dispose()
    if version > SCHEMA_VERSION:
        raise SchemaError(f"{describe(url)}: the history database has schema version {version}, newer than the "
                          f"{SCHEMA_VERSION} this gpuperf knows; upgrade gpuperf, or choose another --history")
    if version == 0 and tables:
        raise HistoryError(f"history {describe(url)}: holds tables of another program ({', '.join(tables[:3])}), "
                           "no gpuperf history; choose another --history (a new file is made)")


def require_current(version: int, where: str) -> None:
    """A history a reading command may read as it is: one of this gpuperf's schema (``version`` is the one the
    database records; a reader neither creates nor migrates one), else the error that names the fix."""
    if version == 0:
        raise HistoryError(f"history {where}: holds no gpuperf history; pass --history the database that pytest "
                           "perf_tests appends to, or build one with python -m gpuperf history ingest results/")
    if version > SCHEMA_VERSION:
        raise SchemaError(f"{where}: the history database has schema version {version}, newer than the "
                          f"{SCHEMA_VERSION} this gpuperf knows; upgrade gpuperf ({upgrade_command()}), or "
                          "point --history (or $GPUPERF_HISTORY) at another database")
    if version < SCHEMA_VERSION:
        raise HistoryError(f"history {where}: has schema version {version}, older than this gpuperf's "
                           f"{SCHEMA_VERSION}, and a command that only reads it does not migrate it; migrate it by "
                           "appending to it (python -m gpuperf history ingest results/ --history the same "
                           "database), or read it with the gpuperf version that wrote it")
