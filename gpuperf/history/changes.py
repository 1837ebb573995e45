"""From the history's figures to change points that a person can act on. Pure.

A series is one case measured by one method on one GPU model, in run order, over all its hosts, unless the hosts
differ: when the medians of two hosts' figures are ``host_split`` or more apart (hosts of one model can differ by
more than runs on one host do), each host is a series of its own. Its figures are those the gate judges: at max
clock where a run's basis is cycles (``gate.own_basis``), else the measured one. Figures the gate could not judge
(``ERROR``, ``UNRELIABLE``, ``ANOMALY``) are left out. Each change point is told with its size, the runs it could
have been placed at (``changepoints.placement``), the last run before them and the first after (dates, commits:
the range that brackets the culprit), and every change of versions, kernels or basis among them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from dataclasses import dataclass, replace
from typing import Any, overload

import numpy as np

from gpuperf.history.rows import RunSummary
from gpuperf.history.changepoints import DEFAULT_MIN_SIZE, ChangePoint, Settings, change_points, placement
from gpuperf.verdict.gate import Basis, valid_figure
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
    #: Every version change among the runs it could have been placed at, and with the run before and after
    #: them: "driver 570 → 580"
    versions_changed: str
    kernels_changed: str  # every kernel change among them, "A → B", or "" (``with_kernels`` adds them)
    #: The runs of the series it could have been placed at (``changepoints.placement``): ``earliest`` is the last
    #: run before the first such place, ``latest`` the first run of the new level at the last one, so the commits
    #: from ``earliest``'s (good) to ``latest``'s (bad) bracket the culprit.
    earliest: RunSummary | None = None
    latest: RunSummary | None = None
    basis_changed: str = ""  # "time → cycles" where the figure judged changed basis among those runs
    #: The measured (time-based) figure's mean before and after, where the series is judged at max clock.
    time_before: float | None = None
    time_after: float | None = None
    #: The series' run pks from ``earliest`` to ``latest``, in order (what the annotations are taken over).
    window: tuple[int, ...] = ()

    @property
    def host_changed(self) -> bool:
        """The runs on either side ran on different hosts (in a series pooled over its hosts)."""
        return self.before.host != self.after.host

    @property
    def slowdown(self) -> bool:
        return self.point.relative < 0


class Points(Sequence[tuple[int, float]]):
    """A series' ``(run_pk, figure)`` pairs in run order, held as two arrays (``pks``, ``values``), and whether each
    figure is at max clock (``at_max_clock``, a third array): the change-point tests read the figures as an array,
    and a million of them never become a million tuples."""

    def __init__(self, pks: np.ndarray, values: np.ndarray, at_max_clock: np.ndarray | None = None) -> None:
        self.pks = pks
        self.values = values
        self.at_max_clock = np.zeros(len(pks), dtype=bool) if at_max_clock is None else at_max_clock

    def __len__(self) -> int:
        return len(self.pks)

    @overload
    def __getitem__(self, index: int) -> tuple[int, float]: ...

    @overload
    def __getitem__(self, index: slice) -> Points: ...

    def __getitem__(self, index: int | slice) -> tuple[int, float] | Points:
        if isinstance(index, slice):
            return Points(self.pks[index], self.values[index], self.at_max_clock[index])
        return int(self.pks[index]), float(self.values[index])

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return zip(self.pks.tolist(), self.values.tolist())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Points({list(self)!r})"

    def taken(self, rows: np.ndarray) -> Points:
        """The pairs at those positions (an index array or a mask)."""
        return Points(self.pks[rows], self.values[rows], self.at_max_clock[rows])


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


def series(rows: Iterable[tuple[Any, ...]], runs: Mapping[int, RunSummary],
           host_split: float = DEFAULT_MIN_SIZE) -> dict[SeriesKey, Points]:
    """``(case_id, method, run_pk, figure, status[, at max clock])`` rows (``History.values``) → ``(run_pk,
    figure)`` per series, in run order (the order of ``runs``); rows of runs not in ``runs`` are left out (another
    GPU, before ``--since``)."""
    kept = sorted(((row[0], row[1] or "", row[2], float(row[3]), bool(row[5]) if len(row) > 5 else False)
                   for row in rows if row[4] not in Status.UNJUDGED and row[3] is not None and valid_figure(row[3])),
                  key=lambda row: (row[0], row[1]))
    groups = [(case_id, method, len(list(group))) for (case_id, method), group
              in groupby(kept, key=lambda row: (row[0], row[1]))]
    return series_from_columns(groups, np.asarray([row[2] for row in kept], dtype=np.int64),
                               np.asarray([row[3] for row in kept], dtype=float),
                               np.asarray([row[4] for row in kept], dtype=bool), runs, host_split)


def series_from_columns(groups: Sequence[tuple[str, str, int]], pks: np.ndarray, values: np.ndarray,
                        at_max_clock: np.ndarray | None, runs: Mapping[int, RunSummary],
                        host_split: float = DEFAULT_MIN_SIZE) -> dict[SeriesKey, Points]:
    """``series`` from judged figures as columns: ``(case_id, method, count)`` per group, and the groups' run
    pks, figures and whether each is at max clock one after the other (what ``History.series_columns`` reads, a
    million rows in a second)."""
    flags = np.zeros(len(pks), dtype=bool) if at_max_clock is None else at_max_clock
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
        group_pks, group_values, group_flags = (pks[start:start + count], values[start:start + count],
                                                flags[start:start + count])
        start += count
        selected = order[group_pks] >= 0
        ranked = np.argsort(order[group_pks[selected]], kind="stable")
        in_order, figures = group_pks[selected][ranked], group_values[selected][ranked]
        bases = group_flags[selected][ranked]
        for slug in np.flatnonzero(np.bincount(slug_of[in_order])):
            mine = slug_of[in_order] == slug if len(slug_names) > 1 else slice(None)
            grouped.update(_split_by_host(SeriesKey(slug_names[slug], ALL_HOSTS, case_id, method),
                                          Points(in_order[mine], figures[mine], bases[mine]),
                                          host_of[in_order[mine]], host_names, host_split))
    return grouped


def version_change(before: RunSummary, after: RunSummary) -> str:
    names = ("driver", "cuda_runtime", "cublas", "cupy")
    changed = [f"{name} {getattr(before, name) or '?'} → {getattr(after, name) or '?'}" for name in names
               if getattr(before, name) != getattr(after, name)]
    return ", ".join(changed)


def changes_along(items: Sequence[Any], describe: Callable[[Any, Any], str]) -> str:
    """Every change between consecutive ``items`` as ``describe`` tells it, in order, joined (``""`` for none)."""
    told = [describe(first, second) for first, second in zip(items, items[1:])]
    return "; ".join(dict.fromkeys(text for text in told if text))


def _basis_name(at_max_clock: bool) -> str:
    return Basis.CYCLES if at_max_clock else Basis.TIME


def basis_change(before: bool, after: bool) -> str:
    return f"{_basis_name(before)} → {_basis_name(after)}" if before != after else ""


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
    """Every series' change points, each with the runs it could have been placed at and the version and basis
    changes among them, without the kernels (``with_kernels`` adds them where known), in run order."""
    changes = []
    position = {pk: index for index, pk in enumerate(runs)}
    for key, points in grouped.items():
        found = _series_points(key, points, settings, spreads_of)
        bounds = [0, *(point.index for point in found), len(points)]
        for number, point in enumerate(found):
            first, last = placement(points.values, point.index, bounds[number], bounds[number + 2])
            window = points.pks[first - 1:last + 1].tolist()
            along = [runs[pk] for pk in window]
            before, after = runs[points[point.index - 1][0]], runs[points[point.index][0]]
            # a version change one run outside the range (at its last run's successor, or at its first run)
            # is named too: a dip just before a driver change, or a step told a run late, still names it
            versions = [runs[pk] for pk in points.pks[max(first - 2, 0):last + 2].tolist()]
            changes.append(Change(key, point, before, after, len(points) - point.index,
                                  changes_along(versions, version_change), "", earliest=along[0], latest=along[-1],
                                  basis_changed=changes_along(points.at_max_clock[first - 1:last + 1].tolist(),
                                                              basis_change),
                                  window=tuple(window)))
    return sorted(changes, key=lambda change: (position[change.after.pk], change.key.case_id))


def with_kernels(changes: Sequence[Change], kernels_of: Callable[[str, Sequence[int]], Mapping[int, str]]) -> list[Change]:
    """``changes`` with every kernel change among the runs each could have been placed at (``kernels_of(case, run
    pks)``: the kernels each run's record names)."""
    annotated = []
    for change in changes:
        window = list(change.window) or [change.before.pk, change.after.pk]
        kernels = kernels_of(change.key.case_id, window)
        told = changes_along([kernels.get(pk, "") for pk in window], kernel_change)
        annotated.append(replace(change, kernels_changed=told))
    return annotated


def with_time_figures(changes: Sequence[Change], grouped: Mapping[SeriesKey, Points],
                      time_of: Callable[[SeriesKey, Sequence[int]], Mapping[int, float | None]]) -> list[Change]:
    """Where a change's series is judged at max clock, the measured (time-based) figure's means over the same two
    segments beside it (``time_of(key, run pks)``)."""
    annotated = []
    for change in changes:
        points = grouped[change.key]
        if not points.at_max_clock.any():
            annotated.append(change)
            continue
        pks = points.pks.tolist()
        index = pks.index(change.after.pk)
        found = [other for other in changes if other.key == change.key]
        starts = sorted(pks.index(other.after.pk) for other in found)
        low = max([start for start in starts if start < index], default=0)
        high = min([start for start in starts if start > index], default=len(pks))
        figures = time_of(change.key, pks[low:high])
        before = [figure for pk in pks[low:index] if (figure := figures.get(pk)) is not None]
        after = [figure for pk in pks[index:high] if (figure := figures.get(pk)) is not None]
        annotated.append(replace(change, time_before=float(np.mean(before)) if before else None,
                                 time_after=float(np.mean(after)) if after else None))
    return annotated


def kernel_change(before: str, after: str) -> str:
    """``A → B`` when both sides' kernels are known and differ."""
    return f"{before} → {after}" if before and after and before != after else ""


def recent_slowdowns(changes: Sequence[Change], last: int) -> list[Change]:
    """The slowdowns whose first slow run is among the series' last ``last`` runs: what a nightly job flags."""
    return [change for change in changes if change.slowdown and change.runs_since <= last]
