"""The measurement loop (SPEC "Measurement method"): CUDA events on the current stream, cold by default.

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
batch is dropped and the measurement goes on unheld, its method saying so ("-unheld").

CuPy is imported lazily so that ``gpuperf`` imports on machines without it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuperf.measure.clocks import decode, unreliable
from gpuperf.measure.device import Nvml
from gpuperf.measure.measurement import DEFAULT_MIN_SAMPLE_S, DEFAULT_ROTATE_BELOW_S, Measurement, Method
from gpuperf.measure.metrics import Work
from gpuperf.measure.stats import StoppingRule
from gpuperf.vocabulary import Flush


@dataclass(frozen=True)
class SamplingConfig:
    rule: StoppingRule = field(default_factory=StoppingRule)
    warmup_calls: int = 3
    warmup_time_s: float = 0.05
    rotate_below_s: float = DEFAULT_ROTATE_BELOW_S  # a shorter cold call is timed k at a time over rotated copies
    min_sample_s: float = DEFAULT_MIN_SAMPLE_S  # a rotated sample holds enough calls to last this long
    max_held_calls: int = 256  # calls enqueued behind one hold: the launch queue (~1000 entries) must not fill
    max_rotation_copies: int = 256
    hot_min_sample_s: float = 50e-6  # hot samples batch calls up to at least this long
    batch_time_s: float = 0.05  # GPU time enqueued between host checks
    max_batch: int = 32
    throttle_retries: int = 3
    throttle_backoff_s: float = 0.25


class CupyBackend:
    """The device operations the loop needs, on CuPy. Tests swap in a synthetic backend."""

    def __init__(self) -> None:
        import cupy

        self.cupy = cupy

    def current_stream(self) -> Any:
        return self.cupy.cuda.get_current_stream()

    def event(self) -> Any:
        return self.cupy.cuda.Event()

    def elapsed_s(self, start: Any, stop: Any) -> float:
        return float(self.cupy.cuda.get_elapsed_time(start, stop)) / 1e3

    def copy(self, operand: Any) -> Any:
        return self.cupy.copy(operand)

    def hold(self, stream: Any) -> Callable[[], bool]:
        if not hasattr(self, "_hold"):
            self._hold = StreamHold()
        return self._hold.hold(stream)


HOLD_TIMEOUT_S = 0.5
_HOLD_SOURCE = r"""
extern "C" __global__ void gpuperf_hold(volatile int* flag, unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (*flag == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) { *flag = 2; return; }
    }
}
"""


class StreamHold:
    """Blocks a stream until released by the host, with a timeout so a host-side synchronisation inside the
    measured callable cannot deadlock the run (the batch is then discarded and holding switched off)."""

    def __init__(self) -> None:
        import cupy
        import numpy

        self._memory = cupy.cuda.alloc_pinned_memory(4)  # pinned memory is device-visible under UVA
        self._flag = numpy.frombuffer(self._memory, dtype=numpy.int32, count=1)
        self._kernel = cupy.RawKernel(_HOLD_SOURCE, "gpuperf_hold")
        self._args = (numpy.uint64(self._memory.ptr), numpy.uint64(int(HOLD_TIMEOUT_S * 1e9)))

    def hold(self, stream: Any) -> Callable[[], bool]:
        self._flag[0] = 0
        self._kernel((1,), (1,), self._args, stream=stream)

        def release() -> bool:
            held = int(self._flag[0]) == 0
            self._flag[0] = 1
            return held

        return release


_FLUSH_SOURCE = r"""
extern "C" __global__ void gpuperf_flush(const int4* buffer, unsigned long long count, int4* sink) {
    int4 acc = make_int4(0, 0, 0, 0);
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        int4 v = buffer[i];
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    if (acc.x == 0x7fffffff && acc.y == acc.x && acc.z == acc.x && acc.w == acc.x) *sink = acc;
}
"""


class FlushBuffer:
    """Owns a device buffer of ``2 × L2`` bytes (read from the device) and *reads* it through the L2 on a
    stream, which evicts whatever the last sample left there.

    Reading rather than overwriting (nvbench's memset) matters: a memset leaves the L2 full of dirty lines,
    and their write-back then competes with the timed call's own traffic, so a memory-bound call looks a
    few per cent slower after a memset flush than with rotated operands. After a read the L2 is clean;
    the previous sample's dirty output is written back during the flush, outside the events. The buffer
    holds zeros, so the kernel's guarded store never happens, but the compiler cannot drop the loads.
    """

    def __init__(self, l2_bytes: int) -> None:
        import cupy

        if l2_bytes <= 0:
            raise ValueError(f"L2 size must be positive, got {l2_bytes}")
        self.nbytes = 2 * l2_bytes + (-2 * l2_bytes) % 16
        self.buffer = cupy.zeros(self.nbytes, dtype=cupy.uint8)
        self.sink = cupy.zeros(4, dtype=cupy.int32)
        self._kernel = cupy.RawKernel(_FLUSH_SOURCE, "gpuperf_flush")
        device = cupy.cuda.Device()
        self._grid = (4 * int(device.attributes["MultiProcessorCount"]),)

    def enqueue(self, stream: Any) -> None:
        import numpy

        self._kernel(self._grid, (256,), (self.buffer, numpy.uint64(self.nbytes // 16), self.sink), stream=stream)


def _array_bytes(operands: Sequence[Any]) -> int:
    return sum(int(getattr(op, "nbytes", 0)) for op in operands)


def _rotatable(operands: Sequence[Any]) -> bool:
    """Copies keep meaning only for contiguous arrays (a padded-ld view would lose its padding)."""
    arrays = [op for op in operands if hasattr(op, "nbytes")]
    return bool(arrays) and all(op.flags.c_contiguous or op.flags.f_contiguous for op in arrays)


def _copy_operands(backend: Any, operands: Sequence[Any], count: int) -> list[tuple[Any, ...]]:
    sets = [tuple(operands)]
    for _ in range(count - 1):
        sets.append(tuple(backend.copy(op) if hasattr(op, "nbytes") else op for op in operands))
    return sets


class Timer:
    """Measures callables on the current CuPy stream of one device."""

    def __init__(self, l2_bytes: int, flush_buffer: Any, nvml: Nvml, config: SamplingConfig,
                 backend: Any = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.l2_bytes = l2_bytes
        self.flush_buffer = flush_buffer
        self.nvml = nvml
        self.config = config
        self.backend = backend or CupyBackend()
        self.sleep = sleep
        self.clock = clock

    def measure(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str = Flush.COLD,
                label: str = "", prefer_method: str = "") -> Measurement:
        """``prefer_method`` asks for the cold method a baseline entry was recorded with (``cold-flush`` or
        ``cold-rotate``), so a call near the length threshold is not measured one way today and the other way
        tomorrow; empty: chosen from the warm call's length."""
        if flush not in Flush.MODES:
            raise ValueError(f"flush must be one of {Flush.MODES}, got {flush!r}")
        backend = self.backend
        stream = backend.current_stream()
        config = self.config
        clock_before = self.nvml.sm_clock_mhz()

        start, stop = backend.event(), backend.event()
        if flush == Flush.COLD:
            self.flush_buffer.enqueue(stream)  # unheld too: the flush kernel compiles on its first launch, and a
            # compile inside a held batch outlasts the hold (seen on the H200: the first case of a run came out
            # "cold-flush-unheld")
        fn(*operands)  # first call unheld: it may load modules or compile, which can wait for the device
        stop.record(stream)
        stop.synchronize()
        warm_calls, per_call, holding = 1, 0.0, True
        warm_start = self.clock()
        while warm_calls < config.warmup_calls or self.clock() - warm_start < config.warmup_time_s:
            release = backend.hold(stream)
            start.record(stream)
            fn(*operands)
            stop.record(stream)
            holding = release() and holding
            stop.synchronize()
            per_call = backend.elapsed_s(start, stop)
            warm_calls += 1

        operand_sets = [tuple(operands)]
        if flush == Flush.HOT:
            method = Method.HOT
            calls = max(1, min(1000, math.ceil(config.hot_min_sample_s / max(per_call, 1e-9) - 1e-6)))
        else:
            method, calls = Method.COLD_FLUSH, 1
            footprint = _array_bytes(operands)
            preferred = prefer_method.removesuffix(Method.UNHELD_SUFFIX)
            rotate = preferred == Method.COLD_ROTATE if preferred in (Method.COLD_FLUSH, Method.COLD_ROTATE) \
                else per_call < config.rotate_below_s
            if rotate and footprint and _rotatable(operands):
                copies = math.ceil(2 * self.l2_bytes / footprint) + 1
                if copies <= config.max_rotation_copies:
                    operand_sets = _copy_operands(backend, operands, copies)
                    calls = max(copies, math.ceil(config.min_sample_s / max(per_call, 1e-9) - 1e-6))
                    method, calls = Method.COLD_ROTATE, min(calls, config.max_held_calls)
        per_sample = max(per_call * calls, 1e-6)
        batch = max(1, min(config.max_batch, int(config.batch_time_s / per_sample), config.max_held_calls // calls))
        pairs = [(backend.event(), backend.event()) for _ in range(batch)]

        samples: list[float] = []
        timed_s = 0.0
        seen_events: set[str] = set()
        discarded, retries = 0, 0
        unreliable_reason = ""
        stop_reason = ""
        wall_start = self.clock()
        while not stop_reason:
            mask_before = self.nvml.clock_event_mask()
            release = backend.hold(stream) if holding else None
            for begin, end in pairs:
                if method == Method.COLD_FLUSH:
                    self.flush_buffer.enqueue(stream)
                begin.record(stream)
                for call in range(calls):
                    fn(*operand_sets[call % len(operand_sets)])
                end.record(stream)
            if release is not None and not release():
                holding = False  # the callable waited on the host: drop the batch, continue unheld
                pairs[-1][1].synchronize()
                discarded += len(pairs)
                continue
            pairs[-1][1].synchronize()
            elapsed = [backend.elapsed_s(begin, end) for begin, end in pairs]
            events = decode(mask_before | self.nvml.clock_event_mask())
            seen_events.update(events)
            slowed = unreliable(events)
            others = self.nvml.other_processes()
            if slowed or others:
                cause = (f"clock events {', '.join(slowed)}" if slowed else
                         f"other processes on the GPU (pids {', '.join(map(str, others))})")
                if retries < config.throttle_retries:
                    retries += 1
                    discarded += len(elapsed)
                    self.sleep(config.throttle_backoff_s * retries)
                    continue
                unreliable_reason = f"{cause} persisted through {retries} re-samplings"
            samples.extend(t / calls for t in elapsed)
            timed_s += sum(elapsed)
            stop_reason = config.rule.verdict(samples, timed_s, self.clock() - wall_start) or ""

        clock_after = self.nvml.sm_clock_mhz()
        clocks = (clock_before, clock_after) if clock_before is not None and clock_after is not None else None
        return Measurement(
            samples_s=tuple(samples),
            work=work,
            flush=flush,
            method=method if holding else f"{method}{Method.UNHELD_SUFFIX}",
            calls_per_sample=calls,
            warmup_calls=warm_calls,
            stop_reason=stop_reason,
            sm_clock_mhz=clocks,
            clock_events=tuple(sorted(seen_events)),
            unreliable_reason=unreliable_reason,
            discarded_samples=discarded,
            label=label,
        )
