"""What the trend page draws, as plain data: runs, per-case series, change points, and what they imply.

The page generator (``page``) reads only this model, never a database: an adapter builds it from the
history store (``source``), and tests build it by hand with a planted step. Everything a chart shows
travels here as a field (a case's family, precision and shape come from its records, never from its id).
The derived facts (which versions or kernels changed between two points of a series, what needs attention)
are pure functions of the model, so they are unit-tested without a browser.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from gpuperf.vocabulary import Status

#: How many of a series' latest runs count as "the last runs": a change point or a failing point there is
#: listed first on the index, as something that needs a person now.
RECENT_RUNS = 5

#: Version fields of a run, with the name a reader knows them by, in the order annotations list them.
VERSION_NAMES: tuple[tuple[str, str], ...] = (("driver", "driver"), ("cuda_runtime", "CUDA"),
                                              ("cublas", "cuBLAS"), ("cupy", "CuPy"))


class TrendDataError(ValueError):
    """The model is inconsistent (a point names a run that is not there, runs out of order)."""


@dataclass(frozen=True)
class TrendRun:
    """One suite run: when, on which GPU (model and host), of which tree, from which CI job, with which software."""

    run_id: str
    started: str  # ISO 8601, UTC
    gpu_model: str  # the GPU model's slug, e.g. ``nvidia-h200``
    host: str  # the GPU that ran it, as people name it (a UUID prefix, else its PCI id)
    commit: str = ""
    dirty: bool = False
    branch: str = ""
    ci_job: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)  # keys from VERSION_NAMES
    #: The kind of GPU the host is, as its run describes it (``host_class``): hosts are coloured by it.
    host_class: str = ""
    #: Why the run is an experiment (judged against a shifted baseline, a planted slowdown), else "":
    #: ``rows.experiment``. Its points are drawn marked and it is never in "needs attention".
    experiment: str = ""


class SeriesPoint(NamedTuple):
    """One case's figure in one run, as the gate saw it. A named tuple: a page of ten thousand runs makes
    millions of them, and a tuple is made in a fifth of a frozen dataclass's time and holds less."""

    run_id: str
    value: float | None  # the figure the gate judges: at max clock where ``basis`` is cycles; None: no valid figure
    status: str
    spread: float | None = None  # relative sample spread (IQR / median)
    basis: str = "time"  # gate.Basis: what ``value`` is (the history's record basis, gate.own_basis)
    measured: float | None = None  # the measured (time-based) figure beside it, where ``value`` is at max clock
    baseline: float | None = None  # the baseline value the run was judged against
    tolerance: float | None = None  # the gate's effective band around it (a fraction)
    kernels: tuple[str, ...] = ()  # the kernels one call launched, in order
    method: str = ""
    note: str = ""
    #: The gate's Δ to the baseline entry it judged the run against (a fraction; on the basis it judged: time, or
    #: both figures at max clock), else None (no entry, no verdict).
    delta: float | None = None


#: What a case's chart draws: the measured figure, where every run of it was judged on time, or else each run's Δ
#: to its baseline entry as the gate judged it (on time, or with both figures at max clock where the run's clock
#: was held down), so that no point jumps by the ratio of two bases (a power-capped FP16 GEMM reads 984 TFLOPS at
#: max clock and 667 in time).
DRAWN_FIGURE = "figure"
DRAWN_DELTA = "delta"


@dataclass(frozen=True)
class ChangePoint:
    """A lasting shift of a series' level: ``run_id`` is the first run at the new level."""

    run_id: str
    before: float  # the level before (same unit as the figures)
    after: float
    previous_run_id: str = ""  # the last run at the old level
    #: Where the two runs either side ran on two hosts: ``GPU-a (+2.1 %) → GPU-b (+0.0 %)``, the hosts' offsets
    #: for the case (removed before the change was judged, ``history.offsets``); ``""`` on one host.
    host_change: str = ""

    @property
    def relative(self) -> float:
        """The shift as a fraction of the old level (negative: slower, every metric here is a throughput)."""
        return (self.after - self.before) / self.before if self.before else math.nan

    @property
    def slowdown(self) -> bool:
        return self.after < self.before


@dataclass(frozen=True)
class CaseSeries:
    """One case on one GPU model over the runs that measured it, in run order."""

    case_id: str
    gpu_model: str
    family: str
    precision: str
    metric: str
    unit: str
    points: tuple[SeriesPoint, ...]
    shape: Mapping[str, int] = field(default_factory=dict)
    kernel: str = ""  # what ran, as the suite labels it ("cuBLAS fp32 nn")
    change_points: tuple[ChangePoint, ...] = ()

    @property
    def key(self) -> str:
        """Unique over a model: a case is one series per GPU model."""
        return f"{self.gpu_model}/{self.case_id}"

    @property
    def last(self) -> SeriesPoint | None:
        return self.points[-1] if self.points else None

    @cached_property
    def bases(self) -> tuple[str, ...]:
        """The bases its figures were judged on (``gate.Basis``), in the order they first appear."""
        return tuple(dict.fromkeys(point.basis for point in self.points if point.value is not None))

    @property
    def drawn(self) -> str:
        """``DRAWN_DELTA`` where a run of it was judged at max clock, else ``DRAWN_FIGURE``."""
        return DRAWN_FIGURE if self.bases in ((), ("time",)) else DRAWN_DELTA

    @property
    def drawn_basis(self) -> str:
        """What its chart's y axis is, named: ``TFLOPS`` or ``Δ % to the baseline entry …``."""
        if self.drawn == DRAWN_DELTA:
            return "Δ % to the baseline entry (as the gate judged each run: on time or at max clock)"
        return self.unit

    def drawn_value(self, point: SeriesPoint) -> float | None:
        """The y of ``point`` on its chart (``drawn``): the measured figure, or the gate's Δ in percent."""
        if self.drawn == DRAWN_DELTA:
            return None if point.delta is None or point.value is None else 100 * point.delta
        return point.value

    @cached_property
    def drawn_points(self) -> tuple[tuple[SeriesPoint, float], ...]:
        """The points its chart draws (those with a ``drawn_value``), each with its y."""
        if self.drawn == DRAWN_DELTA:
            return tuple((p, 100 * p.delta) for p in self.points if p.delta is not None and p.value is not None)
        return tuple((p, p.value) for p in self.points if p.value is not None)


@dataclass(frozen=True)
class TrendData:
    """Everything the site shows: the runs (oldest first) and every case series over them."""

    runs: tuple[TrendRun, ...]
    series: tuple[CaseSeries, ...]
    source: str = ""  # where the data came from, said on the page

    def __post_init__(self) -> None:
        known = {run.run_id for run in self.runs}
        if len(known) != len(self.runs):
            raise TrendDataError("two runs share a run id; each run must be listed once")
        for series in self.series:
            for point in series.points:
                if point.run_id not in known:
                    raise TrendDataError(f"{series.key}: a point names run {point.run_id!r}, which is not among "
                                         "the runs; build the series from the same history as the runs")

    def run(self, run_id: str) -> TrendRun:
        return self._runs_by_id[run_id]

    def run_number(self, run_id: str) -> int:
        """1-based position of a run among the runs of its GPU model: the x axis every chart of a model shares."""
        return self._run_numbers[run_id]

    @cached_property
    def _runs_by_id(self) -> dict[str, TrendRun]:
        return {run.run_id: run for run in self.runs}

    @cached_property
    def _run_numbers(self) -> dict[str, int]:
        numbers: dict[str, int] = {}
        per_model: dict[str, int] = {}
        for run in self.runs:
            per_model[run.gpu_model] = per_model.get(run.gpu_model, 0) + 1
            numbers[run.run_id] = per_model[run.gpu_model]
        return numbers

    @property
    def gpu_models(self) -> tuple[str, ...]:
        return tuple(sorted({run.gpu_model for run in self.runs}))

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every host, in the order it first ran: its colour index on every chart."""
        return tuple(dict.fromkeys(run.host for run in self.runs))

    @property
    def time_range(self) -> tuple[str, str]:
        """The first and last run's start (ISO 8601 sorts as time); empty strings when there are no runs."""
        if not self.runs:
            return "", ""
        stamps = sorted(run.started for run in self.runs)
        return stamps[0], stamps[-1]

    def hosts_of(self, series: CaseSeries) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.run(point.run_id).host for point in series.points))

    @property
    def host_classes(self) -> dict[str, tuple[str, ...]]:
        """Each kind of host (``TrendRun.host_class``), in the order it first ran, with its hosts: a class is
        one colour on every chart."""
        classes: dict[str, dict[str, None]] = {}
        for run in self.runs:
            classes.setdefault(run.host_class, {})[run.host] = None
        return {name: tuple(hosts) for name, hosts in classes.items()}

    def host_class_of(self, host: str) -> str:
        return self._classes_by_host[host]

    @cached_property
    def _classes_by_host(self) -> dict[str, str]:
        return {run.host: run.host_class for run in self.runs}

    @property
    def experiments(self) -> tuple[TrendRun, ...]:
        return tuple(run for run in self.runs if run.experiment)

    def is_experiment(self, point: SeriesPoint) -> bool:
        return bool(self.run(point.run_id).experiment)

    def last_judged(self, series: CaseSeries, count: int = 1) -> list[SeriesPoint]:
        """The series' last ``count`` points of runs that are no experiment, oldest first."""
        kept: list[SeriesPoint] = []
        for point in reversed(series.points):
            if len(kept) == count:
                break
            if not self.is_experiment(point):
                kept.append(point)
        return kept[::-1]


@dataclass(frozen=True)
class Annotation:
    """Something that changed between two consecutive points of a series: drawn on the axis at ``run_id``."""

    run_id: str
    kind: str  # "version", "kernel", "method" or "basis"
    text: str  # ``cuBLAS 13.1.0 → 13.2.0``


@dataclass(frozen=True)
class AttentionItem:
    """A line of the index's first section: a case on a GPU model that a person should look at."""

    series: CaseSeries
    run_id: str
    kind: str  # "change point" or the failing status
    text: str


def version_changes(before: TrendRun, after: TrendRun) -> list[str]:
    """``cuBLAS 13.1.0 → 13.2.0`` for each version that differs (unknown on either side is not a change)."""
    if before.versions == after.versions:
        return []
    changes = []
    for key, name in VERSION_NAMES:
        old, new = before.versions.get(key, ""), after.versions.get(key, "")
        if old and new and old != new:
            changes.append(f"{name} {old} → {new}")
    return changes


def series_changes(data: TrendData, series: CaseSeries) -> list[Annotation]:
    """Version, kernel, method and basis changes between consecutive points of ``series`` (a change of basis: the
    figure drawn went from the measured one to the one at max clock, or back)."""
    found: list[Annotation] = []
    for previous, point in zip(series.points, series.points[1:]):
        before, after = data.run(previous.run_id), data.run(point.run_id)
        for text in version_changes(before, after) if before is not after else ():
            found.append(Annotation(point.run_id, "version", text))
        if previous.kernels and point.kernels and previous.kernels != point.kernels:
            found.append(Annotation(point.run_id, "kernel",
                                    f"kernel {' + '.join(previous.kernels)} → {' + '.join(point.kernels)}"))
        if previous.method and point.method and previous.method != point.method:
            found.append(Annotation(point.run_id, "method", f"method {previous.method} → {point.method}"))
        if previous.basis != point.basis and previous.value is not None and point.value is not None:
            found.append(Annotation(point.run_id, "basis", f"judged on {previous.basis} → {point.basis}"))
    return found


def attention(data: TrendData, recent: int = RECENT_RUNS) -> dict[str, list[AttentionItem]]:
    """Per GPU model: slowdown change points within a series' last ``recent`` runs, and failing points there;
    an experiment's runs (``TrendRun.experiment``) are passed over, as if they were not in the series.

    A series contributes its most recent slowdown change point and its latest failing point, so one bad case
    is one or two lines, not one per run. Models with nothing to show map to an empty list.
    """
    items: dict[str, list[AttentionItem]] = {model: [] for model in data.gpu_models}
    for series in data.series:
        judged = data.last_judged(series, recent)
        recent_ids = [point.run_id for point in judged]
        shifts = [cp for cp in series.change_points if cp.slowdown and cp.run_id in recent_ids]
        if shifts:
            cp = shifts[-1]
            items[series.gpu_model].append(AttentionItem(
                series, cp.run_id, "change point",
                f"{cp.relative * 100:+.1f} % since run {data.run_number(cp.run_id)} "
                f"({_commit_text(data.run(cp.run_id))})"))
        failing = [p for p in judged if p.status in Status.FAILING]
        if failing:
            point = failing[-1]
            items[series.gpu_model].append(AttentionItem(
                series, point.run_id, point.status,
                f"{point.status} in run {data.run_number(point.run_id)}" + (f": {point.note}" if point.note else "")))
    for model_items in items.values():
        model_items.sort(key=lambda item: (item.series.family, item.series.case_id, item.kind))
    return items


def _commit_text(run: TrendRun) -> str:
    if not run.commit:
        return "commit unknown"
    return f"commit {run.commit[:10]}{' (dirty)' if run.dirty else ''}"


def precisions(series: Sequence[CaseSeries]) -> tuple[str, ...]:
    return tuple(sorted({s.precision for s in series if s.precision}))


def families(series: Sequence[CaseSeries]) -> tuple[str, ...]:
    return tuple(sorted({s.family for s in series}))


def by_family(series: Sequence[CaseSeries]) -> dict[str, list[CaseSeries]]:
    grouped: dict[str, list[CaseSeries]] = {}
    for item in sorted(series, key=lambda s: (s.family, s.case_id, s.gpu_model)):
        grouped.setdefault(item.family, []).append(item)
    return grouped

