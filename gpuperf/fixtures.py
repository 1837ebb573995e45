"""The objects behind the GPU fixtures: a per-device cache, the ``measure`` callable and ``perf``.

The plugin creates these and hands them to tests; the deciding is done by the pure modules
(``check``, ``baseline``, ``anomaly``). ``Perf`` needs only something that measures again, so the
plugin's own tests drive it with a synthetic measurement source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Protocol

from gpuperf.check import CaseIdentity, CheckMode, case_record, ratio_record
from gpuperf.device import GpuContext, query_device
from gpuperf.measurement import Measurement
from gpuperf.metrics import Work
from gpuperf.peaks import device_peaks
from gpuperf.records import Record, RunInfo, Status
from gpuperf.session import SessionState

_GPU_SEGMENT = re.compile(r"(?<=[\[-])gpu\d+(?:-|(?=\]))")


def case_id_of(nodeid: str) -> str:
    """The node id without its GPU segment (baselines are per GPU *model*, not per index)."""
    stripped = _GPU_SEGMENT.sub("", nodeid)
    return stripped.replace("-]", "]").replace("[]", "")


def run_info(ctx: GpuContext, flush_modes: Sequence[str]) -> RunInfo:
    info = ctx.info
    return RunInfo(
        gpu_name=info.name, gpu_slug=info.slug, compute_capability=info.compute_capability,
        driver=info.driver, cuda_runtime=info.cuda_runtime, cublas=info.cublas, cupy=info.cupy,
        sm_clock_max_mhz=info.sm_clock_max_mhz, mem_clock_mhz=info.mem_clock_mhz,
        flush_modes=tuple(flush_modes), started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        extra={"peaks": ctx.peaks.to_dict(), "sm_count": info.sm_count, "l2_bytes": info.l2_bytes,
               "bus_width_bits": info.bus_width_bits, "pci_bus_id": info.pci_bus_id,
               "missing": list(info.missing)},
    )


class GpuPool:
    """One ``GpuContext``, flush buffer and cuBLAS handle per device, created on first use."""

    def __init__(self) -> None:
        self.contexts: dict[int, GpuContext] = {}
        self.flush_buffers: dict[int, Any] = {}
        self.handles: dict[int, int] = {}

    def context(self, index: int) -> GpuContext:
        if index not in self.contexts:
            info, nvml = query_device(index)  # raises NoGpuError naming what is missing
            import cupy

            self.contexts[index] = GpuContext(index=index, device=cupy.cuda.Device(index), info=info, nvml=nvml,
                                              peaks=device_peaks(info))
        return self.contexts[index]

    def flush_buffer(self, ctx: GpuContext) -> Any:
        if ctx.index not in self.flush_buffers:
            from gpuperf.timing import FlushBuffer

            with ctx.device:
                self.flush_buffers[ctx.index] = FlushBuffer(ctx.info.l2_bytes)
        return self.flush_buffers[ctx.index]

    def cublas_handle(self, ctx: GpuContext) -> int:
        if ctx.index not in self.handles:
            from cupy_backends.cuda.libs import cublas

            with ctx.device:
                self.handles[ctx.index] = cublas.create()
        return self.handles[ctx.index]


class MeasureSource(Protocol):
    def __call__(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str | None = None,
                 label: str = "") -> Measurement: ...

    def again(self, measurement: Measurement) -> Measurement: ...


class Measurer:
    """The ``measure`` fixture: times ``fn(*operands)`` and remembers how, so ``perf`` can confirm."""

    def __init__(self, timer: Any, flush_mode: str) -> None:
        self.timer = timer
        self.flush_mode = flush_mode
        self._recipes: dict[int, tuple[Measurement, tuple[Any, ...]]] = {}

    def __call__(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str | None = None,
                 label: str = "") -> Measurement:
        recipe = (fn, work, tuple(operands), flush or self.flush_mode, label)
        measurement = self.timer.measure(*recipe)
        self._recipes[id(measurement)] = (measurement, recipe)
        return measurement

    def again(self, measurement: Measurement) -> Measurement:
        """Re-run the measurement that produced ``measurement`` (used to confirm a regression)."""
        _, recipe = self._recipes[id(measurement)]
        return self(*recipe)


@dataclass
class Perf:
    """The ``perf`` fixture: checks measurements, confirms regressions, defers the test's verdict.

    Every check is recorded; failures are collected and raised once the test body returns
    (``raise_outcome``), so a test with several checks reports all of them.
    """

    state: SessionState
    case: CaseIdentity
    peaks: Any
    measure: MeasureSource
    run: RunInfo | None
    records: list[Record] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exporter: Callable[[Measurement, Record], None] | None = None  # e.g. pytest-benchmark's JSON
    _unnoted: list[Record] = field(default_factory=list)  # the records before notes were applied

    @property
    def _mode(self) -> CheckMode:
        return CheckMode(update=self.state.options.update, gpu_slug=self.case.gpu)

    def check(self, measurement: Measurement) -> Record:
        entry = self.state.entry(self.case.gpu, self.case.case_id)
        gate = self.state.options.gate
        record = case_record(self.case, measurement, self.peaks, entry, gate, self._mode)
        if record.status == Status.REGRESSED:
            retry = case_record(self.case, self.measure.again(measurement), self.peaks, entry, gate, self._mode)
            first = f"first measurement {record.value:.4g} {record.unit} ({record.delta_pct:+.1f} %)"
            best = retry if retry.value > record.value else record
            record = replace(best, note="; ".join(n for n in (best.note, f"re-measured: {first}, "
                                                              f"second {retry.value:.4g}") if n))
        record = self._keep(record)
        if self.exporter is not None:
            self.exporter(measurement, record)
        return record

    def check_ratio(self, numerator: Measurement, denominator: Measurement, name: str = "vs_cublas") -> Record:
        ratio_case = replace(self.case, case_id=f"{self.case.case_id}#{name}")
        entry = self.state.entry(self.case.gpu, ratio_case.case_id)
        record = ratio_record(self.case, numerator, denominator, name, entry, self.state.options.gate, self._mode)
        return self._keep(record)

    def note(self, text: str) -> None:
        """Add ``text`` to the note of every row this test produced (and will produce)."""
        self.notes.append(text)
        self.records = [self._with_notes(r) for r in self._unnoted]

    def _with_notes(self, record: Record) -> Record:
        return replace(record, note="; ".join(n for n in (record.note, *self.notes) if n))

    def _keep(self, record: Record) -> Record:
        self._unnoted.append(record)
        record = self._with_notes(record)
        self.records.append(record)
        return record

    def outcome(self) -> tuple[str, str]:
        """``("fail" | "skip" | "pass", message)`` for the test, by the session's policies."""
        options = self.state.options
        failing = [r for r in self.records if r.failed]
        if failing:
            return "fail", "\n".join(_failure_line(r) for r in failing)
        unreliable = [r for r in self.records if r.status == Status.UNRELIABLE]
        if unreliable and options.on_unreliable != "pass":
            return options.on_unreliable, "\n".join(f"{r.case_id}: {r.note}" for r in unreliable)
        strict_improved = [r for r in self.records if r.status == Status.IMPROVED and options.gate.strict]
        if strict_improved:
            return "fail", "\n".join(f"--strict: {r.case_id}: {r.note}" for r in strict_improved)
        missing = [r for r in self.records if r.status == Status.NO_BASELINE]
        if missing and options.missing != "pass":
            return options.missing, "\n".join(f"{r.case_id}: {r.note}" for r in missing)
        return "pass", ""


def _failure_line(record: Record) -> str:
    if record.status == Status.REGRESSED:
        return (f"REGRESSED {record.case_id}: {record.value:.4g} {record.unit} vs baseline "
                f"{record.baseline:.4g} ({record.delta_pct:+.1f} %, tolerance {100 * (record.tolerance or 0):.1f} %)"
                f"; {record.note}")
    return f"{record.status} {record.case_id}: {record.value:.4g} {record.unit}; {record.note}"
