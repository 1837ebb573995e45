"""From the history's figures to change points that a person can act on. Pure.

A series is one case measured by one method on one GPU model, in run order, over all its hosts, unless the hosts
differ: when the medians of two hosts' figures are ``host_split`` or more apart (hosts of one model can differ by
more than runs on one host do), each host is a series of its own. Figures the gate could not judge
(``ERROR``, ``UNRELIABLE``, ``ANOMALY``) are left out. Each change point is told with its size, the last run
before it and the first after it (dates, commits), and whether the versions or the kernels changed there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import groupby
from dataclasses import dataclass, replace

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


def _split_by_host(key: SeriesKey, pks: np.ndarray, values: np.ndarray, hosts: np.ndarray,
                   host_names: Sequence[str], host_split: float) -> dict[SeriesKey, list[tuple[int, float]]]:
    """One series over all hosts, or one per host when two hosts' medians are ``host_split`` or more apart."""
    present = np.unique(hosts)
    if len(present) == 1:
        return {replace(key, host=host_names[present[0]]): list(zip(pks.tolist(), values.tolist()))}
    medians = [float(np.median(values[hosts == host])) for host in present]
    if max(medians) / min(medians) - 1 < host_split:
        return {key: list(zip(pks.tolist(), values.tolist()))}
    return {replace(key, host=host_names[host]): list(zip(pks[hosts == host].tolist(), values[hosts == host].tolist()))
            for host in present}


def series(rows: Iterable[tuple[str, str, int, float | None, str]], runs: Mapping[int, RunSummary],
           host_split: float = DEFAULT_MIN_SIZE) -> dict[SeriesKey, list[tuple[int, float]]]:
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
                        host_split: float = DEFAULT_MIN_SIZE) -> dict[SeriesKey, list[tuple[int, float]]]:
    """``series`` from judged figures as columns: ``(case_id, method, count)`` per group, and the groups' run
    pks and values one after the other (what ``History.series_columns`` reads, a million rows in a second)."""
    size = max([*runs, int(pks.max()) if len(pks) else 0]) + 1
    order = np.full(size, -1, dtype=np.int64)
    host_of = np.zeros(size, dtype=np.int64)
    slug_of = np.zeros(size, dtype=np.int64)
    host_names: list[str] = []
    slug_names: list[str] = []
    for position, (pk, run) in enumerate(runs.items()):
        order[pk] = position
        host_of[pk] = _index(host_names, run.host)
        slug_of[pk] = _index(slug_names, run.gpu_slug)
    grouped: dict[SeriesKey, list[tuple[int, float]]] = {}
    start = 0
    for case_id, method, count in groups:
        group_pks, group_values = pks[start:start + count], values[start:start + count]
        start += count
        selected = order[group_pks] >= 0
        ranked = np.argsort(order[group_pks[selected]], kind="stable")
        in_order, figures = group_pks[selected][ranked], group_values[selected][ranked]
        for slug in np.unique(slug_of[in_order]):
            mine = slug_of[in_order] == slug
            grouped.update(_split_by_host(SeriesKey(slug_names[slug], ALL_HOSTS, case_id, method), in_order[mine],
                                          figures[mine], host_of[in_order[mine]], host_names, host_split))
    return grouped


def _index(names: list[str], name: str) -> int:
    if name not in names:
        names.append(name)
    return names.index(name)


def version_change(before: RunSummary, after: RunSummary) -> str:
    names = ("driver", "cuda_runtime", "cublas", "cupy")
    changed = [f"{name} {getattr(before, name) or '?'} → {getattr(after, name) or '?'}" for name in names
               if getattr(before, name) != getattr(after, name)]
    return ", ".join(changed)


#: A series' runs' sample spreads (relative IQR), by run pk, when the gate's rule needs them.
SpreadsOf = Callable[[SeriesKey, Sequence[int]], Mapping[int, float | None]]


def _series_points(key: SeriesKey, points: Sequence[tuple[int, float]], settings: Settings | None,
                   spreads_of: SpreadsOf | None) -> list[ChangePoint]:
    """The series' change points; where the gate's rule named one, judged again with the recorded spreads (read
    only then: a million records' spreads are not needed to find the few young series' slowdowns)."""
    values = [value for _, value in points]
    found = change_points(values, settings)
    if spreads_of is None or not any(point.by_gate for point in found):
        return found
    known = spreads_of(key, [pk for pk, _ in points])
    return change_points(values, settings, [known.get(pk) or 0.0 for pk, _ in points])


def find_changes(grouped: Mapping[SeriesKey, Sequence[tuple[int, float]]], runs: Mapping[int, RunSummary],
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
