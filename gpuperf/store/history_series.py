"""Every series' judged figures, as ``history changes`` reads them (``History.series_columns``).

One query a series, through the series index: the series number need not come back with each of a million rows,
and the rows go straight into arrays. Reading a row costs the driver far more than SQLite's finding it, so a
large history's series are shared among worker processes (forked: they import nothing), each with a connection
of its own; a small one, or a platform without ``fork``, is read in this process.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING

import sqlalchemy as sa

from gpuperf.store.fetching import fetch, fetcher
from gpuperf.store.history_schema import RECORDS, SERIES
from gpuperf.vocabulary import Status

if TYPE_CHECKING:
    import numpy as np

#: Records (the largest record number) below which the series are read in this process: forking workers
#: costs some 50 ms, which a few hundred thousand rows repay.
PARALLEL_RECORDS = 200_000

#: ``(case_id, method, count)`` per series, then their run pks and figures one after the other.
Columns = tuple[list[tuple[str, str, int]], "np.ndarray", "np.ndarray"]
#: Each series' run pks and figures, in run-pk order.
Figures = list[tuple["np.ndarray", "np.ndarray"]]


def _figures_query() -> sa.Select[tuple[int, float]]:
    judged = sa.and_(RECORDS.c.series_pk == sa.bindparam("series", None, type_=sa.Integer),
                     RECORDS.c.status.not_in(sorted(Status.UNJUDGED)), RECORDS.c.value > 0)
    return sa.select(RECORDS.c.run_pk, RECORDS.c.value).where(judged).order_by(RECORDS.c.run_pk)


def figures(connection: sa.Connection, numbers: Sequence[int]) -> Figures:
    """The judged figures of each of those series."""
    import numpy as np

    read = []
    with fetcher(connection, _figures_query()) as figures_of:
        for number in numbers:
            rows = figures_of({"series": number})
            pairs = np.fromiter(chain.from_iterable(rows), float, count=2 * len(rows)).reshape(-1, 2)
            read.append((pairs[:, 0].astype(np.int64), pairs[:, 1].copy()))
    return read


def _figures_apart(url: str, numbers: Sequence[int]) -> Figures:
    """``figures`` in a worker process, on a connection of its own."""
    from gpuperf.store.history_engine import create_engine

    engine = create_engine(url)
    try:
        with engine.connect().execution_options(gpuperf_read=True) as connection, connection.begin():
            return figures(connection, numbers)
    finally:
        engine.dispose()


def series_columns(url: str, connection: sa.Connection, workers: int | None = None) -> Columns:
    """The columns of the history at ``url`` (open on ``connection``), the series in order of ``(case_id,
    method)``; ``workers`` processes (default: one per core) share a large history's series."""
    import numpy as np

    names = sorted((str(case), str(method), int(pk)) for pk, case, method in fetch(connection, sa.select(SERIES)))
    records = connection.execute(sa.select(sa.func.max(RECORDS.c.pk))).scalar() or 0
    numbers = [number for _, _, number in names]
    workers = min(workers if workers is not None else (os.cpu_count() or 1), len(numbers))
    if workers >= 2 and records >= PARALLEL_RECORDS and _can_fork():
        read = _read_apart(url, numbers, workers)
    else:
        read = figures(connection, numbers)
    groups = [(case, method, len(pks)) for (case, method, _), (pks, _) in zip(names, read) if len(pks)]
    if not groups:
        return [], np.zeros(0, dtype=np.int64), np.zeros(0)
    return groups, np.concatenate([pks for pks, _ in read]), np.concatenate([values for _, values in read])


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _read_apart(url: str, numbers: Sequence[int], workers: int) -> Figures:
    """``figures`` of those series in ``workers`` processes, each reading every ``workers``-th series."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    shares = [list(numbers[start::workers]) for start in range(workers)]
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                             initializer=gc.disable) as pool:
        parts = list(pool.map(_figures_apart, [url] * workers, shares))
    read = {number: figure for share, part in zip(shares, parts) for number, figure in zip(share, part)}
    return [read[number] for number in numbers]
