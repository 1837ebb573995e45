"""Every series' judged figures, as ``history changes`` reads them (``History.series_columns``).

One query a series, through the series index: the series number need not come back with each of a million rows,
and the rows go straight into arrays, through the driver's own cursor (``driver_rows``: 1.4 s for 1.5 million records
here, where SQLAlchemy's rows took 2.5 s). Reading them in forked worker processes, one per core, gained nothing
measurable on the 2-core CI machine (1.39 s either way, evidence/history.md), so this process reads them all.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING

import sqlalchemy as sa

from gpuperf.history.driver_rows import fetch, fetcher
from gpuperf.history.schema import AT_MAX_CLOCK, JUDGED_FIGURE, RECORDS, SERIES
from gpuperf.vocabulary import Status

if TYPE_CHECKING:
    import numpy as np

#: ``(case_id, method, count)`` per series, then their run pks, figures and whether each figure is at max clock,
#: one series after the other.
Columns = tuple[list[tuple[str, str, int]], "np.ndarray", "np.ndarray", "np.ndarray"]
#: Each series' run pks, figures and whether each is at max clock, in run-pk order.
Figures = list[tuple["np.ndarray", "np.ndarray", "np.ndarray"]]


def _figures_query() -> sa.Select[tuple[int, float, int]]:
    judged = sa.and_(RECORDS.c.series_pk == sa.bindparam("series", None, type_=sa.Integer),
                     RECORDS.c.status.not_in(sorted(Status.UNJUDGED)), JUDGED_FIGURE > 0)
    return sa.select(RECORDS.c.run_pk, JUDGED_FIGURE, AT_MAX_CLOCK).where(judged).order_by(RECORDS.c.run_pk)


def figures(connection: sa.Connection, numbers: Sequence[int]) -> Figures:
    """The judged figures of each of those series (``JUDGED_FIGURE``), and whether each is at max clock."""
    import numpy as np

    read = []
    with fetcher(connection, _figures_query()) as figures_of:
        for number in numbers:
            rows = figures_of({"series": number})
            triples = np.fromiter(chain.from_iterable(rows), float, count=3 * len(rows)).reshape(-1, 3)
            read.append((triples[:, 0].astype(np.int64), triples[:, 1].copy(), triples[:, 2] > 0))
    return read


def series_columns(connection: sa.Connection) -> Columns:
    """The columns of the history open on ``connection``, the series in order of ``(case_id, method)``."""
    import numpy as np

    names = sorted((str(case), str(method), int(pk)) for pk, case, method in fetch(connection, sa.select(SERIES)))
    read = figures(connection, [number for _, _, number in names])
    groups = [(case, method, len(pks)) for (case, method, _), (pks, _, _) in zip(names, read) if len(pks)]
    if not groups:
        return [], np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=bool)
    return (groups, np.concatenate([pks for pks, _, _ in read]), np.concatenate([values for _, values, _ in read]),
            np.concatenate([flags for _, _, flags in read]))
