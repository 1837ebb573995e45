"""``Measurement``: what one timing run produced, as plain data (no CuPy), with derived statistics."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from gpuperf.metrics import Work
from gpuperf.stats import Summary, summarize


class Method:
    """How the samples were taken (recorded with every result)."""

    COLD_FLUSH = "cold-flush"  # L2 flushed (a read of ≥ 2×L2) before every sample, outside the events
    COLD_ROTATE = "cold-rotate"  # k calls per event pair over rotated operand copies totalling > 2×L2
    HOT = "hot"  # back-to-back calls on the same operands: a warm cache


@dataclass(frozen=True)
class Measurement:
    """Per-call sample times and everything needed to explain them later."""

    samples_s: tuple[float, ...]
    work: Work
    flush: str  # "cold" | "hot"
    method: str
    calls_per_sample: int = 1
    warmup_calls: int = 0
    stop_reason: str = ""
    sm_clock_mhz: tuple[int, int] | None = None  # before, after
    clock_events: tuple[str, ...] = ()
    unreliable_reason: str = ""
    discarded_samples: int = 0
    label: str = ""

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
    def reliable(self) -> bool:
        return not self.unreliable_reason

    @property
    def value(self) -> float:
        """The primary metric (TFLOPS or GB/s) at the median time."""
        return self.work.value(self.median_s)
