"""The history store: every run and its records in SQLite (the default) or PostgreSQL, one code path for both.

A target is ``none`` (no history), a URL (``sqlite:///path``, ``postgresql://…``) or a file path (SQLite).
SQLite runs in WAL mode with a busy timeout, and every writing transaction starts with ``BEGIN IMMEDIATE``:
concurrent sessions on one machine queue for the write lock instead of failing half-way. On PostgreSQL a
migration holds an advisory lock, so two jobs opening a fresh database never both create it. Appending a run
already present (same run id) is a no-op, also when two processes append it at once.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from gpuperf.store import history_rows
from gpuperf.store.history_rows import HistoryInputError
from gpuperf.store.history_schema import (RECORDS, RUNS, SCHEMA_VERSION, SERIES_COLUMNS, SchemaError, migrate,
                                          recorded_version)
from gpuperf.verdict.history_changes import LEFT_OUT, RunSummary

#: Environment variable naming the history when ``--history`` is not given.
HISTORY_ENV = "GPUPERF_HISTORY"
#: The default SQLite file, relative to the rootdir of the suite.
DEFAULT_HISTORY = Path("results") / "history.sqlite"
NONE = "none"
#: Seconds a writer waits for SQLite's write lock before giving up.
SQLITE_BUSY_TIMEOUT_S = 60
#: Results files ingested per transaction.
INGEST_BATCH = 50
#: PostgreSQL advisory lock key held while a database's schema is migrated.
_MIGRATION_LOCK = 0x67707066


class HistoryError(RuntimeError):
    """The history cannot be opened, read or written; the message names the database and the fix."""


def resolve_target(option: str | None, environ: dict[str, str] | os._Environ[str], root: Path) -> str | None:
    """The history URL from ``--history``, else ``$GPUPERF_HISTORY``, else ``<root>/results/history.sqlite``;
    ``None`` for ``none``."""
    value = (option or environ.get(HISTORY_ENV, "") or "").strip()
    if not value:
        return sqlite_url(root / DEFAULT_HISTORY)
    if value.lower() == NONE:
        return None
    return to_url(value, root)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def to_url(value: str, root: Path) -> str:
    """A URL as SQLAlchemy takes it (PostgreSQL through psycopg 3), or a file path made a SQLite URL."""
    if "://" not in value:
        path = Path(value).expanduser()
        return sqlite_url(path if path.is_absolute() else root / path)
    scheme, rest = value.split("://", 1)
    if scheme in ("postgresql", "postgres"):
        return f"postgresql+psycopg://{rest}"
    if scheme in ("sqlite", "postgresql+psycopg"):
        return value
    raise HistoryError(f"history {value!r}: unknown database kind {scheme!r}; use a file path, sqlite:///PATH, "
                       "postgresql://user@host/db, or none")


def describe(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def _sqlite_engine(url: sa.URL) -> sa.Engine:
    database = url.database or ""
    if database and database != ":memory:":
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
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        reading = connection.get_execution_options().get("gpuperf_read", False)
        connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")

    return engine


def create_engine(url: str) -> sa.Engine:
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    try:
        return sa.create_engine(parsed, pool_pre_ping=True)
    except ImportError as exc:
        raise HistoryError(f"history {describe(url)}: the PostgreSQL driver is missing ({exc}): "
                           "pip install 'gpuperf[postgres]'") from exc


_SUMMARY_COLUMNS = [RUNS.c[name] for name in
                    ("pk", "run_id", "kind", "started", "gpu_slug", "host", "git_commit", "git_dirty", "branch",
                     "driver", "cuda_runtime", "cublas", "cupy")]


@dataclass(frozen=True)
class IngestReport:
    added: list[Path]
    present: list[Path]
    refused: list[tuple[Path, str]]


class History:
    """One history database, migrated to the current schema when opened."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = describe(url)
        self.engine = create_engine(url)
        try:
            self._migrate()
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise HistoryError(f"history {self.where}: cannot be opened ({_reason(exc)}); check the path or the "
                               "server, or pass --history none") from exc
        except SchemaError:
            self.engine.dispose()
            raise

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def reading(self) -> Iterator[sa.Connection]:
        with self.engine.connect().execution_options(gpuperf_read=True) as connection, connection.begin():
            yield connection

    def _migrate(self) -> None:
        with self.reading() as connection:
            if recorded_version(connection) == SCHEMA_VERSION:
                return
        with self.engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            migrate(connection, self.where)

    def append(self, document: dict[str, Any], source: str, text: str | None = None) -> bool:
        """Add a run and its records in one transaction; ``False`` when the run was already there. ``text`` is the
        document's results-file text (its identity); without one, its canonical JSON."""
        return self.append_batch([(document, source, text)])[0]

    def append_batch(self, items: Sequence[tuple[dict[str, Any], str, str | None]]) -> list[bool]:
        """Several runs in one transaction (a backfill); per run, whether it was added. When another process
        appends one of them at the same moment, they are retried one at a time."""
        rows = []
        for document, source, text in items:
            history_rows.check_document(document, source)
            text = history_rows.canonical_text(document) if text is None else text
            rows.append((history_rows.run_row(document, source, text),
                         [history_rows.record_row(record) for record in document["records"]]))
        try:
            with self.engine.begin() as connection:
                return [self._insert(connection, run, records) for run, records in rows]
        except IntegrityError:
            if len(rows) == 1:
                return [False]  # another process appended this run at the same moment
            return [self.append_batch([item])[0] for item in items]
        except SQLAlchemyError as exc:
            sources = ", ".join(source for _, source, _ in items[:3]) + (", …" if len(items) > 3 else "")
            raise HistoryError(f"history {self.where}: the run from {sources} was not appended "
                               f"({_reason(exc)}); nothing of it was written") from exc

    @staticmethod
    def _insert(connection: sa.Connection, run: dict[str, Any], records: list[dict[str, Any]]) -> bool:
        if connection.execute(sa.select(RUNS.c.pk).where(RUNS.c.run_id == run["run_id"])).first():
            return False
        inserted = connection.execute(sa.insert(RUNS).values(**run)).inserted_primary_key
        pk = inserted[0] if inserted is not None else None
        if records:
            connection.execute(sa.insert(RECORDS), [{**record, "run_pk": pk} for record in records])
        return True

    def ingest(self, paths: Sequence[Path], batch: int = INGEST_BATCH, exclude: Sequence[str] = ()) -> IngestReport:
        """Backfill from results files and folders of them, but those whose name matches an ``exclude`` glob; a
        file that is not a results file is refused, named."""
        report = IngestReport([], [], [])
        pending: list[tuple[dict[str, Any], str, str | None]] = []
        files = [path for path in history_rows.results_files(paths)
                 if not any(fnmatch.fnmatch(path.name, pattern) for pattern in exclude)]
        for path in [*files, None]:
            if path is not None:
                try:
                    document, text = history_rows.read_results_document(path)
                except HistoryInputError as exc:
                    report.refused.append((path, str(exc)))
                    continue
                pending.append((document, str(path), text))
            if pending and (path is None or len(pending) >= batch):
                for (_, source, _), added in zip(pending, self.append_batch(pending)):
                    (report.added if added else report.present).append(Path(source))
                pending = []
        return report

    def runs(self, gpu: str | None = None, since: str | None = None) -> dict[int, RunSummary]:
        query = sa.select(*_SUMMARY_COLUMNS).order_by(RUNS.c.started, RUNS.c.pk)
        if gpu:
            query = query.where(RUNS.c.gpu_slug == gpu)
        if since:
            query = query.where(RUNS.c.started >= since)
        with self.reading() as connection:
            return {row.pk: RunSummary(**row._asdict()) for row in connection.execute(query)}

    def values(self, run_pks: Sequence[int] | None = None,
               case: str | None = None) -> list[tuple[str, str, int, float | None, str]]:
        """``(case_id, method, run_pk, value, status)`` of the records, optionally of one case or some runs,
        grouped by case and method."""
        query = sa.select(*(RECORDS.c[name] for name in SERIES_COLUMNS)).order_by(RECORDS.c.case_id, RECORDS.c.method)
        if case is not None:
            query = query.where(RECORDS.c.case_id == case)
        with self.reading() as connection:
            rows = _fetch(connection, query)
        if run_pks is not None:
            wanted = set(run_pks)
            rows = [row for row in rows if row[2] in wanted]
        return [(row[0], row[1], row[2], row[3], row[4]) for row in rows]

    def series_columns(self) -> tuple[list[tuple[str, str, int]], np.ndarray, np.ndarray]:
        """The judged figures as columns for ``history_changes.series_from_columns``: ``(case_id, method,
        count)`` per group, then every group's run pks and values, in group order."""
        judged = sa.and_(RECORDS.c.status.not_in(sorted(LEFT_OUT)), RECORDS.c.value > 0)
        key = (RECORDS.c.case_id, RECORDS.c.method)
        groups = sa.select(*key, sa.func.count()).where(judged).group_by(*key).order_by(*key)
        figures = sa.select(RECORDS.c.run_pk, RECORDS.c.value).where(judged).order_by(*key)
        with self.reading() as connection:
            counted = [(str(case), str(method or ""), int(count)) for case, method, count in _fetch(connection, groups)]
            rows = _fetch(connection, figures)
        pks = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        values = np.fromiter((row[1] for row in rows), dtype=float, count=len(rows))
        return counted, pks, values

    def kernels(self, case: str, run_pks: Sequence[int]) -> dict[int, str]:
        """The kernels each of those runs' record of ``case`` names (``name + name``)."""
        query = sa.select(RECORDS.c.run_pk, RECORDS.c.kernels).where(
            RECORDS.c.case_id == case, RECORDS.c.run_pk.in_(list(run_pks)))
        with self.reading() as connection:
            return {row.run_pk: row.kernels or "" for row in connection.execute(query)}

    def case_ids(self, pattern: str) -> list[str]:
        """Case ids equal to ``pattern``, else containing it."""
        with self.reading() as connection:
            found = [row[0] for row in connection.execute(sa.select(RECORDS.c.case_id).distinct())]
        exact = [case for case in found if case == pattern]
        return exact or sorted(case for case in found if pattern in case)

    def record_data(self, case: str, run_pk: int) -> dict[str, Any] | None:
        query = sa.select(RECORDS.c.data).where(RECORDS.c.case_id == case, RECORDS.c.run_pk == run_pk)
        with self.reading() as connection:
            text = connection.execute(query).scalar()
        return None if text is None else dict(json.loads(text))


def _fetch(connection: sa.Connection, query: sa.Select[Any]) -> list[Any]:
    """All rows of ``query`` through the driver's cursor: a million rows as SQLAlchemy rows would take seconds
    more. The statement is still SQLAlchemy's, compiled for the engine at hand."""
    compiled = query.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    parameters: Any = compiled.params
    if compiled.positiontup is not None:  # a positional paramstyle (SQLite's "?")
        parameters = tuple(compiled.params[name] for name in compiled.positiontup)
    cursor = connection.connection.cursor()
    try:
        cursor.execute(str(compiled), parameters)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _reason(exc: BaseException) -> str:
    original = getattr(exc, "orig", None)
    return str(original or exc).strip().splitlines()[0]


def open_history(url: str) -> History:
    return History(url)
