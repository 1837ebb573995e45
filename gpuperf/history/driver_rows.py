"""Many rows of a SQLAlchemy query read through the database driver's own cursor: a million rows as
SQLAlchemy rows would take seconds more. The statement is still SQLAlchemy's, compiled for the engine at hand,
so the code is one for SQLite and PostgreSQL.

Python's cycle collector is paused while rows are read: each row is a new tuple, and a million of them set it
going a thousand times over objects that hold no cycles (a quarter of a second of a million-row read).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa


def fetch(connection: sa.Connection, query: sa.Select[Any]) -> list[Any]:
    """All rows of ``query``, as the driver's tuples."""
    with fetcher(connection, query) as rows:
        return rows({})


@contextmanager
def fetcher(connection: sa.Connection, query: sa.Select[Any]) -> Iterator[Callable[[Mapping[str, Any]], list[Any]]]:
    """``fetch`` of ``query`` with values for its bound parameters, as often as needed: compiled once, run on one
    cursor."""
    compiled = query.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    statement, order = str(compiled), compiled.positiontup
    cursor = connection.connection.cursor()
    collecting = gc.isenabled()

    def rows(values: Mapping[str, Any]) -> list[Any]:
        parameters: Any = {**compiled.params, **values}
        if order is not None:  # a positional paramstyle (SQLite's "?")
            parameters = tuple(parameters[name] for name in order)
        cursor.execute(statement, parameters)
        return list(cursor.fetchall())

    gc.disable()
    try:
        yield rows
    finally:
        cursor.close()
        if collecting:
            gc.enable()
