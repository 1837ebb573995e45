"""From the history's figures to change points that a person can act on. Pure.

A series is one case measured by one method on one GPU model, in run order, over all its hosts: each host's
offset for the case (hosts of one model can differ by more than runs on one host move) is estimated from its own
runs and removed before change points are judged (``offsets``), so runs landing on random hosts still make one
series, and a host that reads differently is told as a host. Its figures are those the gate judges: at max
clock where a run's basis is cycles (``gate.own_basis``), else the measured one. Figures the gate could not judge
(``ERROR``, ``UNRELIABLE``, ``ANOMALY``) are left out. Each change point is told with its size, the runs it could
have been placed at (``changepoints.placement``), the last run before them and the first after (dates, commits:
the range that brackets the culprit), and every change of versions, kernels or basis among them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from dataclasses import dataclass, replace
from typing import Any, overload

import numpy as np

from gpuperf.history import offsets as host_offsets
from gpuperf.history.rows import RunSummary
from gpuperf.history.changepoints import ChangePoint, Settings, change_points, placement
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
    #: ``window`` and the run just before and after it: a version or kernel change there is named too (a dip just
    #: before a driver change, or a step told a run late, still names it).
    around: tuple[int, ...] = ()
    #: The offsets of the hosts of ``before`` and ``after`` (``offsets.fit``), removed from the levels told.
    before_offset: float = 0.0
    after_offset: float = 0.0

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

    def __init__(self, pks: np.ndarray, values: np.ndarray, at_max_clock: np.ndarray | None = None,
                 offsets: np.ndarray | None = None, host_offsets: Mapping[str, HostOffset] | None = None) -> None:
        self.pks = pks
        self.values = values
        self.at_max_clock = np.zeros(len(pks), dtype=bool) if at_max_clock is None else at_max_clock
        #: Each figure's host's relative offset, estimated without that figure's run (``offsets.fit``), removed
        #: before change points are judged.
        self.offsets = np.zeros(len(pks)) if offsets is None else offsets
        #: The series' hosts as the fit read them, by host.
        self.host_offsets: Mapping[str, HostOffset] = host_offsets or {}

    @property
    def judged(self) -> np.ndarray:
        """The figures with their hosts' offsets removed: what change points are judged on."""
        result: np.ndarray = self.values / (1 + self.offsets)
        return result

    def __len__(self) -> int:
        return len(self.pks)

    @overload
    def __getitem__(self, index: int) -> tuple[int, float]: ...

    @overload
    def __getitem__(self, index: slice) -> Points: ...

    def __getitem__(self, index: int | slice) -> tuple[int, float] | Points:
        if isinstance(index, slice):
            return Points(self.pks[index], self.values[index], self.at_max_clock[index], self.offsets[index],
                          self.host_offsets)
        return int(self.pks[index]), float(self.values[index])

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return zip(self.pks.tolist(), self.values.tolist())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Points({list(self)!r})"

    def taken(self, rows: np.ndarray) -> Points:
        """The pairs at those positions (an index array or a mask)."""
        return Points(self.pks[rows], self.values[rows], self.at_max_clock[rows], self.offsets[rows],
                      self.host_offsets)


@dataclass(frozen=True)
class HostOffset:
    """How one host reads a series' case (``offsets.fit``): ``offset`` relative to the model's hosts that read
    alike (``+0.021``: 2.1 % high), over ``runs`` runs of it; ``from_class``: too few runs for an offset of its
    own, its class's taken."""

    offset: float
    runs: int
    from_class: bool


#: A case's class for the hosts' offsets where a host has few runs of it (``offsets.fit``): ``(case_id, method)``
#: → whether it is clock-bound, say.
Classes = Mapping[tuple[str, str], Hashable]


def series(rows: Iterable[tuple[Any, ...]], runs: Mapping[int, RunSummary],
           classes: Classes | None = None) -> dict[SeriesKey, Points]:
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
                               np.asarray([row[4] for row in kept], dtype=bool), runs, classes)


def series_from_columns(groups: Sequence[tuple[str, str, int]], pks: np.ndarray, values: np.ndarray,
                        at_max_clock: np.ndarray | None, runs: Mapping[int, RunSummary],
                        classes: Classes | None = None) -> dict[SeriesKey, Points]:
    """``series`` from judged figures as columns: ``(case_id, method, count)`` per group, and the groups' run
    pks, figures and whether each is at max clock one after the other (what ``History.series_columns`` reads, a
    million rows in a second). One series per case, method and GPU model, over all its hosts, each figure with
    its host's offset (``offsets.fit``, per GPU model; ``classes``: the cases' classes for hosts with few runs)."""
    flags = np.zeros(len(pks), dtype=bool) if at_max_clock is None else at_max_clock
    size = max([*runs, int(pks.max()) if len(pks) else 0]) + 1
    host_names = list(dict.fromkeys(run.host for run in runs.values()))
    slug_names = list(dict.fromkeys(run.gpu_slug for run in runs.values()))
    host_index = {name: index for index, name in enumerate(host_names)}
    slug_index = {name: index for index, name in enumerate(slug_names)}
    order = np.full(size, -1, dtype=np.int64)
    host_of = np.zeros(size, dtype=np.int64)
    slug_of = np.zeros(size, dtype=np.int64)
    for position, (pk, run) in enumerate(runs.items()):
        order[pk] = position
        host_of[pk] = host_index[run.host]
        slug_of[pk] = slug_index[run.gpu_slug]
    pooled: dict[SeriesKey, tuple[Points, np.ndarray]] = {}
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
            hosts = host_of[in_order[mine]]
            host = host_names[hosts[0]] if np.all(hosts == hosts[0]) else ALL_HOSTS
            pooled[SeriesKey(slug_names[slug], host, case_id, method)] = (
                Points(in_order[mine], figures[mine], bases[mine]), hosts)
    return _with_offsets(pooled, host_names, classes or {})


def _with_offsets(pooled: Mapping[SeriesKey, tuple[Points, np.ndarray]], host_names: Sequence[str],
                  classes: Classes) -> dict[SeriesKey, Points]:
    """Each series with its hosts' offsets, fitted per GPU model over its cases (``offsets.fit``)."""
    fitted: dict[Hashable, host_offsets.HostOffsets] = {}
    for slug in dict.fromkeys(key.gpu_slug for key in pooled):
        mine = {key: pair for key, pair in pooled.items() if key.gpu_slug == slug}
        fitted.update(host_offsets.fit({key: (points.values, hosts) for key, (points, hosts) in mine.items()},
                                       len(host_names), {key: classes.get((key.case_id, key.method)) for key in mine}))
    grouped: dict[SeriesKey, Points] = {}
    for key, (points, hosts) in pooled.items():  # in the order the series were cut
        found = fitted[key]
        told = {host_names[host]: HostOffset(float(found.offsets[host]), int(found.runs[host]),
                                             bool(found.from_class[host]))
                for host in np.flatnonzero(found.runs).tolist()}
        grouped[key] = Points(points.pks, points.values, points.at_max_clock, found.per_point(hosts), told)
    return grouped


def offset_rows(grouped: Mapping[SeriesKey, Points]) -> list[tuple[str, str, str, float, int]]:
    """``(gpu_slug, host, case, offset, runs)`` of every series' hosts with offsets of their own
    (``offsets.hosts_reading_differently`` reads them)."""
    return [(key.gpu_slug, host, key.case_id, told.offset, told.runs) for key, points in grouped.items()
            for host, told in points.host_offsets.items() if not told.from_class]


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


def settings_for(points: Points, settings: Settings | None) -> Settings:
    """The settings a series is judged with: over several hosts, a young series' last run alone is not named by the
    gate's rule (``Settings.young_last_run_alone``)."""
    chosen = settings or Settings()
    return replace(chosen, young_last_run_alone=False) if len(points.host_offsets) > 1 else chosen


def _series_points(key: SeriesKey, points: Points, settings: Settings | None,
                   spreads_of: SpreadsOf | None) -> list[ChangePoint]:
    """The series' change points; where the gate's rule named one, judged again with the recorded spreads (read
    only then: a million records' spreads are not needed to find the few young series' slowdowns)."""
    settings = settings_for(points, settings)
    found = change_points(points.judged, settings)
    if spreads_of is None or not any(point.by_gate for point in found):
        return found
    pks = points.pks.tolist()
    known = spreads_of(key, pks)
    return change_points(points.judged, settings, [known.get(pk) or 0.0 for pk in pks])


def find_changes(grouped: Mapping[SeriesKey, Points], runs: Mapping[int, RunSummary],
                 settings: Settings | None = None, spreads_of: SpreadsOf | None = None) -> list[Change]:
    """Every series' change points, each with the runs it could have been placed at and the version and basis
    changes among them, without the kernels (``with_kernels`` adds them where known), in run order."""
    changes = []
    position = {pk: index for index, pk in enumerate(runs)}
    for key, points in grouped.items():
        found = _series_points(key, points, settings, spreads_of)
        bounds = [0, *(point.index for point in found), len(points)]
        judged = points.judged if found else points.values
        for number, point in enumerate(found):
            first, last = placement(judged, point.index, bounds[number], bounds[number + 2])
            window = points.pks[first - 1:last + 1].tolist()
            along = [runs[pk] for pk in window]
            before, after = runs[points[point.index - 1][0]], runs[points[point.index][0]]
            around = points.pks[max(first - 2, 0):last + 2].tolist()
            changes.append(Change(key, point, before, after, len(points) - point.index,
                                  changes_along([runs[pk] for pk in around], version_change), "", earliest=along[0],
                                  latest=along[-1],
                                  basis_changed=changes_along(points.at_max_clock[first - 1:last + 1].tolist(),
                                                              basis_change),
                                  window=tuple(window), around=tuple(around),
                                  before_offset=float(points.offsets[point.index - 1]),
                                  after_offset=float(points.offsets[point.index])))
    return sorted(changes, key=lambda change: (position[change.after.pk], change.key.case_id))


#: A record's kernels: their names (``name + name``) and, where known, their identity (``rows.kernel_identity``).
Kernels = tuple[str, "str | None"]


def with_kernels(changes: Sequence[Change], kernels: Mapping[tuple[str, int], Kernels]) -> list[Change]:
    """``changes`` with every kernel change the gate would call one (``kernel_records.kernel_change``: another
    name, symbol, code or configuration) among the runs each could have been placed at and the run just before
    and after them, as for versions (``kernels``: by case and run pk, ``History.kernels_at`` of ``around_pks``)."""
    annotated = []
    for change in changes:
        window = list(change.around or change.window) or [change.before.pk, change.after.pk]
        told = changes_along([kernels.get((change.key.case_id, pk), ("", None)) for pk in window], kernel_change)
        annotated.append(replace(change, kernels_changed=told))
    return annotated


def around_pks(changes: Sequence[Change]) -> list[int]:
    """The runs whose kernels ``with_kernels`` compares, over every change."""
    return sorted({pk for change in changes for pk in (change.around or change.window)})


#: Runs of each segment (the nearest to the change point) whose measured figures ``with_time_figures`` averages:
#: what the runs around a change show, read without reading every run of a long series.
TIME_RUNS = 50


def with_time_figures(changes: Sequence[Change], grouped: Mapping[SeriesKey, Points],
                      time_of: Callable[[SeriesKey, Sequence[int]], Mapping[int, float | None]]) -> list[Change]:
    """Where a change's series is judged at max clock, the measured (time-based) figure's means over the same two
    segments beside it, each its ``TIME_RUNS`` runs nearest the change (``time_of(key, run pks)``, read once a
    series)."""
    starts_of: dict[SeriesKey, list[int]] = {}
    positions: dict[SeriesKey, dict[int, int]] = {}
    for change in changes:
        points = grouped[change.key]
        if points.at_max_clock.any():
            position = positions.setdefault(change.key, {pk: index for index, pk in enumerate(points.pks.tolist())})
            starts_of.setdefault(change.key, []).append(position[change.after.pk])
    spans: dict[int, tuple[list[int], list[int]]] = {}  # by the change's place in ``changes``
    for number, change in enumerate(changes):
        if change.key in starts_of:
            pks = grouped[change.key].pks.tolist()
            index = positions[change.key][change.after.pk]
            starts = sorted(starts_of[change.key])
            low = max([start for start in starts if start < index], default=0)
            high = min([start for start in starts if start > index], default=len(pks))
            spans[number] = (pks[max(low, index - TIME_RUNS):index], pks[index:min(high, index + TIME_RUNS)])
    wanted: dict[SeriesKey, set[int]] = {}
    for number, (left, right) in spans.items():
        wanted.setdefault(changes[number].key, set()).update(left, right)
    read = {key: time_of(key, sorted(pks)) for key, pks in wanted.items()}
    annotated = []
    for number, change in enumerate(changes):
        if number not in spans:
            annotated.append(change)
            continue
        figures = read[change.key]
        before = [figure for pk in spans[number][0] if (figure := figures.get(pk)) is not None]
        after = [figure for pk in spans[number][1] if (figure := figures.get(pk)) is not None]
        annotated.append(replace(change, time_before=float(np.mean(before)) if before else None,
                                 time_after=float(np.mean(after)) if after else None))
    return annotated


def kernel_change(before: Kernels, after: Kernels) -> str:
    """How the kernels changed as the gate tells it (``kernel_records.kernel_change`` without its ``kernel
    changed:``): another name (``A → B``), or under one name another symbol, code or configuration; ``""`` when
    either side is unknown or they are the same kernels."""
    from gpuperf.measure.kernel_records import kernel_change as gate_kernel_change

    if not before[0] or not after[0]:
        return ""
    if before[0] != after[0] or before[1] is None or after[1] is None:
        return f"{before[0]} → {after[0]}" if before[0] != after[0] else ""
    told = gate_kernel_change(_identity(before[1]), _identity(after[1]))
    return told.removeprefix("kernel changed: ")


def _identity(text: str) -> list[Any]:
    """The kernels a ``kernel_identity`` names, as the gate's ``Kernel`` records (no launch: not compared)."""
    from gpuperf.measure.kernel_records import Kernel

    try:
        parts = json.loads(text)
        return [Kernel(name=str(name), grid=(0, 0, 0), block=(0, 0, 0), symbol=str(symbol), code=str(code),
                       config=str(config)) for name, symbol, code, config in parts]
    except (ValueError, TypeError):
        return []


def recent_slowdowns(changes: Sequence[Change], last: int) -> list[Change]:
    """The slowdowns whose first slow run is among the series' last ``last`` runs: what a nightly job flags."""
    return [change for change in changes if change.slowdown and change.runs_since <= last]
