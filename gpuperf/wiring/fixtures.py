"""The objects behind the GPU fixtures: a per-device cache, the ``measure`` callable and ``perf``.

The plugin creates these and hands them to tests; the deciding is done by the pure modules
(``check``, ``baseline``, ``anomaly``). ``Perf`` needs only something that measures again, so the
plugin's own tests drive it with a synthetic measurement source.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, ContextManager, Protocol

from gpuperf.verdict.check import (CaseIdentity, band_for, case_record, context_for, dry_ratio_record, dry_record,
                                   ratio_record, round_band_for, unmeasurable_record)
from gpuperf.verdict.gate import Context, failure_line, outcome, with_profile_hint
from gpuperf.measure.device import GpuContext, NoGpuError, list_devices, query_device
from gpuperf.measure.measurement import Measurement, UnmeasurableCall
from gpuperf.measure.metrics import Work
from gpuperf.measure.stats import Band
from gpuperf.measure.rotation import relocated
from gpuperf.measure.peaks import device_peaks
from gpuperf.store.baseline import Entry
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Metric, check_key
from gpuperf.wiring.case_ids import case_id_of as case_id_of  # re-exported: the plugin and lifecycle take it here
from gpuperf.wiring.containment import Stage, contained, failed
from gpuperf.wiring.containment import carried as carried_record
from gpuperf.wiring.session import SessionState
from gpuperf.wiring.session_options import Options


def describe_context(ctx: GpuContext) -> dict[str, Any]:
    """A device as ``python -m gpuperf device --json`` describes it: ``DeviceInfo.to_dict()`` plus ``peaks`` and
    how this process times a call (``kernel_timer``)."""
    from gpuperf.measure.cupti_trace import timer_description

    return {**ctx.info.to_dict(), "peaks": ctx.peaks.to_dict(), "kernel_timer": timer_description()}


def run_info(ctx: GpuContext, flush_modes: Sequence[str]) -> RunInfo:
    return run_info_from(describe_context(ctx), flush_modes)


def run_info_from(device: Mapping[str, Any], flush_modes: Sequence[str]) -> RunInfo:
    """The session header from a device description (``DeviceInfo.to_dict()`` plus ``peaks``, as
    ``python -m gpuperf device --json`` prints it)."""
    cc = device.get("cc") or (0, 0)
    return RunInfo(
        gpu_name=str(device["name"]), gpu_slug=str(device["slug"]), compute_capability=f"{cc[0]}.{cc[1]}",
        driver=str(device["driver"]), cuda_runtime=str(device["cuda_runtime"]), cublas=str(device["cublas"]),
        cupy=str(device["cupy"]), sm_clock_max_mhz=device.get("sm_clock_max_mhz"),
        mem_clock_mhz=device.get("mem_clock_mhz"), flush_modes=tuple(flush_modes),
        started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        extra={"peaks": device.get("peaks"), "sm_count": device.get("sm_count"),
               "l2_bytes": device.get("l2_bytes"), "bus_width_bits": device.get("bus_width_bits"),
               "pci_bus_id": device.get("pci_bus_id"), "uuid": device.get("uuid"), "serial": device.get("serial"),
               "missing": list(device.get("missing") or ()), "kernel_timer": device.get("kernel_timer")},
    )


#: The bands the verdict on a measured work will use (``gate.stopping_band`` for the test's entry).
BandOf = Callable[[Work], Band]


class GpuPool:
    """One ``GpuContext``, flush buffer, measuring stream and cuBLAS handle per device, created on first use."""

    def __init__(self) -> None:
        self.contexts: dict[int, GpuContext] = {}
        self.flush_buffers: dict[int, Any] = {}
        self.streams: dict[int, Any] = {}
        self.handles: dict[int, int] = {}

    def context(self, index: int) -> GpuContext:
        if index not in self.contexts:
            info, nvml = query_device(index)  # raises NoGpuError naming what is missing
            import cupy

            self.contexts[index] = GpuContext(index=index, device=cupy.cuda.Device(index), info=info, nvml=nvml,
                                              peaks=device_peaks(info))
        return self.contexts[index]

    def devices(self) -> list[tuple[int, str]]:
        """``[(index, name), …]`` of the CUDA devices, without a context on any of them."""
        return list_devices()

    def describe(self, index: int, isolated: bool = False) -> dict[str, Any]:
        """``DeviceInfo.to_dict()`` plus ``peaks`` of device ``index``. ``isolated`` asks a subprocess, so this
        process never holds a CUDA context on the GPU (an xdist controller, whose workers measure there:
        NVML would report its context as contention)."""
        if not isolated:
            return describe_context(self.context(index))
        out = subprocess.run([sys.executable, "-m", "gpuperf", "device", "--gpu", str(index), "--json"],
                             capture_output=True, text=True, check=False, timeout=120)
        if out.returncode != 0:
            raise NoGpuError(out.stderr.strip().removeprefix("gpuperf: error: ") or f"cannot query GPU {index}")
        described: dict[str, Any] = json.loads(out.stdout)
        return described

    def flush_buffer(self, ctx: GpuContext) -> Any:
        if ctx.index not in self.flush_buffers:
            from gpuperf.measure.timing import FlushBuffer

            with ctx.device:
                self.flush_buffers[ctx.index] = FlushBuffer(ctx.info.l2_bytes)
        return self.flush_buffers[ctx.index]

    def stream(self, ctx: GpuContext) -> Any:
        """The device's one non-blocking measuring stream that every test runs on (``streams.MeasuringStream``: a
        ``cupy.cuda.Stream`` that also gives itself in the forms other launchers take). One, not one per test: on the H200 the
        same split-K SGEMV call measured 8.58 µs on the first stream a process created and 9.12 µs (+6 %) on
        any later one (cuBLAS's reduction kernel overlaps the GEMV's tail on the first, starts 0.29 µs after
        it on the others), so a case's figure depended on how many tests had run before it."""
        if ctx.index not in self.streams:
            from gpuperf.measure.streams import new_measuring_stream

            with ctx.device:
                self.streams[ctx.index] = new_measuring_stream()
        return self.streams[ctx.index]

    @contextlib.contextmanager
    def current(self, stream: Any) -> Iterator[None]:
        """``stream`` made CuPy's and (where this process imported PyTorch) PyTorch's current stream, with Triton's
        kernel loads watched (``launchers.watch_triton``) so what a test's kernels compiled joins their identity."""
        from gpuperf.measure.launchers import watch_triton
        from gpuperf.measure.streams import framework_streams

        watch_triton()
        with stream, framework_streams(stream):
            yield

    def measurer(self, ctx: GpuContext, stream: Any, options: Options, flush_mode: str, entry: Entry | None = None,
                 round_band: float | None = None) -> Measurer:
        """The ``measure`` fixture's object: a timer on this device's flush buffer and tracer, asking the launchers
        what they compiled, with ``stream`` made the frameworks' current stream while it measures. Against the
        test's baseline ``entry`` (``None``: none, or re-recording), a call is measured by the entry's method and
        sampled until the figure its verdict reads is as precise as its band needs (``check.band_for``); an A/B
        round (``round_band``: the run's threshold; a side reads no entry, ``SessionState.entry``) is measured the
        same way on both sides, by the timer's default method, sampled to that threshold as a band
        (``check.round_band_for``)."""
        from gpuperf.measure.launchers import compiled_count, identify
        from gpuperf.measure.streams import framework_streams
        from gpuperf.measure.timing import SamplingConfig, Timer

        config = SamplingConfig(rule=options.rule, warmup_calls=options.warmup_calls,
                                warmup_time_s=options.warmup_time_s, min_sample_s=options.min_sample_s)
        timer = Timer(ctx.info.l2_bytes, self.flush_buffer(ctx), ctx.nvml, config, backend=self.backend(),
                      tracer=self.tracer(), identify=identify, compiled=compiled_count)
        max_clock = ctx.info.sm_clock_max_mhz
        band_of = band_for(entry, options.gate, ctx.peaks, max_clock) if round_band is None else \
            round_band_for(round_band, ctx.peaks, max_clock)
        return Measurer(timer, flush_mode, prefer_method=entry.method if entry else "",
                        current=lambda: framework_streams(stream), band_for=band_of, rounds=round_band is not None)

    def backend(self) -> Any:
        """The device operations the timer uses (``None``: CuPy's; a synthetic pool gives its own)."""
        return None

    def tracer(self) -> Any:
        """The process's kernel tracer (``cupti_trace.KernelTracer``), or ``None`` where CUPTI cannot trace."""
        from gpuperf.measure.cupti_trace import open_tracer

        return open_tracer()[0]

    def cublas_handle(self, ctx: GpuContext) -> int:
        if ctx.index not in self.handles:
            from cupy_backends.cuda.libs import cublas

            with ctx.device:
                self.handles[ctx.index] = cublas.create()
        return self.handles[ctx.index]

    @contextlib.contextmanager
    def bound_cublas_handle(self, ctx: GpuContext, stream: Any) -> Iterator[int]:
        """The ``cublas_handle`` fixture: the device's handle bound to ``stream``, its math mode restored after."""
        from cupy_backends.cuda.libs import cublas

        handle = self.cublas_handle(ctx)
        mode = cublas.getMathMode(handle)
        cublas.setStream(handle, stream.ptr)
        try:
            yield handle
        finally:
            stream.synchronize()
            cublas.setMathMode(handle, mode)
            cublas.setStream(handle, 0)


class MeasureSource(Protocol):
    def __call__(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str | None = None,
                 label: str = "") -> Measurement: ...

    def again(self, measurement: Measurement, relocate: bool = False) -> Measurement: ...


class Measurer:
    """The ``measure`` fixture: times ``fn(*operands)`` and remembers how, so ``perf`` can confirm.

    ``prefer_method`` is the method the test's baseline entry was recorded with: every measurement of the
    test asks the timer for it, so today's figure is taken the way the recorded one was. ``current`` makes the
    measuring stream the frameworks' current stream while measuring (``streams.framework_streams``), for a test
    that imported PyTorch only in its body. ``band_for(work)``: the bands the verdict on that work will use, so the
    timer samples until the judged figure is as precise as that band needs (``None``: the fixed noise target).
    ``rounds``: a side of an A/B run, whose ``again`` is a round of a call measured already (``Timer.measure``'s
    ``repeat``: warmed up by count, no second cross-check, a floor of 3 samples); a gate's confirmation is measured
    as the first was.
    """

    def __init__(self, timer: Any, flush_mode: str, prefer_method: str = "",
                 current: Callable[[], ContextManager[None]] = contextlib.nullcontext,
                 band_for: BandOf | None = None, rounds: bool = False) -> None:
        self.timer = timer
        self.flush_mode = flush_mode
        self.prefer_method = prefer_method
        self.current = current
        self.band_for = band_for
        self.rounds = rounds
        self._recipes: dict[int, tuple[Measurement, tuple[Any, ...]]] = {}
        self._relocated: dict[int, tuple[Any, ...]] = {}

    def __call__(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str | None = None,
                 label: str = "") -> Measurement:
        recipe = (fn, work, tuple(operands), flush or self.flush_mode, label)
        with self.current():
            measurement: Measurement = self.timer.measure(*recipe, prefer_method=self.prefer_method,
                                                          band=self._band(work))
        self._recipes[id(measurement)] = (measurement, recipe)
        return measurement

    def release(self) -> None:
        """Forget what was kept to measure again (the operands, their relocated copies): at the test's end, since
        the test's item keeps its ``perf``, and with it this object, to the session's end. Kept, every test's
        buffers outlived it: two A/B sides, each with its rounds' copies, ran an H200 out of memory."""
        self._recipes.clear()
        self._relocated.clear()

    def again(self, measurement: Measurement, relocate: bool = False) -> Measurement:
        """Re-run the measurement that produced ``measurement`` (a gate's confirmation, an A/B round); with
        ``relocate``, as both do (``turns.py``), on copies of its operands in fresh memory (``rotation.relocated``).
        The previous round's copies are released only after the new ones exist, so consecutive rounds never share a
        placement."""
        _, recipe = self._recipes[id(measurement)]
        if not relocate:
            return self(*recipe)
        fn, work, operands, flush, label = recipe
        moved = self._relocated[id(measurement)] = relocated(operands)
        with self.current():  # not kept as a recipe: a round's copies live until the next round's exist
            timed: Measurement = self.timer.measure(fn, work, moved, flush, label, prefer_method=self.prefer_method,
                                                    band=self._band(work), repeat=self.rounds)
        return timed

    def _band(self, work: Work) -> Band | None:
        return self.band_for(work) if self.band_for is not None else None


@dataclass
class Perf:
    """The ``perf`` fixture: checks measurements, confirms regressions, defers the test's verdict.

    Every check is recorded; failures are collected and raised once the test body returns
    (``raise_outcome``), so a test with several checks reports all of them. Each check is keyed by its own
    identity, as ``ab`` keys them: the first by the case id (``<case id>#<name>`` for a ratio), the second by
    ``<case id>@2``, the third ``@3`` (``check_key``), in the baseline, the gate, the results and the history, so
    no figure is judged against another check's entry and no case is recorded twice.
    """

    state: SessionState
    case: CaseIdentity
    peaks: Any
    measure: MeasureSource
    run: RunInfo | None
    records: list[Record] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # ``attach``: data every row carries in ``extra``
    exporter: Callable[[Measurement, Record], None] | None = None  # e.g. pytest-benchmark's JSON
    version_changes: tuple[str, ...] = ()  # since the baseline was recorded: named in every regression note
    dry: bool = False  # --dry-run: the measurements are stand-ins (``dry_run.py``), checked without a figure
    _unnoted: list[Record] = field(default_factory=list)  # the records before notes were applied
    _checks: dict[str, int] = field(default_factory=dict)  # how many checks each key has had

    def _next_case(self, key: str) -> CaseIdentity:
        """The identity of this test's next check of ``key`` (its case id, or a ratio's ``<case id>#<name>``)."""
        occurrence = self._checks[key] = self._checks.get(key, 0) + 1
        return replace(self.case, case_id=check_key(key, occurrence))

    def _context(self, case: CaseIdentity) -> Context:
        return context_for(case, self.state.options.update, self.version_changes)

    def check(self, measurement: Measurement) -> Record:
        """Gate one measurement; a regression or a too-noisy result is measured again before it stands. Whatever
        fails in the checking (a figure or kernel record of an unexpected form) is this case's ``ERROR`` row with one
        line (``containment``), never the end of the test or the session."""
        case = self._next_case(self.case.case_id)
        try:
            record = self._checked(case, measurement)
        except UnmeasurableCall:
            raise
        except Exception as exc:
            if not contained(exc):
                raise
            return self._keep(failed(vars(case) | {"metric": _metric_of(measurement)}, Stage.CHECK, exc))
        record = self._keep(record)
        if self.exporter is not None:
            try:
                self.exporter(measurement, record)
            except Exception as exc:
                if not contained(exc):
                    raise
                record = self._replace_last(failed(record, Stage.EXPORT, exc))
        return record

    def _checked(self, case: CaseIdentity, measurement: Measurement) -> Record:
        entry = self.state.entry(case.gpu, case.case_id)
        gate, context = self.state.options.gate, self._context(case)
        if self.dry:
            return dry_record(case, measurement, entry, context, self.peaks)
        record = case_record(case, measurement, self.peaks, entry, gate, context)
        return self.state.turns.settle(self.case.case_id, record, lambda relocate: case_record(
            case, self.measure.again(measurement, relocate=relocate), self.peaks, entry, gate, context))

    def check_ratio(self, numerator: Measurement, denominator: Measurement, name: str = "vs_cublas") -> Record:
        """Gate ``numerator ÷ denominator`` as the entry ``<case id>#<name>``, confirmed like ``check`` (and contained
        like it: a failure is the ratio's ``ERROR`` row)."""
        ratio_case = self._next_case(f"{self.case.case_id}#{name}")
        try:
            record = self._checked_ratio(ratio_case, numerator, denominator, name)
        except UnmeasurableCall:
            raise
        except Exception as exc:
            if not contained(exc):
                raise
            return self._keep(failed(vars(ratio_case) | {"metric": Metric.RATIO}, Stage.CHECK, exc))
        return self._keep(record)

    def _checked_ratio(self, ratio_case: CaseIdentity, numerator: Measurement, denominator: Measurement,
                       name: str) -> Record:
        entry = self.state.entry(self.case.gpu, ratio_case.case_id)
        gate, context = self.state.options.gate, self._context(self.case)
        if self.dry:
            return replace(dry_ratio_record(self.case, numerator, denominator, name, entry, context),
                           case_id=ratio_case.case_id)
        record = replace(ratio_record(self.case, numerator, denominator, name, entry, gate, context, self.peaks),
                         case_id=ratio_case.case_id)
        return self.state.turns.settle(self.case.case_id, record, lambda relocate: replace(ratio_record(
            self.case, self.measure.again(numerator, relocate=relocate),
            self.measure.again(denominator, relocate=relocate), name, entry, gate, context, self.peaks),
            case_id=ratio_case.case_id))

    def unmeasurable(self, error: UnmeasurableCall) -> Record:
        """Keep the ``ERROR`` row of a call that could not be measured, with the error's one line as its note."""
        return self._keep(unmeasurable_record(self._next_case(self.case.case_id), error.work, error.label,
                                              str(error), error.flush, self.peaks))

    def note(self, text: str) -> None:
        """Add ``text`` to the note of every row this test produced (and will produce)."""
        self.notes.append(text)
        self.records = [self._noted(r) for r in self._unnoted]

    def attach(self, **facts: Any) -> None:
        """Add ``facts`` (JSON-able values) to the ``extra`` of every row this test produced (and will produce):
        data a report reads, where a note is only for people."""
        self.facts.update(facts)
        self.records = [self._noted(r) for r in self._unnoted]

    def _noted(self, record: Record) -> Record:
        """``record`` with the notes and facts, or its ``ERROR`` row where they cannot be added to it."""
        try:
            return self._with_notes(record)
        except Exception as exc:
            if not contained(exc):
                raise
            return failed(record, Stage.NOTE, exc)

    def _with_notes(self, record: Record) -> Record:
        noted = replace(record, note="; ".join(n for n in (record.note, *self.notes) if n),
                        extra={**record.extra, **self.facts})
        return with_profile_hint(noted)

    def _keep(self, record: Record) -> Record:
        self._unnoted.append(record)
        record = self._noted(record)
        self.records.append(record)
        return record

    def _replace_last(self, record: Record) -> Record:
        """The last kept record replaced by ``record`` (its ``ERROR`` row, after a later stage failed)."""
        self._unnoted[-1] = record
        self.records[-1] = record
        return record

    def carried(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The records as the test's report carries them to the session (``containment.carried``), and the line of
        each that could not be carried and is its ``ERROR`` row instead."""
        carried, errors = [], []
        for index, record in enumerate(self.records):
            try:  # a record the verdict cannot read is its ERROR row, not the test's traceback
                outcome([record], self.state.options.policy)
            except Exception as exc:
                if not contained(exc):
                    raise
                record = self.records[index] = failed(record, Stage.VERDICT, exc)  # outcome() fails the test
            data, line = carried_record(record)
            carried.append(data)
            if line:
                errors.append(failure_line(Record.from_dict(data)))
        return carried, errors

    def outcome(self, errors: Sequence[str] = ()) -> tuple[str, str]:
        """``("fail" | "skip" | "pass", message)`` for the test, by the session's policies; a test whose records
        could not be carried (``errors``, their lines) or judged fails with their lines."""
        try:
            verdict, message = outcome(self.records, self.state.options.policy)
        except Exception as exc:
            if not contained(exc):
                raise
            verdict, message = "fail", failure_line(failed(vars(self.case), Stage.VERDICT, exc))
        if errors:
            verdict, message = "fail", "\n".join([*([message] if verdict == "fail" else []), *errors])
        return verdict, message


def _metric_of(measurement: Any) -> str:
    """The metric a measurement was to give, for the ``ERROR`` row of one that could not be checked."""
    metric = getattr(getattr(measurement, "work", None), "metric", "")
    return metric if isinstance(metric, str) else ""
