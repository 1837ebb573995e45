"""The measurement loop: CUDA events (or CUPTI kernel records) on the current stream, cold by default.

Phases, after nvbench's ``measure_cold``: warm-up (by count *and* time) → choose the method from the
warm call's duration → adaptive sampling in batches, each batch bracketed by NVML clock-event and
process checks → a ``Measurement``.

- cold-flush: before every sample, a read of a buffer ≥ 2 × the device's L2 on the same stream,
  outside the event pair, so it evicts the operands and its cost never enters a sample.
- cold-rotate: a call shorter than ``rotate_below_s`` is dominated by event resolution and the gap after a
  flush, so one sample times k calls over rotated copies of the operands whose total exceeds 2 × L2
  (CUTLASS's profiler method): every call still finds its data evicted, and no flush sits between calls.
  k is at least the number of copies, and enough calls to fill ``min_sample_s``, so short kernels are not
  timed one launch at a time (their sample spread fell from 2–5 % to under 1 % on the H200).
- hot: k back-to-back calls on the same operands per event pair (``--no-flush``).

Every batch of samples is enqueued behind a *hold* kernel that spins on a flag in pinned host memory until
the host has enqueued the whole batch (nvbench's blocking kernel): the GPU then runs the batch back to back,
so the time the host spends launching (Python, the cuBLAS binding) never appears as idle time between two
events. Without it, a 5 µs kernel whose launch costs 10 µs of host time would be timed at 10 µs. A batch
holds at most ``max_held_calls`` calls: a full launch queue would block the host behind the hold. A callable
that itself launches hundreds of kernels (a loop of GEMMs) still fills it; the hold then times out, the
batch is dropped and the measurement goes on unheld, its method saying so ("-unheld"): when every held warm-up
call timed out, or a batch did after ``hold_retries`` retries (one stalled host is not such a callable).

CuPy is imported lazily so that ``gpuperf`` imports on machines without it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuperf.measure.clocks import decode, unreliable
from gpuperf.measure.device import Nvml
from gpuperf.measure.kernel_records import Kernel, call_kernels, span_s
from gpuperf.measure.launchers import Identify, nothing_identified
from gpuperf.measure.rotation import array_bytes, copy_operands, rotatable
from gpuperf.measure.measurement import (DEFAULT_MAX_TRACED_CALLS, DEFAULT_MIN_SAMPLE_S, DEFAULT_ROTATE_BELOW_S,
                                         DEFAULT_WARMUP_CALLS, DEFAULT_WARMUP_TIME_S, NO_KERNEL, Measurement, Method,
                                         UnmeasurableCall, check_call)

from gpuperf.measure.cupy_backend import CupyBackend
from gpuperf.measure.separators import HOLD_TIMEOUT_S, FlushBuffer, Separators, StreamHold
from gpuperf.measure.metrics import Work
from gpuperf.measure.stats import Band, JudgedFigure, Sampling, StoppingRule, batch_sizes, summarize
from gpuperf.measure.traced_calls import Batch, TracedCalls, TraceMismatch, Unmeasurable, traced_batch
from gpuperf.vocabulary import Flush

#: The loop's separator kernels live in ``separators.py``; these names are imported from here as well.
__all__ = ["HOLD_TIMEOUT_S", "Batch", "BatchRunner", "CupyBackend", "FlushBuffer", "SamplingConfig", "StreamHold",
           "Timer"]


@dataclass(frozen=True)
class SamplingConfig:
    rule: StoppingRule = field(default_factory=StoppingRule)
    warmup_calls: int = DEFAULT_WARMUP_CALLS
    warmup_time_s: float = DEFAULT_WARMUP_TIME_S
    rotate_below_s: float = DEFAULT_ROTATE_BELOW_S  # a shorter cold call is timed k at a time over rotated copies
    min_sample_s: float = DEFAULT_MIN_SAMPLE_S  # a rotated sample holds enough calls to last this long
    max_held_calls: int = 256  # calls enqueued behind one hold: the launch queue (~1000 entries) must not fill
    max_rotation_copies: int = 256
    max_traced_calls: int = DEFAULT_MAX_TRACED_CALLS  # calls per traced batch: each adds a record to read back
    #: GPU time (flushes included) the traced phase samples at least without a band (an A/B round, a tool): a
    #: short kernel's median is precise after a few hundred calls. With a band, its precision decides alone.
    traced_min_time_s: float = 0.05
    #: With a tracer, the event-timed phase is only the cross-check: a median to a few per cent is enough, and five
    #: held samples give it; no floor of GPU time (for a short kernel it cost ten times its GPU time in launches).
    crosscheck_rule: StoppingRule = field(default_factory=lambda: StoppingRule(
        min_samples=5, min_time_s=0.0, noise_target=0.01, timeout_s=0.5))
    #: The floor of samples of a repeat (an A/B round after the first): the paired rule judges the rounds' scatter,
    #: so a round need not hold the median by itself; three samples still outvote one preempted sample.
    repeat_min_samples: int = 3
    hot_min_sample_s: float = 50e-6  # hot samples batch calls up to at least this long
    batch_time_s: float = 0.05  # GPU time enqueued between host checks
    max_batch: int = 32
    #: A batch whose hold timed out is taken held again this many times before its phase goes on unheld: a host
    #: stalled once (another thread, another process) is not a callable that waits on the host, which the warm-up
    #: already found out (its every held call timed out).
    hold_retries: int = 2
    throttle_retries: int = 3
    throttle_backoff_s: float = 0.25


@dataclass
class _Sampled:
    """What one sampling phase produced."""

    samples: list[float] = field(default_factory=list)
    timed_s: float = 0.0
    stop_reason: str = ""
    clock_events: set[str] = field(default_factory=set)
    sampling: Sampling | None = None  # what the stopping rule did
    unreliable_reason: str = ""
    discarded: int = 0
    holding: bool = True
    calls_per_sample: int = 1
    cycles: list[float] = field(default_factory=list)  # per sample, beside ``samples`` (traced phase, stamped)
    clocks_mhz: list[float] = field(default_factory=list)


#: A batch runner: enqueue one batch and return it, or ``None`` when the batch had to be dropped (the hold
#: timed out: the callable waited on the host).
BatchRunner = Callable[[bool], "Batch | None"]


class Timer:
    """Measures callables on the current CuPy stream of one device.

    With a ``tracer`` (``cupti_trace.KernelTracer``) a measurement has two phases: a short event-timed one,
    kept as the cross-check (its median minus the kernel time is the launch overhead), then the figure of
    record, each call's kernel span from CUPTI with the L2 flushed before every call. Without one, the
    event-timed phase is the figure (``Measurement.method`` says which).

    With a tracer, a call whose kernels the records cannot vouch for raises ``UnmeasurableCall`` instead of
    giving a figure: it launched no kernel, or launched kernels unordered with the measuring stream (on another
    stream, not joined back), whose time no interval on the measuring stream holds. ``identify`` wraps the
    callable's first call to learn what its launcher compiled (a Triton kernel's hash, a CuPy RawKernel's
    source), which joins each kernel's identity.
    """

    def __init__(self, l2_bytes: int, flush_buffer: Any, nvml: Nvml, config: SamplingConfig,
                 backend: Any = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter, tracer: Any = None,
                 identify: Identify | None = None, compiled: Callable[[], int] = lambda: 0) -> None:
        self.l2_bytes = l2_bytes
        self.flush_buffer = flush_buffer
        self.nvml = nvml
        self.config = config
        self.backend = backend or CupyBackend()
        self.sleep = sleep
        self.clock = clock
        self.tracer = tracer
        self.identify = identify or nothing_identified
        #: How many kernels the process's launchers have compiled so far (``launchers.compiled_count``): one more
        #: after the warm-up means a sample held a compilation or another configuration's code.
        self.compiled = compiled

    def measure(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str = Flush.COLD,
                label: str = "", prefer_method: str = "", band: Band | None = None,
                repeat: bool = False) -> Measurement:
        """``prefer_method`` asks for the event-timed method a baseline entry was recorded with (``cold-flush``
        or ``cold-rotate``), so a call near the length threshold is not measured one way today and the other
        way tomorrow; empty (or a traced method): chosen from the warm call's length. ``band``: the bands the
        case's verdict will use; the figure of record is then sampled until its interval is within the rule's
        fraction of the band it will be judged within (``None``: until the fixed noise target). ``repeat``: an A/B
        round of a call measured already, warm: warmed by count, no second cross-check, a floor of 3 samples."""
        check_call(fn, work, flush)
        stream = self.backend.current_stream()
        clock_before = self.nvml.sm_clock_mhz()
        warm_calls, per_call, holding, codes = self._warm_up(fn, operands, flush, stream, repeat)
        compiled_after_warm_up = self.compiled()
        event_phase = self.tracer is None or not repeat  # the figure without a tracer; else its cross-check
        method, calls, operand_sets = self._event_method(operands, flush, per_call, prefer_method) if event_phase \
            else ("", 1, [])
        events = self._events(fn, operand_sets, method, calls, per_call, stream, holding, band) if event_phase \
            else _Sampled(holding=holding)
        event_method = "" if not events.samples else method if events.holding else f"{method}{Method.UNHELD_SUFFIX}"
        traced: _Sampled | None = None
        kernels: tuple[Kernel, ...] = ()
        trace_note = ""
        if self.tracer is not None:
            try:
                traced, kernels, trace_note = self._trace(fn, operands, flush, per_call, stream, events.holding,
                                                          codes, band, repeat)
            except Unmeasurable as exc:
                raise UnmeasurableCall(str(exc), work, label, flush) from None
        compiled = self.compiled() - compiled_after_warm_up
        if compiled:
            raise UnmeasurableCall(
                f"fn compiled {compiled} kernel(s) while it was being timed, after {warm_calls} warm-up calls, so its "
                "samples mix the code the warm-up settled on with other code (an autotuner still choosing, a "
                "compile for another specialisation); warm it up at this size before measuring (call it once, or "
                "raise --warmup / --warmup-time), or compile it for this size (torch.compile(fn, dynamic=False))",
                work, label, flush)
        clock_after = self.nvml.sm_clock_mhz()
        clocks = (clock_before, clock_after) if clock_before is not None and clock_after is not None else None
        common = dict(work=work, flush=flush, warmup_calls=warm_calls, sm_clock_mhz=clocks, label=label)
        if traced is None:
            return Measurement(
                samples_s=tuple(events.samples), method=event_method, calls_per_sample=calls,
                stop_reason=events.stop_reason, clock_events=tuple(sorted(events.clock_events)),
                unreliable_reason=events.unreliable_reason, discarded_samples=events.discarded,
                trace_note=trace_note, sampling=events.sampling, **common)  # type: ignore[arg-type]
        traced_method = Method.TRACED[flush]
        return Measurement(
            samples_s=tuple(traced.samples),
            method=traced_method if traced.holding else f"{traced_method}{Method.UNHELD_SUFFIX}",
            calls_per_sample=traced.calls_per_sample, stop_reason=traced.stop_reason,
            clock_events=tuple(sorted(events.clock_events | traced.clock_events)),
            unreliable_reason=traced.unreliable_reason or events.unreliable_reason,
            discarded_samples=events.discarded + traced.discarded,
            event_median_s=summarize(events.samples).median if events.samples else None, event_method=event_method,
            kernels=kernels,
            cycles_samples=tuple(traced.cycles), clock_samples_mhz=tuple(traced.clocks_mhz),
            max_clock_mhz=self.nvml.max_sm_clock_mhz(), sampling=traced.sampling, **common)  # type: ignore[arg-type]

    # -- phases ------------------------------------------------------------------------------------------

    def _warm_up(self, fn: Callable[..., Any], operands: Sequence[Any], flush: str, stream: Any,
                 repeat: bool = False) -> tuple[int, float, bool, Mapping[str, str]]:
        """Warm-up by count and time (by count only for a ``repeat``); returns (calls, the last call's event time,
        whether holding works, the code digests the first call's launcher reported)."""
        backend, config = self.backend, self.config
        start, stop = backend.event(), backend.event()
        if flush == Flush.COLD:
            self.flush_buffer.enqueue(stream)  # unheld too: the flush kernel compiles on its first launch, and a
            # compile inside a held batch outlasts the hold (seen on the H200: the first case of a run came out
            # "cold-flush-unheld")
        with self.identify(fn, operands) as codes:
            fn(*operands)  # first call unheld: it may load modules or compile, which can wait for the device
        stop.record(stream)
        stop.synchronize()
        warm_calls, per_call, held = 1, 0.0, []
        warm_start, warm_time_s = self.clock(), 0.0 if repeat else config.warmup_time_s
        while warm_calls < config.warmup_calls or self.clock() - warm_start < warm_time_s:
            release = backend.hold(stream)
            start.record(stream)
            fn(*operands)
            stop.record(stream)
            held.append(release())
            stop.synchronize()
            per_call = backend.elapsed_s(start, stop)
            warm_calls += 1
        return warm_calls, per_call, any(held) or not held, codes  # unheld only when no held call made it

    def _event_method(self, operands: Sequence[Any], flush: str, per_call: float,
                      prefer_method: str) -> tuple[str, int, list[tuple[Any, ...]]]:
        """(method, calls per sample, operand sets) of the event-timed phase."""
        config = self.config
        operand_sets = [tuple(operands)]
        if flush == Flush.HOT:
            calls = max(1, min(1000, math.ceil(config.hot_min_sample_s / max(per_call, 1e-9) - 1e-6)))
            return Method.HOT, calls, operand_sets
        preferred = prefer_method.removesuffix(Method.UNHELD_SUFFIX)
        rotate = preferred == Method.COLD_ROTATE if preferred in (Method.COLD_FLUSH, Method.COLD_ROTATE) \
            else per_call < config.rotate_below_s
        footprint = array_bytes(operands)
        if rotate and footprint and rotatable(operands):
            copies = math.ceil(2 * self.l2_bytes / footprint) + 1
            if copies <= config.max_rotation_copies:
                calls = math.ceil(config.min_sample_s / max(per_call, 1e-9) - 1e-6)
                if self.tracer is not None:  # the cross-check: its floor of samples fits one held batch
                    calls = min(calls, config.max_held_calls // config.crosscheck_rule.min_samples)
                calls = max(copies, calls)
                return Method.COLD_ROTATE, min(calls, config.max_held_calls), \
                    copy_operands(self.backend, operands, copies)
        return Method.COLD_FLUSH, 1, operand_sets

    def _events(self, fn: Callable[..., Any], operand_sets: list[tuple[Any, ...]], method: str, calls: int,
                per_call: float, stream: Any, holding: bool, band: Band | None) -> _Sampled:
        """The event-timed phase: the figure without a tracer; with one, its cross-check."""
        batches = self._event_batches(fn, operand_sets, method, calls, per_call, stream)
        if self.tracer is not None:
            return self._sample(batches, self.config.crosscheck_rule, holding)
        return self._sample(batches, self.config.rule, holding, band)

    def _event_batches(self, fn: Callable[..., Any], operand_sets: list[tuple[Any, ...]], method: str, calls: int,
                       per_call: float, stream: Any) -> BatchRunner:
        backend, config = self.backend, self.config
        per_sample = max(per_call * calls, 1e-6)
        # the cross-check (with a tracer) stops at its floor of samples when they agree: a batch of that many
        most = config.crosscheck_rule.min_samples if self.tracer is not None else config.max_batch
        batch = max(1, min(most, int(config.batch_time_s / per_sample), config.max_held_calls // calls))
        pairs = [(backend.event(), backend.event()) for _ in range(batch)]

        def run(holding: bool) -> Batch | None:
            release = backend.hold(stream) if holding else None
            for begin, end in pairs:
                if method == Method.COLD_FLUSH:
                    self.flush_buffer.enqueue(stream)
                begin.record(stream)
                for call in range(calls):
                    fn(*operand_sets[call % len(operand_sets)])
                end.record(stream)
            held = release is None or release()
            pairs[-1][1].synchronize()
            if not held:
                return None
            elapsed = [backend.elapsed_s(begin, end) for begin, end in pairs]
            return Batch([t / calls for t in elapsed], sum(elapsed))

        return run

    def _trace(self, fn: Callable[..., Any], operands: Sequence[Any], flush: str, per_call: float, stream: Any,
               holding: bool, codes: Mapping[str, str], band: Band | None = None,
               repeat: bool = False) -> tuple[_Sampled | None, tuple[Kernel, ...], str]:
        """The traced phase: every call preceded by a separator kernel (the flush when cold, an empty marker
        when hot), each call's span read from its kernel records, and the SM clock it ran at from the separators'
        stamps (``sm_clock.py``). A sample is the mean span of consecutive calls covering ``min_sample_s`` of kernel
        time (at most a batch; with a band, so few that the first batch holds the floor of samples: a quiet short
        kernel stops after one batch, not one round trip a sample): single spans of a short kernel scatter by a few
        per cent (seen on the H200: 2–6 % IQR), which would widen the gate's band for no reason, while their mean is
        as steady as a rotated event sample. ``None`` and why, when the records cannot be split into the calls
        enqueued. ``Unmeasurable`` when the callable launched no kernel, or kernels unordered with the measuring
        stream (``stray_kernels``): then no interval holds their time, and no figure may be taken."""
        config, tracer = self.config, self.tracer
        rule = replace(config.rule, min_samples=config.repeat_min_samples) if repeat else config.rule
        calls = TracedCalls(self.backend, tracer, self._separators(flush), fn, operands, stream)
        tracer.start()
        try:
            probe = calls.enqueue(1, False)
            if probe is not None and calls.found_none:
                raise Unmeasurable(NO_KERNEL)
            if not probe or not probe[0]:
                return None, (), calls.failure[0] if calls.failure else "no kernel records for the call"
            launches = len(probe[0][0]) + 1
            count = max(1, min(config.max_held_calls // launches,
                               int(config.batch_time_s / max(per_call, 1e-6)), config.max_traced_calls))
            group = max(1, min(count, math.ceil(config.min_sample_s / max(span_s(probe[0][0]), 1e-9) - 1e-6)))
            if band is not None:  # the first batch holds the floor of samples: one round trip for a quiet case
                group = max(1, min(group, count // rule.min_samples))
            count -= count % group
            sizes = batch_sizes(count, group, rule.min_samples if band is not None else None)

            def run(held: bool) -> Batch | None:
                enqueued = calls.enqueue(next(sizes), held)
                if enqueued is None:
                    return None
                if not enqueued[0]:
                    raise TraceMismatch(calls.failure[-1])
                calls.seen.extend(enqueued[0])
                return traced_batch(*enqueued, group)

            try:
                sampled = self._sample(run, replace(rule, min_time_s=config.traced_min_time_s), holding, band)
            except TraceMismatch as exc:
                return None, (), str(exc)
        finally:
            tracer.stop()
        sampled.calls_per_sample = group
        return sampled, call_kernels(calls.seen, codes), ""

    def _separators(self, flush: str) -> Separators:
        """The separator kernel of a traced call, stamping the SM clock where the flush buffer can."""
        flush_buffer = self.flush_buffer
        slots = int(getattr(flush_buffer, "stamp_slots", 0))
        if flush == Flush.COLD:
            return Separators(flush_buffer.enqueue, slots, flush_buffer)
        return Separators(flush_buffer.mark, slots, flush_buffer)

    def _sample(self, run: BatchRunner, rule: StoppingRule, holding: bool, band: Band | None = None) -> _Sampled:
        """Batches until ``rule`` stops on the figure the verdict will judge within ``band`` (``JudgedFigure``),
        each bracketed by the NVML clock-event and process checks; a batch under throttling or contention is
        re-taken up to ``throttle_retries`` times, then kept and flagged."""
        config = self.config
        sampled = _Sampled(holding=holding)
        figure = JudgedFigure(rule, band)
        wall_start = self.clock()
        retries = voids = 0
        while not sampled.stop_reason:
            mask_before = self.nvml.clock_event_mask()
            batch = run(sampled.holding)
            if batch is None:  # the hold timed out: drop the batch; after the retries, the callable waits on the host
                voids += 1
                sampled.holding = voids <= config.hold_retries
                continue
            events = decode(mask_before | self.nvml.clock_event_mask())
            sampled.clock_events.update(events)
            slowed = unreliable(events)
            others = self.nvml.other_processes()
            if slowed or others:
                cause = (f"clock events {', '.join(slowed)}" if slowed else
                         f"other processes on the GPU (pids {', '.join(map(str, others))})")
                if retries < config.throttle_retries:
                    retries += 1
                    sampled.discarded += len(batch.samples)
                    self.sleep(config.throttle_backoff_s * retries)
                    continue
                sampled.unreliable_reason = f"{cause} persisted through {retries} re-samplings"
            sampled.samples.extend(batch.samples)
            sampled.cycles.extend(batch.cycles)
            sampled.clocks_mhz.extend(batch.clocks_mhz)
            sampled.timed_s += batch.timed_s
            figure.add(batch.samples, batch.cycles, batch.clocks_mhz, batch.timed_s)
            sampled.stop_reason = figure.stop(self.clock() - wall_start)
        sampled.sampling = figure.sampling(sampled.stop_reason)
        return sampled
