"""From a measurement to a checked ``Record``: derived figures and anomaly findings, then the gate's verdict.

Pure: the ``perf`` fixture calls these and does the impure parts (re-measuring, failing the test); the
decision itself is ``gate.decide``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuperf.verdict import anomaly
from gpuperf.store.baseline import ClockFree, Entry, ordered_shape
from gpuperf.verdict.gate import (Context, GateConfig, decide, decide_dry, round_stopping_band, stopping_band,
                                  valid_figure)
from gpuperf.measure.measurement import Measurement
from gpuperf.measure.metrics import Work, gbps, percent_of, tflops
from gpuperf.measure.peaks import DevicePeaks
from gpuperf.measure.stats import Band
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Flush, Metric, Status


@dataclass(frozen=True)
class CaseIdentity:
    case_id: str
    nodeid: str
    family: str
    params: dict[str, str]
    gpu: str
    gpu_index: int | None = None


#: What ``-k`` reads as one name (pytest's ``_pytest.mark.expression`` identifier): a test id of only these selects
#: itself; any other (a space, a quote, a parenthesis, ``=``) would be read as an expression.
_K_NAME = re.compile(r"(\w|:|\+|-|\.|\[|\]|\\|/)+")


def record_command(case: CaseIdentity) -> str:
    """The command that (re-)records this case's baseline entry, to paste into a shell: every part from the test's
    id is shell-quoted (a case id is text a test's author controls), and a test name that ``-k`` would read as an
    expression rather than a name is selected by its node id instead."""
    head, bracket, parameters = case.nodeid.partition("[")  # a parameter's text may hold "::"; a name does not
    path, _, names = head.partition("::")
    test = names.rpartition("::")[2] + bracket + parameters
    if _K_NAME.fullmatch(test) and test.lower() not in ("and", "or", "not"):
        return f"pytest {shlex.quote(path)} --update-baselines -k {shlex.quote(test)}"
    return f"pytest {shlex.quote(case.nodeid)} --update-baselines"


def context_for(case: CaseIdentity, update: bool, version_changes: tuple[str, ...] = ()) -> Context:
    return Context(update=update, gpu_slug=case.gpu, record_command=record_command(case),
                   version_changes=version_changes)


def case_record(case: CaseIdentity, measurement: Measurement, peaks: DevicePeaks | None, entry: Entry | None,
                config: GateConfig, context: Context) -> Record:
    """The checked record of one measurement of one case."""
    work, summary = measurement.work, measurement.summary
    seconds = summary.median
    measured_tflops, measured_gbps = tflops(work.flops, seconds), gbps(work.bytes, seconds)
    peak_tflops = peaks.compute(work.precision) if peaks else None
    peak_gbps = peaks.memory_gbps if peaks else None
    peak = peak_tflops if work.metric == Metric.TFLOPS else peak_gbps
    value = measured_tflops if work.metric == Metric.TFLOPS else measured_gbps
    findings = anomaly.check_case(tflops=measured_tflops, gbps=measured_gbps, peak_tflops=peak_tflops,
                                  peak_gbps=peak_gbps, precision=work.precision,
                                  gemv_class=work.metric == Metric.GBPS, cold=measurement.flush == Flush.COLD)
    warmup = anomaly.warmup_effect(measurement.samples_s)
    record = Record(
        case_id=case.case_id, nodeid=case.nodeid, family=case.family, params=case.params,
        metric=work.metric, value=value, unit=work.metric, status=Status.PASS,
        note=str(warmup) if warmup else "",
        pct_of_peak=percent_of(value, peak) if peak else None, peak=peak,
        flops=work.flops, bytes=work.bytes, arithmetic_intensity=work.arithmetic_intensity,
        tflops=measured_tflops, gbps=measured_gbps,
        median_s=seconds, min_s=summary.minimum, p10_s=summary.p10, p90_s=summary.p90,
        rel_iqr=summary.rel_iqr, rel_stdev=summary.rel_stdev, samples=summary.n,
        calls_per_sample=measurement.calls_per_sample, method=measurement.method, flush=measurement.flush,
        sm_clock_mhz=measurement.sm_clock_mhz, clock_events=measurement.clock_events,
        reliable=measurement.reliable, gpu=case.gpu, gpu_index=case.gpu_index,
        kernel=measurement.label, precision=work.precision, shape=work.shape,
        kernels=measurement.kernels, event_median_s=measurement.event_median_s,
        cycles_per_call=measurement.cycles_per_call, call_clock_mhz=measurement.call_clock_mhz,
        cycles_rel_iqr=measurement.cycles_summary.rel_iqr if measurement.cycles_summary else None,
        value_at_max_clock=measurement.value_at_max_clock,  # every traced case's, so its entry keeps its cycles
        max_clock_mhz=measurement.max_clock_mhz, clock_bound=clock_bound(work, peaks),
        extra={"stop_reason": measurement.stop_reason, "warmup_calls": measurement.warmup_calls,
               "discarded_samples": measurement.discarded_samples,
               **({"sampling": measurement.sampling.to_dict()} if measurement.sampling else {}),
               **({"event_method": measurement.event_method} if measurement.event_method else {}),
               **({"trace_note": measurement.trace_note} if measurement.trace_note else {})},
    )
    return decide(record, entry, config, context, [str(f) for f in findings], measurement.unreliable_reason)


def unmeasurable_record(case: CaseIdentity, work: Work, label: str, reason: str, flush: str,
                        peaks: DevicePeaks | None) -> Record:
    """The ``ERROR`` row of a case whose call could not be measured (``measurement.UnmeasurableCall``): what was to
    be measured, no figure, and the one line that says why and how to fix it."""
    peak = (peaks.compute(work.precision) if work.metric == Metric.TFLOPS else peaks.memory_gbps) if peaks else None
    return Record(
        case_id=case.case_id, nodeid=case.nodeid, family=case.family, params=case.params, metric=work.metric,
        value=math.nan, unit=work.metric, status=Status.ERROR, note=reason, peak=peak, flops=work.flops,
        bytes=work.bytes, arithmetic_intensity=work.arithmetic_intensity, flush=flush, reliable=False,
        gpu=case.gpu, gpu_index=case.gpu_index, kernel=label, precision=work.precision, shape=work.shape)


def dry_record(case: CaseIdentity, measurement: Measurement, entry: Entry | None, context: Context,
               peaks: DevicePeaks | None) -> Record:
    """A dry run's record of ``measurement`` (a stand-in: nothing was launched, so no figure): what was to be
    measured, judged against ``entry`` as far as that goes without a figure (``gate.decide_dry``)."""
    record = unmeasurable_record(case, measurement.work, measurement.label, "", measurement.flush, peaks)
    return decide_dry(replace(record, method=measurement.method), entry, context)


def dry_ratio_record(case: CaseIdentity, numerator: Measurement, denominator: Measurement, name: str,
                     entry: Entry | None, context: Context) -> Record:
    """A dry run's record of ``numerator ÷ denominator`` as the entry ``<case id>#<name>`` (``ratio_record``'s
    checks of its operands, then ``gate.decide_dry``)."""
    if numerator.work.metric != denominator.work.metric:
        raise ValueError(f"cannot take a ratio of {numerator.work.metric} over {denominator.work.metric}")
    ratio_case = replace(case, case_id=f"{case.case_id}#{name}")
    record = Record(
        case_id=ratio_case.case_id, nodeid=case.nodeid, family=case.family, params=case.params,
        metric=Metric.RATIO, value=math.nan, unit=Metric.UNITS[Metric.RATIO], status=Status.ERROR,
        method=numerator.method, flush=numerator.flush, reliable=False, gpu=case.gpu, gpu_index=case.gpu_index,
        kernel=_ratio_kernel(numerator.label, denominator.label), precision=numerator.work.precision,
        shape=numerator.work.shape, extra={"ratio_name": name})
    return decide_dry(record, entry, replace(context, record_command=record_command(ratio_case)))


def clock_bound(work: Work, peaks: DevicePeaks | None) -> bool | None:
    """Whether a call's time follows the SM clock: its arithmetic intensity is at or above the ridge point of
    its precision's roofline. On the H200 the large GEMMs sit 2-25 times above it and every GEMV, batched or
    skinny GEMM measured below 0.6 times it, so the line is not a close call (docs/fleet.md)."""
    ridge = peaks.ridge(work.precision) if peaks else None
    if ridge is None or not work.bytes:
        return None
    return work.arithmetic_intensity >= ridge


def band_for(entry: Entry | None, config: GateConfig, peaks: DevicePeaks | None,
             max_clock_mhz: float | None) -> Callable[[Work], Band]:
    """The stopping rule's bands for each work a test measures against ``entry`` (``gate.stopping_band``; whether
    the work is clock-bound is ``clock_bound``'s roofline)."""
    return lambda work: stopping_band(entry, config, clock_bound(work, peaks), max_clock_mhz)


def round_band_for(threshold: float, peaks: DevicePeaks | None,
                   max_clock_mhz: float | None) -> Callable[[Work], Band]:
    """An A/B round's bands for each work it measures (``gate.round_stopping_band``)."""
    return lambda work: round_stopping_band(threshold, clock_bound(work, peaks), max_clock_mhz)


def ratio_record(case: CaseIdentity, numerator: Measurement, denominator: Measurement, name: str,
                 entry: Entry | None, config: GateConfig, context: Context,
                 peaks: DevicePeaks | None = None) -> Record:
    """``numerator``'s primary metric over ``denominator``'s (e.g. custom kernel ÷ cuBLAS), gated as its own
    entry ``<case id>#<name>``. Both must measure the same kind of metric."""
    if numerator.work.metric != denominator.work.metric:
        raise ValueError(f"cannot take a ratio of {numerator.work.metric} over {denominator.work.metric}")
    ratio_case = replace(case, case_id=f"{case.case_id}#{name}")
    spread = math.hypot(numerator.summary.rel_iqr, denominator.summary.rel_iqr)
    unreliable_reason = "; ".join(r for r in (numerator.unreliable_reason, denominator.unreliable_reason) if r)
    record = Record(
        case_id=ratio_case.case_id, nodeid=case.nodeid, family=case.family, params=case.params,
        metric=Metric.RATIO, value=_ratio(numerator.value, denominator.value), unit=Metric.UNITS[Metric.RATIO],
        status=Status.PASS, note=f"{numerator.value:.4g} / {denominator.value:.4g} {numerator.work.metric}",
        median_s=numerator.median_s, rel_iqr=spread, samples=min(numerator.summary.n, denominator.summary.n),
        method=numerator.method, flush=numerator.flush, reliable=not unreliable_reason,
        gpu=case.gpu, gpu_index=case.gpu_index, kernel=_ratio_kernel(numerator.label, denominator.label),
        precision=numerator.work.precision, shape=numerator.work.shape,
        kernels=numerator.kernels + denominator.kernels,
        call_clock_mhz=_slower_clock(numerator, denominator),
        value_at_max_clock=_clock_free_ratio(numerator, denominator),
        cycles_rel_iqr=_cycles_spread(numerator, denominator), max_clock_mhz=numerator.max_clock_mhz,
        clock_bound=_both_clock_bound(numerator, denominator, peaks),
        extra={"denominator_median_s": denominator.median_s, "ratio_name": name},
    )
    return decide(record, entry, config, replace(context, record_command=record_command(ratio_case)), [],
                  unreliable_reason)


def _clock_free_ratio(numerator: Measurement, denominator: Measurement) -> float | None:
    """The ratio of the two sides' throughputs at max clock: each side's power state taken out."""
    top, bottom = numerator.value_at_max_clock, denominator.value_at_max_clock
    if top is None or bottom is None or not valid_figure(bottom):
        return None
    return top / bottom


def _cycles_spread(numerator: Measurement, denominator: Measurement) -> float | None:
    top, bottom = numerator.cycles_summary, denominator.cycles_summary
    return math.hypot(top.rel_iqr, bottom.rel_iqr) if top is not None and bottom is not None else None


def _both_clock_bound(numerator: Measurement, denominator: Measurement, peaks: DevicePeaks | None) -> bool | None:
    sides = [clock_bound(side.work, peaks) for side in (numerator, denominator)]
    return None if None in sides else all(sides)


def _slower_clock(numerator: Measurement, denominator: Measurement) -> float | None:
    """The lower of the two sides' clocks: the one that says how far the ratio's power state moved."""
    clocks = [c for c in (numerator.call_clock_mhz, denominator.call_clock_mhz) if c is not None]
    return min(clocks) if len(clocks) == 2 else None


def _ratio_kernel(numerator: str, denominator: str) -> str:
    return f"{numerator} ÷ {denominator}" if numerator and denominator else numerator or denominator


def _ratio(numerator: float, denominator: float) -> float:
    """NaN when the denominator cannot divide: the gate then calls it an error, not a verdict."""
    return numerator / denominator if valid_figure(denominator) else math.nan


#: ``DevicePeaks.to_dict`` rounds a peak to one decimal (66.908 → 66.9), so a figure is above a peak read from a
#: run's header only beyond half that last digit.
ROUNDED_PEAK_SLACK = 0.05


def figure_anomalies(record: Record, peaks: Mapping[str, Any] | None) -> list[str]:
    """The single-case anomaly rules (``anomaly.check_case``) applied to a figure read back from a file, as
    ``case_record`` applies them to a fresh measurement: a command that judges a stored figure (``compare``,
    ``fleet``, ``baseline from-runs``) must not take a figure above the GPU's peak for a fast one.

    The peak is the record's own (``peak``) and the run's (``peaks``, as ``DevicePeaks.to_dict`` writes them),
    whichever is lower, so neither a record that claims a higher peak nor one that claims none escapes the rule.
    A record already judged ``ANOMALY`` keeps its own finding; a ratio has no peak, and a record with no figure (an
    ``ERROR`` row, written with ``value`` null) has nothing to hold to one."""
    if record.status == Status.ANOMALY or record.metric not in (Metric.TFLOPS, Metric.GBPS) \
            or not valid_figure(record.value):
        return []
    compute = (peaks or {}).get("compute_tflops") or {}
    run_tflops = _number(compute.get(record.precision)) if isinstance(compute, Mapping) else None
    run_gbps = _number((peaks or {}).get("memory_gbps"))
    own = _number(record.peak)
    tflops_peaks = [p for p in (run_tflops and run_tflops + ROUNDED_PEAK_SLACK,
                                own if record.metric == Metric.TFLOPS else None) if p]
    gbps_peaks = [p for p in (run_gbps and run_gbps + ROUNDED_PEAK_SLACK,
                              own if record.metric == Metric.GBPS else None) if p]
    tflops_figure = record.value if record.metric == Metric.TFLOPS else _number(record.tflops) or 0.0
    gbps_figure = record.value if record.metric == Metric.GBPS else _number(record.gbps) or 0.0
    found = anomaly.check_case(tflops=tflops_figure, gbps=gbps_figure,
                               peak_tflops=min(tflops_peaks) if tflops_peaks else None,
                               peak_gbps=min(gbps_peaks) if gbps_peaks else None, precision=record.precision,
                               gemv_class=record.metric == Metric.GBPS, cold=record.flush == Flush.COLD)
    return [str(finding) for finding in found]


def _number(value: Any) -> float | None:
    """A positive finite figure, else ``None`` (a peak that is absent, zero or not a number is no peak)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # a whole number beyond any float: no peak, and a figure above every peak
        return math.inf
    return number if valid_figure(number) else None


def entry_from_record(record: Record) -> Entry:
    """The baseline entry ``--update-baselines`` writes for a record."""
    return Entry(metric=record.metric, value=record.value, unit=record.unit, spread=record.rel_iqr or 0.0,
                 samples=record.samples or 0, flush=record.flush, method=record.method, family=record.family,
                 kernel=record.kernel, precision=record.precision,
                 shape=ordered_shape(record.shape),
                 flops=record.flops, bytes=record.bytes, kernels=record.kernels, at_max_clock=clock_free(record))


def clock_free(record: Record) -> ClockFree | None:
    """The record's figure at max clock, as a baseline entry holds it; ``None`` when it has none (no stamped cycles).

    Every traced case's, memory-bound ones included: the entry then holds the cycles a call took wherever it was
    measured, so any host can be compared with it; whether a verdict *reads* it is the gate's rule
    (``gate.figure_at_max_clock``: a clock-bound case's only)."""
    if not valid_figure(record.value_at_max_clock):  # none without stamped cycles
        return None
    assert record.value_at_max_clock is not None
    return ClockFree(value=record.value_at_max_clock, spread=record.cycles_rel_iqr or 0.0,
                     cycles=record.cycles_per_call, clock_mhz=record.call_clock_mhz)


def baseline_header(run: RunInfo, records: Sequence[Record], recorded: str) -> dict[str, object]:
    """The header ``--update-baselines`` writes: identity and versions of this run, and the clocks seen."""
    seen = [clock for r in records if r.gpu == run.gpu_slug and r.sm_clock_mhz for clock in r.sm_clock_mhz]
    clocks: dict[str, object] = {"sm_max_mhz": run.sm_clock_max_mhz, "mem_mhz": run.mem_clock_mhz}
    if seen:
        clocks["sm_seen_mhz"] = [min(seen), max(seen)]
    header: dict[str, object] = {
        "gpu": run.gpu_name, "slug": run.gpu_slug, "compute_capability": run.compute_capability,
        "driver": run.driver, "cuda_runtime": run.cuda_runtime, "cublas": run.cublas, "cupy": run.cupy,
        "recorded": recorded, "clocks": clocks,
    }
    if "peaks" in run.extra:
        header["peaks"] = run.extra["peaks"]
    return header
