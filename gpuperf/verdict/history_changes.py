"""From the history's figures to change points that a person can act on. Pure.

A series is one case measured by one method on one GPU model and host (hosts of one model differ by more than
runs on one host do, so their figures are never mixed), in run order. Figures the gate could not judge
(``ERROR``, ``UNRELIABLE``, ``ANOMALY``) are left out. Each change point is told with its size, the last run
before it and the first after it (dates, commits), and whether the versions or the kernels changed there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuperf.verdict.changepoints import ChangePoint, Settings, change_points
from gpuperf.verdict.gate import valid_figure
from gpuperf.vocabulary import Status

#: Figures that say more about the machine or the measurement than about the kernel.
LEFT_OUT = frozenset({Status.ERROR, Status.UNRELIABLE, Status.ANOMALY})


@dataclass(frozen=True)
class RunSummary:
    """A run as the history's questions show it."""

    pk: int
    run_id: str
    kind: str
    started: str
    gpu_slug: str
    host: str
    git_commit: str | None
    git_dirty: bool | None
    branch: str | None
    driver: str | None
    cuda_runtime: str | None
    cublas: str | None
    cupy: str | None

    @property
    def versions(self) -> str:
        """Driver / CUDA / cuBLAS / CuPy."""
        return " / ".join(value or "?" for value in (self.driver, self.cuda_runtime, self.cublas, self.cupy))

    @property
    def commit(self) -> str:
        if not self.git_commit:
            return "?"
        return self.git_commit[:10] + ("+dirty" if self.git_dirty else "")


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
    def slowdown(self) -> bool:
        return self.point.relative < 0


def series(rows: Iterable[tuple[str, str, int, float | None, str]],
           runs: Mapping[int, RunSummary]) -> dict[SeriesKey, list[tuple[int, float]]]:
    """``(case_id, method, run_pk, value, status)`` rows → ``(run_pk, value)`` per series, in run order (the
    order of ``runs``); rows of runs not in ``runs`` are left out (another GPU, before ``--since``)."""
    order = {pk: position for position, pk in enumerate(runs)}
    grouped: dict[SeriesKey, list[tuple[int, float]]] = {}
    for case_id, method, run_pk, value, status in rows:
        run = runs.get(run_pk)
        if run is None or status in LEFT_OUT or value is None or not valid_figure(value):
            continue
        key = SeriesKey(run.gpu_slug, run.host, case_id, method or "")
        grouped.setdefault(key, []).append((run_pk, value))
    for points in grouped.values():
        points.sort(key=lambda point: order[point[0]])
    return grouped


def version_change(before: RunSummary, after: RunSummary) -> str:
    names = ("driver", "cuda_runtime", "cublas", "cupy")
    changed = [f"{name} {getattr(before, name) or '?'} → {getattr(after, name) or '?'}" for name in names
               if getattr(before, name) != getattr(after, name)]
    return ", ".join(changed)


def find_changes(grouped: Mapping[SeriesKey, Sequence[tuple[int, float]]], runs: Mapping[int, RunSummary],
                 settings: Settings | None = None) -> list[Change]:
    """Every series' change points, without the kernels (``with_kernels`` adds them where known)."""
    changes = []
    for key, points in grouped.items():
        for point in change_points([value for _, value in points], settings):
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
