"""A run's rows written through the driver's own cursor: the INSERTs compiled once per dialect, the cursor on a
SQLAlchemy transaction (its errors raised as SQLAlchemy raises them), each record's series number, and the runs
prepared on a helper thread while the one before is written. Through SQLAlchemy, a backfill's rows cost more to
hand over than to write (``History._write`` uses this module).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from itertools import repeat
from typing import Any

import sqlalchemy as sa

from gpuperf.history.backfill import Prepared
from gpuperf.history.rows import CASE_COLUMN, METHOD_COLUMN, RECORD_VALUE_COLUMNS
from gpuperf.history.schema import DOCUMENT_ENCODING, RECORDS, RUN_DOCUMENTS, RUNS, SERIES

#: Keys per ``IN (…)`` query: cases whose series numbers are looked up, runs whose rows or documents are read.
KEYS_AT_ONCE = 500


def insert_run(connection: sa.Connection, cursor: Any, series: SeriesNumbers, run: dict[str, Any], body: bytes,
               columns: list[list[Any]]) -> None:
    """One run's rows (its run row, its document, its records' ``columns``), written through the driver's
    ``cursor`` of ``connection``'s transaction; ``series``: the series numbers known in that transaction."""
    dialect = connection.dialect
    statement, order, returning = _driver_insert(RUNS, dialect, tuple(run), returning=True)
    cursor.execute(statement, _parameters(order, run))
    pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    document = {"run_pk": pk, "encoding": DOCUMENT_ENCODING, "body": body}
    statement, order, _ = _driver_insert(RUN_DOCUMENTS, dialect, tuple(document))
    cursor.execute(statement, _parameters(order, document))
    if columns[0]:
        numbers = series.column(connection, columns[CASE_COLUMN], columns[METHOD_COLUMN])
        statement, named = _records_insert(dialect)
        rows: list[Any] = list(zip(repeat(pk), *columns, numbers))
        if named:  # PostgreSQL's %(name)s; SQLite's "?" take the tuples as they are
            rows = [dict(zip(RECORD_VALUE_COLUMNS, row)) for row in rows]
        cursor.executemany(statement, rows)


class SeriesNumbers:
    """The ``series`` number of each ``(case_id, method)`` known in the transaction under way, those not yet in
    ``series`` added as they are met (a concurrent writer's addition of the same key is taken, not repeated).
    Cleared with each transaction: one that is rolled back takes its additions with it."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, str], int] = {}
        self._last: tuple[tuple[list[str], list[str | None]], list[int]] | None = None

    def clear(self) -> None:
        self.known.clear()
        self._last = None

    def column(self, connection: sa.Connection, case_ids: list[str], methods: list[str | None]) -> list[int]:
        """Each record's series number, from its case and method. A run whose cases and methods are those of
        the run before (a backfill's runs are) takes the same numbers, found by comparing the columns."""
        if self._last is not None and self._last[0] == (case_ids, methods):
            return self._last[1]
        keys = list(zip(case_ids, [method or "" for method in methods]))
        missing = set(keys) - self.known.keys()
        if missing:
            connection.execute(_insert_new_series(connection.dialect.name),
                               [{"case_id": case, "method": method} for case, method in sorted(missing)])
            cases = sorted({case for case, _ in missing})
            for start in range(0, len(cases), KEYS_AT_ONCE):
                query = sa.select(SERIES.c.case_id, SERIES.c.method, SERIES.c.pk).where(
                    SERIES.c.case_id.in_(cases[start:start + KEYS_AT_ONCE]))
                self.known.update({(case, method): pk for case, method, pk in connection.execute(query)})
        numbers = [self.known[key] for key in keys]
        self._last = ((case_ids, methods), numbers)
        return numbers


DriverInsert = tuple[str, "tuple[str, ...] | None", bool]


@lru_cache(maxsize=16)
def _driver_insert(table: sa.Table, dialect: sa.Dialect, keys: tuple[str, ...],
                   returning: bool = False) -> DriverInsert:
    """An INSERT of ``keys`` into ``table`` as the driver takes it, compiled once (through SQLAlchemy, a run's
    rows cost more to hand over than to write): the statement, its parameters' order (``None``: named), and
    whether it returns the new ``pk`` (asked for and the engine has RETURNING; else the cursor's ``lastrowid``
    is it)."""
    returning = returning and bool(dialect.insert_returning)
    statement = sa.insert(table).returning(table.c.pk) if returning else sa.insert(table)
    compiled = statement.compile(dialect=dialect, column_keys=list(keys))
    return str(compiled), _order(compiled), returning


@lru_cache(maxsize=4)
def _records_insert(dialect: sa.Dialect) -> tuple[str, bool]:
    """The records' INSERT, whose rows are handed over as they are made (``RECORD_VALUE_COLUMNS`` order), and
    whether its parameters are named."""
    statement, order, _ = _driver_insert(RECORDS, dialect, RECORD_VALUE_COLUMNS)
    if order is not None and order != RECORD_VALUE_COLUMNS:
        raise AssertionError(f"the records' INSERT binds {order}, not {RECORD_VALUE_COLUMNS}")
    return statement, order is None


@contextmanager
def driver_cursor(connection: sa.Connection) -> Iterator[Any]:
    """The driver's own cursor on ``connection``'s transaction, for a run's rows: SQLAlchemy's making of an
    execution context costs a sixth of the writer's time per run of a backfill, and the statements are the
    driver's already (``_driver_insert``). A driver's error is raised as SQLAlchemy raises it (an
    ``IntegrityError`` for a run another process appended first)."""
    cursor = connection.connection.cursor()
    base = connection.dialect.loaded_dbapi.Error
    try:
        yield cursor
    except base as exc:
        raise sa.exc.DBAPIError.instance(None, None, exc, base, dialect=connection.dialect) from exc
    finally:
        cursor.close()


@contextmanager
def preparing(aside: bool) -> Iterator[Callable[[Callable[[int], Prepared], Sequence[int]], Iterable[Prepared]]]:
    """A ``map`` of the runs to write: on a helper thread (``History.append_batch`` says why), or in this one."""
    if not aside:
        yield map
        return
    from concurrent.futures import ThreadPoolExecutor  # here: a suite's append need not import it at start-up

    with ThreadPoolExecutor(max_workers=1) as helper:
        yield helper.map


def _order(compiled: sa.Compiled) -> tuple[str, ...] | None:
    order = getattr(compiled, "positiontup", None)
    return None if order is None else tuple(order)


def _parameters(order: tuple[str, ...] | None, values: Mapping[str, Any]) -> Any:
    """``values`` as the driver takes them: by name, or in the statement's order."""
    return values if order is None else tuple(values[name] for name in order)


def _insert_new_series(dialect: str) -> sa.Executable:
    """``INSERT INTO series … ON CONFLICT DO NOTHING``, as SQLite and PostgreSQL each spell it."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(SERIES).on_conflict_do_nothing()
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(SERIES).on_conflict_do_nothing()
