"""From the history's figures to change points that a person can act on. Pure.

A series is one case measured by one method on one GPU model, in run order, over all its hosts, unless the hosts
differ: when the medians of two hosts' figures are ``host_split`` or more apart (hosts of one model can differ by
more than runs on one host do), each host is a series of its own. Figures the gate could not judge
(``ERROR``, ``UNRELIABLE``, ``ANOMALY``) are left out. Each change point is told with its size, the last run
before it and the first after it (dates, commits), and whether the versions or the kernels changed there.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from dataclasses import dataclass, replace
from typing import overload

import numpy as np

from gpuperf.store.history_rows import RunSummary
from gpuperf.verdict.changepoints import DEFAULT_MIN_SIZE, ChangePoint, Settings, change_points
from gpuperf.verdict.gate import valid_figure
from gpuperf.vocabulary import Status

#: The ``host`` of a series pooled over every host of its GPU model.
ALL_HOSTS = "all hosts"

@dataclass(frozen=True)
class SeriesKey:
    gpu_slug: str
    host: str
    case_id: str
    method: str


@dataclass(frozen=True)
class Change:
    key: SeriesKey
    point: ChangePoint
    before: RunSummary  # the last run of the old level
    after: RunSummary  # the first run of the new level
    runs_since: int  # runs of the series from the first of the new level to the last, inclusive
    versions_changed: str  # "driver 570 → 580", or ""
    kernels_changed: str  # "A → B", or ""

    @property
    def host_changed(self) -> bool:
        """The runs on either side ran on different hosts (in a series pooled over its hosts)."""
        return self.before.host != self.after.host

    @property
    def slowdown(self) -> bool:
        return self.point.relative < 0


class Points(Sequence[tuple[int, float]]):
    """A series' ``(run_pk, figure)`` pairs in run order, held as two arrays (``pks``, ``values``): the
    change-point tests read the figures as an array, and a million of them never become a million tuples."""

    def __init__(self, pks: np.ndarray, values: np.ndarray) -> None:
        self.pks = pks
        self.values = values

    def __len__(self) -> int:
        return len(self.pks)

    @overload
    def __getitem__(self, index: int) -> tuple[int, float]: ...

    @overload
    def __getitem__(self, index: slice) -> Points: ...

    def __getitem__(self, index: int | slice) -> tuple[int, float] | Points:
        if isinstance(index, slice):
            return Points(self.pks[index], self.values[index])
        return int(self.pks[index]), float(self.values[index])

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return zip(self.pks.tolist(), self.values.tolist())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Points({list(self)!r})"

    def taken(self, rows: np.ndarray) -> Points:
        """The pairs at those positions (an index array or a mask)."""
        return Points(self.pks[rows], self.values[rows])


def _split_by_host(key: SeriesKey, points: Points, hosts: np.ndarray, host_names: Sequence[str],
                   host_split: float) -> dict[SeriesKey, Points]:
    """One series over all hosts, or one per host when two hosts' medians are ``host_split`` or more apart.
    ``hosts`` numbers each point's host (small integers: sorting by them is a counting sort)."""
    if np.all(hosts == hosts[0]):
        return {replace(key, host=host_names[hosts[0]]): points}
    counts = np.bincount(hosts)
    present = np.flatnonzero(counts)
    counts = counts[present]
    first = np.cumsum(counts) - counts
    by_figure = np.argsort(points.values)
    ranked = by_figure[np.argsort(hosts[by_figure], kind="stable")]  # by host, then by figure
    medians = _medians(points.values[ranked], first, counts)
    if medians.max() / medians.min() - 1 < host_split:
        return {key: points}
    by_host = np.argsort(hosts, kind="stable")  # each host's runs together, still in run order
    return {replace(key, host=host_names[host]): points.taken(by_host[start:start + count])
            for host, start, count in zip(present.tolist(), first.tolist(), counts.tolist())}


def _medians(ranked: np.ndarray, first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each group's median as ``np.median`` takes it (its middle figure, or the mean of the middle two), from
    figures sorted within their groups, which start at ``first`` and are ``counts`` long."""
    low, high = ranked[first + (counts - 1) // 2], ranked[first + counts // 2]
    medians: np.ndarray = np.where(counts % 2 == 1, low, (low + high) / 2)
    return medians


def series(rows: Iterable[tuple[str, str, int, float | None, str]], runs: Mapping[int, RunSummary],
           host_split: float = DEFAULT_MIN_SIZE) -> dict[SeriesKey, Points]:
    """``(case_id, method, run_pk, value, status)`` rows → ``(run_pk, value)`` per series, in run order (the
    order of ``runs``); rows of runs not in ``runs`` are left out (another GPU, before ``--since``)."""
    kept = sorted(((case_id, method or "", run_pk, float(value)) for case_id, method, run_pk, value, status in rows
                   if status not in Status.UNJUDGED and value is not None and valid_figure(value)),
                  key=lambda row: (row[0], row[1]))
    groups = [(case_id, method, len(list(group))) for (case_id, method), group
              in groupby(kept, key=lambda row: (row[0], row[1]))]
    return series_from_columns(groups, np.asarray([row[2] for row in kept], dtype=np.int64),
                               np.asarray([row[3] for row in kept], dtype=float), runs, host_split)


def series_from_columns(groups: Sequence[tuple[str, str, int]], pks: np.ndarray, values: np.ndarray,
                        runs: Mapping[int, RunSummary],
                        host_split: float = DEFAULT_MIN_SIZE) -> dict[SeriesKey, Points]:
    """``series`` from judged figures as columns: ``(case_id, method, count)`` per group, and the groups' run
    pks and values one after the other (what ``History.series_columns`` reads, a million rows in a second)."""
    size = max([*runs, int(pks.max()) if len(pks) else 0]) + 1
    host_names = list(dict.fromkeys(run.host for run in runs.values()))
    slug_names = list(dict.fromkeys(run.gpu_slug for run in runs.values()))
    host_index = {name: index for index, name in enumerate(host_names)}
    slug_index = {name: index for index, name in enumerate(slug_names)}
    order = np.full(size, -1, dtype=np.int64)
    host_of = np.zeros(size, dtype=np.int16 if len(host_names) <= np.iinfo(np.int16).max else np.int64)  # sorts fast
    slug_of = np.zeros(size, dtype=np.int64)
    for position, (pk, run) in enumerate(runs.items()):
        order[pk] = position
        host_of[pk] = host_index[run.host]
        slug_of[pk] = slug_index[run.gpu_slug]
    grouped: dict[SeriesKey, Points] = {}
    start = 0
    for case_id, method, count in groups:
        group_pks, group_values = pks[start:start + count], values[start:start + count]
        start += count
        selected = order[group_pks] >= 0
        ranked = np.argsort(order[group_pks[selected]], kind="stable")
        in_order, figures = group_pks[selected][ranked], group_values[selected][ranked]
        for slug in np.flatnonzero(np.bincount(slug_of[in_order])):
            mine = slug_of[in_order] == slug if len(slug_names) > 1 else slice(None)
            grouped.update(_split_by_host(SeriesKey(slug_names[slug], ALL_HOSTS, case_id, method),
                                          Points(in_order[mine], figures[mine]), host_of[in_order[mine]], host_names,
                                          host_split))
    return grouped


def version_change(before: RunSummary, after: RunSummary) -> str:
    names = ("driver", "cuda_runtime", "cublas", "cupy")
    changed = [f"{name} {getattr(before, name) or '?'} → {getattr(after, name) or '?'}" for name in names
               if getattr(before, name) != getattr(after, name)]
    return ", ".join(changed)


#: A series' runs' sample spreads (relative IQR), by run pk, when the gate's rule needs them.
SpreadsOf = Callable[[SeriesKey, Sequence[int]], Mapping[int, float | None]]


def _series_points(key: SeriesKey, points: Points, settings: Settings | None,
                   spreads_of: SpreadsOf | None) -> list[ChangePoint]:
    """The series' change points; where the gate's rule named one, judged again with the recorded spreads (read
    only then: a million records' spreads are not needed to find the few young series' slowdowns)."""
    found = change_points(points.values, settings)
    if spreads_of is None or not any(point.by_gate for point in found):
        return found
    pks = points.pks.tolist()
    known = spreads_of(key, pks)
    return change_points(points.values, settings, [known.get(pk) or 0.0 for pk in pks])


def find_changes(grouped: Mapping[SeriesKey, Points], runs: Mapping[int, RunSummary],
                 settings: Settings | None = None, spreads_of: SpreadsOf | None = None) -> list[Change]:
    """Every series' change points, without the kernels (``with_kernels`` adds them where known)."""
    changes = []
    for key, points in grouped.items():
        for point in _series_points(key, points, settings, spreads_of):
            before, after = runs[points[point.index - 1][0]], runs[points[point.index][0]]
            changes.append(Change(key, point, before, after, len(points) - point.index,
                                  version_change(before, after), ""))
    return sorted(changes, key=lambda change: (change.after.started, change.key.case_id))


def kernel_change(before: str, after: str) -> str:
    """``A → B`` when both sides' kernels are known and differ."""
    return f"{before} → {after}" if before and after and before != after else ""


def recent_slowdowns(changes: Sequence[Change], last: int) -> list[Change]:
    """The slowdowns whose first slow run is among the series' last ``last`` runs: what a nightly job flags."""
    return [change for change in changes if change.slowdown and change.runs_since <= last]
