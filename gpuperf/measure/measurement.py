"""``Measurement``: what one timing run produced, as plain data (no CuPy), with derived statistics.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from gpuperf.measure.metrics import Work
from gpuperf.measure.stats import Sampling, Summary, summarize
from gpuperf.vocabulary import Flush

if TYPE_CHECKING:  # a type only: the plugin's options read this module's defaults without the kernel records
    from gpuperf.measure.kernel_records import Kernel


#: A cold call shorter than this is timed several at a time over rotated operand copies (``cold-rotate``): alone
#: it would be dominated by event resolution and the gap after a flush.
DEFAULT_ROTATE_BELOW_S = 100e-6
#: The length of a rotated sample. Measured on the H200: the 4-stream batched cases (55–89 µs a
#: call) had a 3.4–5.0 % sample spread timed one call per sample, 1.2–1.9 % at 1 ms samples and 0.5–0.8 % at
#: 5 ms; short batched and FP16/BF16 GEMMs fell from ~2 % to 0.1–0.3 %. Longer samples of *long* power-capped
#: GEMMs got noisier instead (TF32 4096³: 3.0 % → 4.9 %), which is why only short calls are rotated.
DEFAULT_MIN_SAMPLE_S = 5e-3
#: Warm-up before a case is sampled: at least this many calls and this much wall time (clocks ramp, caches and
#: cuBLAS's heuristics settle; triton.testing.do_bench's default time). Each warm-up call waits for the GPU, so
#: this is wall time spent on every case.
DEFAULT_WARMUP_CALLS = 3
DEFAULT_WARMUP_TIME_S = 0.025
#: Calls per traced batch: each adds a kernel record and a clock stamp slot to read back on the host.
DEFAULT_MAX_TRACED_CALLS = 128


class Method:
    """How the samples were taken (recorded with every result)."""

    COLD_FLUSH = "cold-flush"  # L2 flushed (a read of ≥ 2×L2) before every sample, outside the events
    COLD_ROTATE = "cold-rotate"  # k calls per event pair over rotated operand copies totalling > 2×L2
    HOT = Flush.HOT  # back-to-back calls on the same operands: a warm cache
    UNHELD_SUFFIX = "-unheld"  # added when the batch could not be held behind the hold kernel
    #: Each call's kernel span from CUPTI's records, the L2 flushed before every call (cold) or calls back to
    #: back on the same operands (hot).
    TRACED_COLD = "cupti-cold"
    TRACED_HOT = "cupti-hot"
    TRACED: dict[str, str] = {Flush.COLD: TRACED_COLD, Flush.HOT: TRACED_HOT}

    @classmethod
    def traced(cls, method: str) -> bool:
        return method.removesuffix(cls.UNHELD_SUFFIX) in cls.TRACED.values()


def check_call(fn: object, work: object, flush: str) -> None:
    """What ``measure(fn, work, …)`` refuses before it times anything, on a GPU and in a dry run alike: a flush mode
    that is not one, an ``fn`` that cannot be called, a ``work`` that is not a ``Work``."""
    if flush not in Flush.MODES:
        raise ValueError(f"flush must be one of {Flush.MODES}, got {flush!r}")
    if not callable(fn):
        raise TypeError(f"measure's fn must be callable (the call to time), got {type(fn).__name__}")
    if not isinstance(work, Work):
        raise TypeError(f"measure's work must be a gpuperf.measure.metrics.Work (gemm_work(...) and the other "
                        f"helpers make one), got {type(work).__name__}")


class UnmeasurableCall(Exception):
    """The measured callable's device time cannot be known, so no figure is taken: it launched no kernel, or its
    kernels ran unordered with the measuring stream (``kernel_records.stray_kernels``). The message is one line
    naming what ran where and the fix; ``work``, ``label`` and ``flush`` say what was to be measured, so the case's row can
    still say what it is."""

    def __init__(self, message: str, work: Work, label: str = "", flush: str = Flush.COLD) -> None:
        super().__init__(message)
        self.work = work
        self.label = label
        self.flush = flush


#: Why a call with no kernel records has no figure; the fix names what usually causes it.
NO_KERNEL = ("fn launched no kernel on any stream (CUPTI saw none between the separators), so there is no device "
             "time to measure; check that fn enqueues its work rather than returning a cached result or only "
             "calling the host, and note that copies by the copy engine (cudaMemcpy, a tensor's copy_ between "
             "contiguous buffers) are not kernels: measure a kernel, or time the copy as part of one")


@dataclass(frozen=True)
class Measurement:
    """Per-call sample times and everything needed to explain them later."""

    samples_s: tuple[float, ...]
    work: Work
    flush: str  # Flush.COLD | Flush.HOT
    method: str
    calls_per_sample: int = 1
    warmup_calls: int = 0
    stop_reason: str = ""
    sm_clock_mhz: tuple[int, int] | None = None  # before, after
    clock_events: tuple[str, ...] = ()
    unreliable_reason: str = ""
    discarded_samples: int = 0
    label: str = ""
    kernels: tuple[Kernel, ...] = ()  # what one call launched, in order (traced measurements)
    event_median_s: float | None = None  # a traced measurement's event-timed cross-check, per call
    event_method: str = ""  # how that cross-check was taken
    trace_note: str = ""  # why a measurement with a tracer fell back to its event-timed figure
    #: Per sample, in step with ``samples_s`` (traced, stamped measurements): the mean SM cycles per call (its
    #: kernel span × the SM clock it ran at) and the mean SM clock in MHz, both measured on the GPU
    #: (``sm_clock.py``); NaN where a sample's clock was unknown.
    cycles_samples: tuple[float, ...] = ()
    clock_samples_mhz: tuple[float, ...] = ()
    max_clock_mhz: int | None = None  # the GPU's maximum SM clock (NVML), for the throughput at max clock
    sampling: Sampling | None = None  # what the stopping rule did for the figure of record

    def __post_init__(self) -> None:
        if not self.samples_s:
            raise ValueError("a Measurement needs at least one sample")

    @cached_property
    def summary(self) -> Summary:
        return summarize(self.samples_s)

    @property
    def median_s(self) -> float:
        return self.summary.median

    @property
    def launch_overhead_s(self) -> float | None:
        """Event-timed minus kernel time per call: the launch gaps that event timing counts and CUPTI does not."""
        return None if self.event_median_s is None else self.event_median_s - self.median_s

    @property
    def reliable(self) -> bool:
        return not self.unreliable_reason

    @property
    def value(self) -> float:
        """The primary metric (TFLOPS or GB/s) at the median time."""
        return self.work.value(self.median_s)

    @cached_property
    def cycles_summary(self) -> Summary | None:
        """The statistics of the per-sample cycles; ``None`` unless at least half the samples have a clock."""
        finite = [c for c in self.cycles_samples if math.isfinite(c) and c > 0]
        return summarize(finite) if finite and 2 * len(finite) >= len(self.samples_s) else None

    @property
    def cycles_per_call(self) -> float | None:
        """The median SM cycles per call: the call's work in clock cycles, whatever clock the host ran at."""
        return self.cycles_summary.median if self.cycles_summary else None

    @property
    def call_clock_mhz(self) -> float | None:
        """The mean SM clock the calls ran at (from the GPU's counters, not NVML)."""
        finite = [c for c in self.clock_samples_mhz if math.isfinite(c) and c > 0]
        return math.fsum(finite) / len(finite) if finite and self.cycles_summary else None

    @property
    def value_at_max_clock(self) -> float | None:
        """The primary metric the same cycles would give at the maximum SM clock: the host's power state taken
        out (for a compute-bound call; a memory-bound one is not clock-bound, and is judged on time)."""
        cycles = self.cycles_per_call
        if cycles is None or not self.max_clock_mhz:
            return None
        return self.work.value(cycles / (self.max_clock_mhz * 1e6))
