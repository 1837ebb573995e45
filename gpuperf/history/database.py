"""The history store: every run and its records in SQLite (the default) or PostgreSQL, one code path for both.

A target is ``none`` (no history), a URL (``sqlite:///path``, ``postgresql://…``) or a file path (SQLite); the
engine and its SQLite settings are ``engine``'s (WAL, a busy timeout, writers queued by ``BEGIN IMMEDIATE``). On
PostgreSQL a migration holds an advisory lock, so two jobs opening a fresh database never both create it.
Appending a run already present (same run id) is a no-op, also when two processes append it at once. A command
that only reads a history opens it with ``create=False``: it never makes one.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
import functools
import threading
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from gpuperf.history import figures as history_series
from gpuperf.history import rows as history_rows
from gpuperf.history.driver_rows import fetch, fetcher
from gpuperf.history.engine import create_engine as create_engine
from gpuperf.history.engine import describe as describe
from gpuperf.history.backfill import IngestReport, Prepared, ingest_files, prepare, selected_files
from gpuperf.history.rows import RunSummary, started_instant
from gpuperf.history.schema import (AT_MAX_CLOCK, CYCLES, JUDGED_FIGURE, RECORDS, RUN_DOCUMENTS,
                                    RUNS, SCHEMA_VERSION, SERIES, SERIES_INDEX, SchemaError, create_series_index,
                                    MEANING_INDEX, create_meaning_index, has_index,
                                    decode_document_bytes, has_series_index, migrate, recorded_version)
from gpuperf.store.history_target import HistoryError as HistoryError  # the history's error
from gpuperf.store.history_target import mask_text
from gpuperf.history.guard import check_integrity, damage_told, damaged, missing_table, require_readable
from gpuperf.history.writes import KEYS_AT_ONCE, SeriesNumbers, driver_cursor, insert_run, preparing
from gpuperf.store.history_target import resolve_target as resolve_target
from gpuperf.store.history_target import sqlite_url as sqlite_url
from gpuperf.store.history_target import to_url as to_url


#: Results files ingested per transaction.
INGEST_BATCH = 100
#: An ingest of this many files or more is a backfill (``History.bulk``): the series index is built at its end.
BULK_RUNS = 1000
#: PostgreSQL advisory lock key held while a database's schema is migrated.
_MIGRATION_LOCK = 0x67707066


#: The columns of a ``RunSummary``, in the order of its fields.
_SUMMARY_COLUMNS = [RUNS.c[field.name] for field in dataclasses.fields(RunSummary)]


class History:
    """One history database, migrated to the current schema when opened. ``create``: a database that is not there
    is made (a suite's append, an ingest); without it, one that is not there, or holds no history, is a
    ``HistoryError`` that names the fix (the commands that only read a history)."""

    def __init__(self, url: str, create: bool = True, check_aside: bool = False) -> None:
        self.url = url
        self.where = describe(url)
        self.engine = create_engine(url, create, read_only=not create)
        self._series = SeriesNumbers()  # series numbers known in the transaction under way
        self._aside: threading.Thread | None = None
        self._aside_found: list[BaseException] = []
        try:
            if create:
                self._migrate()
            else:
                self._require_history(check_aside and self.engine.dialect.name == "sqlite")
        except SQLAlchemyError as exc:
            self.engine.dispose()
            if missing_table(exc):  # a table dropped by hand: damage, not an unreachable file or server
                raise damaged(url, exc) from None
            raise HistoryError(f"history {self.where}: cannot be opened ({mask_text(_reason(exc), self.url)}); "
                               "check the path or the server, or pass --history none") from exc
        except (SchemaError, HistoryError):
            self.engine.dispose()
            raise

    def close(self) -> None:
        if self._aside is not None:
            self._aside.join()
        self.engine.dispose()

    def verified(self) -> None:
        """The pages checked aside (``check_aside``) found whole: waits for the check, raises what it found."""
        if self._aside is not None:
            self._aside.join()
        if self._aside_found:
            raise self._aside_found[0]

    def __enter__(self) -> History:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        try:
            if exc_type is None:
                self.verified()
        finally:
            self.close()

    @contextmanager
    def reading(self) -> Iterator[sa.Connection]:
        with self.engine.connect().execution_options(gpuperf_read=True) as connection, connection.begin():
            yield connection

    def _require_history(self, aside: bool = False) -> None:
        """A history of this gpuperf's schema, whole, read as it is: a reader neither creates nor migrates one.
        ``aside``: a SQLite file's pages (``guard.check_integrity``, which reads every page: 2 s of a 10,000-run
        history) are checked on a thread of their own while the reader reads (SQLite releases the GIL), and the
        reader gets what it found when it leaves the ``with`` block, before it has told anything (``verified``)."""
        with self.reading() as connection:
            require_readable(connection, self.where, self.url, pages=not aside)
        if aside:
            self._aside = threading.Thread(target=self._check_pages, name="history-pages", daemon=True)
            self._aside.start()

    def _check_pages(self) -> None:
        try:
            with damage_told(self.url), self.reading() as connection:
                check_integrity(connection)
        except BaseException as exc:  # told by ``verified`` on the reader's thread
            self._aside_found.append(exc)

    def _migrate(self) -> None:
        with self.reading() as connection:
            if recorded_version(connection) == SCHEMA_VERSION and has_series_index(connection) and \
                    has_index(connection, MEANING_INDEX):
                return
        with self.engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            migrate(connection, self.where)
            create_series_index(connection)  # after a backfill that was interrupted
            create_meaning_index(connection)  # a history written before the readers' check had it

    def append(self, document: dict[str, Any], source: str, text: str | None = None) -> bool:
        """Add a run and its records in one transaction; ``False`` when the run was already there. ``text`` is the
        document's results-file text (its identity); without one, its canonical JSON."""
        return self.append_batch([(document, source, text)])[0]

    def append_batch(self, items: Sequence[tuple[dict[str, Any], str, str | None]]) -> list[bool]:
        """Several runs in one transaction (a backfill); per run, whether it was added. When another process
        appends one of them at the same moment, they are retried one at a time.

        Each run's rows are built and its document compressed on a helper thread while the previous run is
        written: compression and SQLite's writing both release the GIL, so the two overlap on two cores."""
        for document, source, _ in items:
            history_rows.check_document(document, source)
        texts = [history_rows.canonical_text(document) if text is None else text for document, _, text in items]
        return self._write([history_rows.run_id(text) for text in texts], [source for _, source, _ in items],
                           lambda index: prepare(items[index][0], items[index][1], texts[index]), aside=True)

    def append_prepared(self, items: Sequence[tuple[str, Prepared]]) -> list[bool]:
        """``append_batch`` of runs already prepared (``backfill.prepare``), given with their sources."""
        return self._write([str(prepared[0]["run_id"]) for _, prepared in items], [source for source, _ in items],
                           lambda index: items[index][1])

    def _write(self, ids: Sequence[str], sources: Sequence[str], prepared: Callable[[int], Prepared],
               aside: bool = False) -> list[bool]:
        """Write the runs ``prepared(index)`` gives, but those present, in one transaction; ``aside``: each one
        prepared on a helper thread while the one before is written (runs prepared already need none)."""
        try:
            self._series.clear()
            with self.engine.begin() as connection, preparing(aside) as each:
                present = {row[0] for row in connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id.in_(ids)))}
                wanted = [index for index, run in enumerate(ids) if run not in present and ids.index(run) == index]
                with driver_cursor(connection) as cursor:
                    for run, body, columns in each(prepared, wanted):
                        self._insert(connection, cursor, run, body, columns)
            self._series.clear()
            added = set(wanted)
            return [index in added for index in range(len(ids))]
        except IntegrityError:
            self._series.clear()
            if len(ids) == 1:
                return [False]  # another process appended this run at the same moment
            return [self._write([ids[index]], [sources[index]], functools.partial(_fixed, prepared, index))[0]
                    for index in range(len(ids))]
        except SQLAlchemyError as exc:
            named = ", ".join(sources[:3]) + (", …" if len(sources) > 3 else "")
            raise HistoryError(f"history {self.where}: the run from {named} was not appended "
                               f"({mask_text(_reason(exc), self.url)}); nothing of it was written") from exc

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """A backfill: the series index is dropped while it runs and built once at its end (keeping it up to
        date costs half of each run's writing). Reads stay right meanwhile, only slower; a backfill that is
        interrupted leaves it to the next opening of the database to rebuild."""
        with self.engine.begin() as connection:
            connection.execute(sa.text(f"DROP INDEX IF EXISTS {SERIES_INDEX}"))
        try:
            yield
        finally:
            with self.engine.begin() as connection:
                create_series_index(connection)

    def _insert(self, connection: sa.Connection, cursor: Any, run: dict[str, Any], body: bytes,
                columns: list[list[Any]]) -> None:
        """One run's rows, written through the driver's ``cursor`` of ``connection``'s transaction."""
        insert_run(connection, cursor, self._series, run, body, columns)

    def ingest(self, paths: Sequence[Path], batch: int = INGEST_BATCH, exclude: Sequence[str] = (),
               workers: int | None = None, selected: tuple[list[Path], list[Path]] | None = None) -> IngestReport:
        """Backfill from results files and folders of them, but those whose name matches an ``exclude`` glob; a
        file that is not a results file is refused, named. Files are read and checked in ``workers`` processes
        (default: one per core) while this one writes; a file whose run is held already is counted present
        unparsed. Many files make a backfill (``bulk``) from the first run written. ``selected``: the files
        ``backfill.selected_files`` found under ``paths`` already."""
        files, ab_runs = selected if selected is not None else selected_files(paths, exclude)
        with self.reading() as connection:
            present = frozenset(row[0] for row in connection.execute(sa.select(RUNS.c.run_id)))
        bulk = False
        with ExitStack() as backfill:
            def write(items: Sequence[tuple[str, Prepared]]) -> list[bool]:
                nonlocal bulk
                if not bulk and len(files) >= BULK_RUNS:  # from the first run to write: with none, no index rebuilt
                    backfill.enter_context(self.bulk())
                    bulk = True
                return self.append_prepared(items)

            report = ingest_files(files, write, batch, workers, present)
        return dataclasses.replace(report, ab_runs=list(ab_runs))

    def runs(self, gpu: str | None = None, since: str | None = None) -> dict[int, RunSummary]:
        """The runs (of one GPU model, started at or after ``since``), in run order (the instants they started,
        ``runs_query``), by pk. A run whose ``started`` is not a timestamp is refused, named."""
        with self.reading() as connection:
            rows = [list(row) for row in fetch(connection, runs_query(_SUMMARY_COLUMNS, gpu, since))]
            unplaced = connection.execute(sa.select(RUNS.c.run_id, RUNS.c.source, RUNS.c.started)
                                          .where(RUNS.c.started_utc.is_(None)).limit(1)).first()
        if unplaced is not None:
            raise HistoryError(f"history {self.where}: run {unplaced.run_id[:10]} (from {unplaced.source}) started "
                               f"{unplaced.started[:40]!r}, which is not a timestamp, so its place among the runs "
                               "is unknown; correct that file's run.started and ingest it into a new history")
        dirty = _SUMMARY_COLUMNS.index(RUNS.c.git_dirty)
        for row in rows:  # SQLite's Boolean is 0 or 1: made a bool, as SQLAlchemy does
            row[dirty] = None if row[dirty] is None else bool(row[dirty])
        return {row[0]: RunSummary(*row) for row in rows}

    def values(self, run_pks: Sequence[int] | None = None,
               case: str | None = None) -> list[tuple[str, str, int, float | None, str, bool]]:
        """``(case_id, method, run_pk, figure, status, at max clock)`` of the records, optionally of one case or
        some runs, grouped by case and method, in the order the runs were appended: the figure each record is
        judged on (``JUDGED_FIGURE``), and whether that is its figure at max clock."""
        query = sa.select(RECORDS.c.case_id, RECORDS.c.method, RECORDS.c.run_pk, JUDGED_FIGURE,
                          RECORDS.c.status, AT_MAX_CLOCK).order_by(RECORDS.c.case_id, RECORDS.c.method,
                                                                   RECORDS.c.run_pk)
        if case is not None:  # through the series index
            query = query.where(RECORDS.c.series_pk.in_(sa.select(SERIES.c.pk).where(SERIES.c.case_id == case)))
        with self.reading() as connection:
            rows = fetch(connection, query)
        if run_pks is not None:
            wanted = set(run_pks)
            rows = [row for row in rows if row[2] in wanted]
        return [(row[0], row[1], row[2], row[3], row[4], bool(row[5])) for row in rows]

    def time_figures(self, case: str, method: str, run_pks: Sequence[int] | None = None) -> dict[int, float | None]:
        """The measured figure (time-based: ``value``) of ``case`` by ``method`` in each of those runs (every run
        when ``None``), shown beside the figure at max clock a case is judged on; read through the series index."""
        query = sa.select(RECORDS.c.run_pk, RECORDS.c.value).where(RECORDS.c.series_pk.in_(_series_number(case, method)))
        found: dict[int, float | None] = {}
        with self.reading() as connection:
            if run_pks is None:
                return {int(pk): value for pk, value in fetch(connection, query)}
            wanted = sorted(set(run_pks))
            for start in range(0, len(wanted), KEYS_AT_ONCE):  # through the series index, run by run
                found.update((int(pk), value) for pk, value in fetch(
                    connection, query.where(RECORDS.c.run_pk.in_(wanted[start:start + KEYS_AT_ONCE]))))
        return found

    def series_columns(self) -> history_series.Columns:
        """The judged figures as columns for ``changes.series_from_columns``: ``(case_id, method,
        count)`` per group, then every group's run pks and values, in group order (``figures``)."""
        with self.reading() as connection:
            return history_series.series_columns(connection)

    def kernels_at(self, run_pks: Sequence[int]) -> dict[tuple[str, int], tuple[str, str | None]]:
        """Every record's kernels in those runs, by case and run pk: their names and, where known, their identity
        (``rows.kernel_identity``); read through the runs' index, a few hundred runs at a time."""
        found: dict[tuple[str, int], tuple[str, str | None]] = {}
        wanted = sorted(set(run_pks))
        with self.reading() as connection:
            for start in range(0, len(wanted), KEYS_AT_ONCE):
                query = sa.select(RECORDS.c.case_id, RECORDS.c.run_pk, RECORDS.c.kernels, RECORDS.c.kernel_identity
                                  ).where(RECORDS.c.run_pk.in_(wanted[start:start + KEYS_AT_ONCE]))
                found.update({(case, int(pk)): (kernels or "", identity)
                              for case, pk, kernels, identity in fetch(connection, query)})
        return found

    def series_classes(self) -> dict[tuple[str, str], bool]:
        """Whether each series' case is clock-bound (its last record has a figure at max clock, which only a
        clock-bound case has): the class a host's offset is taken from where it has few runs of a case."""
        last = sa.select(RECORDS.c.value_at_max_clock.is_not(None)).where(
            RECORDS.c.series_pk == sa.bindparam("series", None, type_=sa.Integer)).order_by(
            RECORDS.c.run_pk.desc()).limit(1)
        with self.reading() as connection:
            keys = fetch(connection, sa.select(SERIES.c.pk, SERIES.c.case_id, SERIES.c.method))
            with fetcher(connection, last) as first_of:
                return {(str(case), str(method)): bool(rows[0][0]) for pk, case, method in keys
                        if (rows := first_of({"series": pk}))}

    def spreads(self, case: str, method: str, run_pks: Sequence[int]) -> dict[int, float | None]:
        """The sample spread (relative IQR) of the figure each run of ``case`` by ``method`` is judged on: its
        cycles' where it is judged at max clock, else its time's."""
        judged = sa.case((RECORDS.c.basis == CYCLES, RECORDS.c.cycles_spread), else_=RECORDS.c.spread)
        query = sa.select(RECORDS.c.run_pk, judged.label("spread")).where(
            RECORDS.c.series_pk.in_(_series_number(case, method)))
        wanted = set(run_pks)
        with self.reading() as connection:
            return {int(pk): spread for pk, spread in fetch(connection, query) if pk in wanted}

    def case_ids(self, pattern: str) -> list[str]:
        """Case ids equal to ``pattern``, else containing it."""
        with self.reading() as connection:
            found = [row[0] for row in connection.execute(sa.select(SERIES.c.case_id).distinct())]
        exact = [case for case in found if case == pattern]
        return exact or sorted(case for case in found if pattern in case)

    def record_data(self, case: str, run_pk: int) -> dict[str, Any] | None:
        """The results-file record of ``case`` in that run, every field of it, from the run's document."""
        position = sa.select(RECORDS.c.position).where(RECORDS.c.case_id == case, RECORDS.c.run_pk == run_pk)
        with self.reading() as connection:
            index = connection.execute(position).scalar()
            documents = run_documents(connection, [run_pk]) if index is not None else {}
        if index is None or run_pk not in documents:
            return None
        return dict(documents[run_pk]["records"][index])


def _series_number(case: str, method: str) -> sa.Select[tuple[int]]:
    """The number of the series of ``case`` by ``method`` (``""`` for none), for a query through the series index."""
    return sa.select(SERIES.c.pk).where(SERIES.c.case_id == case, SERIES.c.method == method)


def runs_query(columns: Sequence[Any], gpu: str | None = None, since: str | None = None) -> sa.Select[Any]:
    """``columns`` of the runs (of GPU model ``gpu``, started at or after ``since``: a date or a date-time, UTC
    unless it says otherwise) in run order: the instants they started (``started_utc``), then as appended."""
    query = sa.select(*columns).order_by(RUNS.c.started_utc, RUNS.c.pk)
    if gpu:
        query = query.where(RUNS.c.gpu_slug == gpu)
    if since:
        instant = started_instant(since)
        if instant is None:
            raise HistoryError(f"--since {since!r} is not an ISO date; use e.g. 2026-11-30 or 2026-11-30T12:00")
        query = query.where(RUNS.c.started_utc >= instant)
    return query


def _fixed(prepared: Callable[[int], Prepared], index: int, _ignored: int) -> Prepared:
    return prepared(index)


def run_documents(connection: sa.Connection, run_pks: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Those runs' documents, decoded (their bytes handed to orjson as they are: it checks the UTF-8)."""
    query = sa.select(RUN_DOCUMENTS.c.run_pk, RUN_DOCUMENTS.c.body).where(RUN_DOCUMENTS.c.run_pk.in_(list(run_pks)))
    return {int(pk): orjson.loads(decode_document_bytes(body)) for pk, body in connection.execute(query)}


def records_with_data(connection: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``records`` rows (with ``run_pk`` and ``position``) with ``data`` added: the results-file record as JSON
    text, from its run's document, as schema 3 kept it in a column of its own."""
    wanted = sorted({int(row["run_pk"]) for row in rows})
    documents: dict[int, dict[str, Any]] = {}
    for start in range(0, len(wanted), KEYS_AT_ONCE):
        documents.update(run_documents(connection, wanted[start:start + KEYS_AT_ONCE]))
    out = []
    for row in rows:
        document = documents.get(int(row["run_pk"]))
        records = document["records"] if document else []
        position = row.get("position")
        record = records[position] if isinstance(position, int) and 0 <= position < len(records) else None
        out.append({**row, "data": None if record is None else orjson.dumps(record).decode("utf-8")})
    return out


def _reason(exc: BaseException) -> str:
    original = getattr(exc, "orig", None)
    return str(original or exc).strip().splitlines()[0]


def open_history(url: str) -> History:
    return History(url)
