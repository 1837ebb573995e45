"""A baseline from several runs, and the fleet's spread: how far each case's figure moves between the hosts
of one GPU model and between runs on one host.

One run's median carries that run's luck. On four H200 hosts the 4-stream batched case (10000×32³)
read 10.94–11.47 TFLOPS over five runs on four hosts although every run's sample IQR was under 1 %: a
baseline recorded from the 11.47 run put two later runs 4.2–4.6 % below it, a false alarm under the 4 %
tolerance. Recorded from several runs instead, an entry holds the *median* of the runs' figures, how many
runs it summarises (``runs``) and their relative range (``run_spread``), which ``gate.effective_tolerance``
takes as a floor of the band, still capped: a case that moves 4.8 % between healthy runs is judged with a
band of 4.8 %, not a false alarm every other run, and says so.

Pure: runs are ``RunInfo`` and records as ``results.load_run`` reads them from real runs' results files.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuperf.measure.kernel_records import SAME_KERNELS, Kernel, describe_change
from gpuperf.store.baseline import ClockFree, Entry, ordered_shape
from gpuperf.verdict.check import clock_free, figure_anomalies
from gpuperf.verdict.gate import figure_at_max_clock, valid_figure
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Status

#: Records that are a clean measurement of the case (what a baseline may be built from): a verdict, or a
#: figure with nothing yet to compare with (a new case, a new GPU model).
USABLE = frozenset({Status.PASS, Status.IMPROVED, Status.REGRESSED, Status.UPDATED, Status.NO_BASELINE,
                    Status.NOT_COMPARABLE})
#: Runs whose figures for one case range wider than this are not one population (a throttled host, say).
MAX_RUN_SPREAD = 0.5


class FleetError(ValueError):
    """Runs that cannot be combined; the message names the run and the fix."""


@dataclass(frozen=True)
class Run:
    """One real run of the suite on one GPU: where it ran (``host``: the GPU's UUID when the results record
    it, else the label it was given) and its records by case id."""

    host: str
    info: RunInfo
    records: dict[str, Record] = field(default_factory=dict)

    @classmethod
    def of(cls, info: RunInfo, records: Sequence[Record], label: str) -> Run:
        uuid = info.extra.get("uuid") if isinstance(info.extra, dict) else None
        gpus = {record.gpu_index for record in records}
        if len(gpus) > 1:
            raise FleetError(f"{label}: the run measured {len(gpus)} GPUs; pass one results file per GPU")
        return cls(host=str(uuid or label), info=info, records={record.case_id: record for record in records})

    @property
    def peaks(self) -> Mapping[str, Any] | None:
        """The GPU's peaks as the run's header records them (``DevicePeaks.to_dict``), ``None`` when it does not."""
        peaks = self.info.extra.get("peaks") if isinstance(self.info.extra, dict) else None
        return peaks if isinstance(peaks, dict) else None

    def clean(self) -> dict[str, Record]:
        """The records that are a clean measurement of their case (``usable``), by case id."""
        return {case: record for case, record in self.records.items() if usable(record, self.peaks)}


def usable(record: Record, peaks: Mapping[str, Any] | None = None) -> bool:
    """A clean figure: a verdict (or none yet) on a reliable measurement, a positive finite number, and within
    the GPU's peaks (``check.figure_anomalies``: a figure above one is not a measurement of the case)."""
    return record.status in USABLE and record.reliable and valid_figure(record.value) \
        and not figure_anomalies(record, peaks)


def check_compatible(runs: Sequence[Run]) -> None:
    """One GPU model and one software stack: figures of another driver or cuBLAS are another population."""
    if not runs:
        raise FleetError("no runs given: pass the results.json (or results/<timestamp>/) of each run")
    first = runs[0].info
    for run in runs[1:]:
        if run.info.gpu_slug != first.gpu_slug:
            raise FleetError(f"runs on {first.gpu_slug} and {run.info.gpu_slug}: a baseline is per GPU model")
        if run.info.versions != first.versions:
            raise FleetError(f"runs with other versions ({first.versions} and {run.info.versions}): record the "
                             "baseline from runs of one driver, CUDA and cuBLAS")


def _majority_method(records: Sequence[Record]) -> str:
    """The method most runs measured the case with (a held batch beats one that was not, say)."""
    counts = Counter(record.method for record in records)
    return max(counts, key=lambda method: (counts[method], -[r.method for r in records].index(method)))


def relative_range(values: Sequence[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def _kernel_signature(record: Record) -> tuple[tuple[str, tuple[tuple[int, int, int], ...], str], ...]:
    return tuple((kernel.name, kernel.launch, kernel.code) for kernel in record.kernels)


def _majority_kernels_runs(records: Sequence[Record]) -> list[Record]:
    """The runs that launched the kernels most runs launched: a run that ran other kernels (another build of a
    custom kernel, another cuBLAS heuristic choice) measured another thing, not the same thing noisily."""
    counts = Counter(_kernel_signature(record) for record in records)
    common = max(counts, key=lambda signature: (counts[signature],
                                                -[_kernel_signature(r) for r in records].index(signature)))
    return [record for record in records if _kernel_signature(record) == common]


def majority_records(runs: Sequence[Run], case: str, method: str) -> list[tuple[int, str, Record]]:
    """(run index, host, record) of each run's clean record of ``case`` taken by ``method``, of the runs that
    launched the kernels most of those did: the records an entry of the case is made from."""
    found = [(index, run.host, record) for index, run in enumerate(runs)
             if (record := run.records.get(case)) is not None and record.method == method
             and usable(record, run.peaks)]
    if not found:
        return []
    chosen = {id(record) for record in _majority_kernels_runs([record for _, _, record in found])}
    return [item for item in found if id(item[2]) in chosen]


def _median_kernels(records: Sequence[Record]) -> tuple[Kernel, ...]:
    """The kernels of runs that launched the same ones, each with the median of its runs' durations."""
    if not records or not records[0].kernels:
        return ()
    medians = []
    for position in range(len(records[0].kernels)):
        durations = [d for d in (r.kernels[position].median_us for r in records) if d is not None]
        medians.append(statistics.median(durations) if durations else None)
    return tuple(replace(kernel, median_us=median) for kernel, median in zip(records[0].kernels, medians))


def entries_from_runs(runs: Sequence[Run]) -> dict[str, Entry]:
    """One entry per case measured cleanly in at least one run: the median of the runs' figures (all taken by
    the most common method, of the runs that launched the most common kernels), the median sample spread, the
    number of runs and their relative range."""
    check_compatible(runs)
    cleans = [run.clean() for run in runs]
    entries: dict[str, Entry] = {}
    for case in sorted({case for run in runs for case in run.records}):
        clean = [records[case] for records in cleans if case in records]
        if not clean:
            continue
        method = _majority_method(clean)
        chosen = _majority_kernels_runs([record for record in clean if record.method == method])
        values = [record.value for record in chosen]
        spread = relative_range(values)
        if spread > MAX_RUN_SPREAD:
            raise FleetError(f"{case}: the runs' figures {sorted(values)} range over {100 * spread:.0f} %, more "
                             f"than {100 * MAX_RUN_SPREAD:.0f} %: leave the outlier run out (a throttled or shared "
                             "host?) and record again")
        described = next((r for r in reversed(chosen) if r.kernel or r.precision), chosen[-1])
        entries[case] = Entry(
            metric=chosen[0].metric, value=statistics.median(values), unit=chosen[0].unit,
            spread=statistics.median(record.rel_iqr or 0.0 for record in chosen),
            samples=int(statistics.median(record.samples or 0 for record in chosen)), flush=chosen[0].flush,
            method=method, family=described.family, kernel=described.kernel, precision=described.precision,
            shape=ordered_shape(described.shape),
            flops=described.flops, bytes=described.bytes, runs=len(chosen), run_spread=relative_range(values),
            kernels=_median_kernels(chosen), at_max_clock=_median_clock_free(chosen),
        )
    return entries


def _median_clock_free(records: Sequence[Record]) -> ClockFree | None:
    """The median of the runs' figures at max clock, with their median cycles spread and their range; from the
    runs that have one (``None`` when none has)."""
    measured = [free for record in records if (free := clock_free(record)) is not None]
    if not measured:
        return None
    values = [free.value for free in measured]
    cycles = [free.cycles for free in measured if free.cycles is not None]
    clocks = [free.clock_mhz for free in measured if free.clock_mhz is not None]
    return ClockFree(value=statistics.median(values), spread=statistics.median(free.spread for free in measured),
                     run_spread=relative_range(values), cycles=statistics.median(cycles) if cycles else None,
                     clock_mhz=statistics.median(clocks) if clocks else None)


def with_clock_figures(entries: Mapping[str, Entry], runs: Sequence[Run]) -> dict[str, Entry]:
    """The entries the runs can add a figure at max clock to, with their time figures (value, spreads, runs)
    as recorded, and the code digests of their kernels from the runs; every case the file lacks as a new
    entry (``entries_from_runs``). A baseline recorded from many hosts keeps what those hosts showed, and
    gains what only newer runs measure. Refused for a case whose runs launched other kernels than its entry
    holds: its time figures would describe another thing, so re-record it."""
    fresh = entries_from_runs(runs)
    merged: dict[str, Entry] = {}
    mismatched = []
    for case, new in fresh.items():
        old = entries.get(case)
        if old is None:
            merged[case] = new
            continue
        if new.at_max_clock is None:
            continue
        if old.kernels and describe_change(old.kernels, new.kernels) != SAME_KERNELS:
            mismatched.append(f"{case} ({describe_change(old.kernels, new.kernels)})")
            continue
        kernels = tuple(replace(kept, code=ran.code) for kept, ran in zip(old.kernels, new.kernels)) \
            if old.kernels else new.kernels
        merged[case] = replace(old, at_max_clock=new.at_max_clock, kernels=kernels)
    if mismatched:
        raise FleetError(f"{len(mismatched)} case(s) launched other kernels than their entries hold, so their "
                         f"figures cannot be combined: {'; '.join(mismatched)}; re-record them with "
                         "baseline from-runs (without --add-clock-figures) and a -k selection of those cases")
    return merged


@dataclass(frozen=True)
class CaseSpread:
    """How far one case moves across the fleet: between hosts (the hosts' medians) and within a host."""

    case_id: str
    hosts: int
    runs: int
    median: float
    host_spread: float  # relative range of the per-host medians
    run_spread: float  # the largest relative range of one host's runs (0 when no host ran it twice)
    #: The same two for the figure at max clock (cycles per call), over the runs that recorded it.
    host_spread_at_max_clock: float | None = None
    run_spread_at_max_clock: float | None = None


def _spreads(by_host: Mapping[str, Sequence[float]]) -> tuple[float, float]:
    """(relative range of the per-host medians, the largest relative range of one host's runs)."""
    host_medians = [statistics.median(values) for values in by_host.values()]
    return relative_range(host_medians), max((relative_range(values) for values in by_host.values()), default=0.0)


def fleet_spread(runs: Sequence[Run]) -> list[CaseSpread]:
    """Per case, host-to-host and run-to-run spread, separated, over the runs that measured it the way
    ``entries_from_runs`` takes them (the usual method and kernels); widest host-to-host first."""
    check_compatible(runs)
    cleans = [run.clean() for run in runs]
    spreads = []
    for case in sorted({case for run in runs for case in run.records}):
        hosts = {id(record): run.host for run in runs if (record := run.records.get(case)) is not None}
        clean = [records[case] for records in cleans if case in records]
        if not clean:
            continue
        method = _majority_method(clean)
        by_host: dict[str, list[float]] = {}
        free_by_host: dict[str, list[float]] = {}
        for record in _majority_kernels_runs([record for record in clean if record.method == method]):
            by_host.setdefault(hosts[id(record)], []).append(record.value)
            free = figure_at_max_clock(record.clock_bound, record.value_at_max_clock)
            if free is not None:
                free_by_host.setdefault(hosts[id(record)], []).append(free)
        if not by_host:
            continue
        values = [value for host in by_host.values() for value in host]
        host_spread, run_spread = _spreads(by_host)
        free_host, free_run = _spreads(free_by_host) if free_by_host else (None, None)
        spreads.append(CaseSpread(
            case_id=case, hosts=len(by_host), runs=len(values), median=statistics.median(values),
            host_spread=host_spread, run_spread=run_spread, host_spread_at_max_clock=free_host,
            run_spread_at_max_clock=free_run))
    return sorted(spreads, key=lambda s: (-s.host_spread, s.case_id))
