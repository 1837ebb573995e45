"""Pure statistics over per-call sample times, and the adaptive stopping rule.

The statistic of record is the median (robust to the occasional preempted sample); the spread is the
relative interquartile range. The stopping rule asks for a *precise median*, not a small spread: the
half-width of the median's ~95 % confidence interval, ``1.57·IQR/√n`` (McGill, Tukey & Larsen 1978, the
notch of a box plot), relative to the median, must fall below the noise target. A noisier case simply takes
more samples, up to its timeout.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: McGill et al.'s notch constant: 1.57·IQR/√n is ~ a 95 % interval for the median.
MEDIAN_CI_CONSTANT = 1.57


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (NumPy's default method) of already sorted values; ``q`` in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of no samples")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


@dataclass(frozen=True)
class Summary:
    """Statistics of one set of samples (seconds per call)."""

    n: int
    median: float
    mean: float
    minimum: float
    maximum: float
    p10: float
    p90: float
    q1: float
    q3: float
    stdev: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_iqr(self) -> float:
        return self.iqr / self.median

    @property
    def rel_stdev(self) -> float:
        return self.stdev / self.mean

    @property
    def rel_median_ci(self) -> float:
        """Half-width of the median's ~95 % interval, relative to the median."""
        return MEDIAN_CI_CONSTANT * self.iqr / math.sqrt(self.n) / self.median


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        raise ValueError("cannot summarise zero samples")
    if any(not math.isfinite(s) or s <= 0.0 for s in samples):
        raise ValueError("sample times must be positive and finite")
    ordered = sorted(samples)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    variance = math.fsum((s - mean) ** 2 for s in ordered) / (n - 1) if n > 1 else 0.0
    return Summary(
        n=n,
        median=percentile(ordered, 50.0),
        mean=mean,
        minimum=ordered[0],
        maximum=ordered[-1],
        p10=percentile(ordered, 10.0),
        p90=percentile(ordered, 90.0),
        q1=percentile(ordered, 25.0),
        q3=percentile(ordered, 75.0),
        stdev=math.sqrt(variance),
    )


@dataclass(frozen=True)
class StoppingRule:
    """When to stop sampling: enough samples *and* enough timed GPU time, then a precise enough median, or
    the per-case timeout (wall clock) whichever comes first."""

    min_samples: int = 10
    min_time_s: float = 0.2
    noise_target: float = 0.005
    timeout_s: float = 3.0

    def __post_init__(self) -> None:
        if self.min_samples < 3:
            raise ValueError(f"min_samples must be at least 3 (a median and a spread), got {self.min_samples}")
        if self.min_time_s < 0 or self.timeout_s <= 0 or self.noise_target <= 0:
            raise ValueError("min_time_s ≥ 0, timeout_s > 0 and noise_target > 0 are required")

    def verdict(self, samples: Sequence[float], timed_s: float, wall_s: float) -> str | None:
        """``None`` to keep sampling, else why to stop: ``"converged"`` or ``"timeout"``."""
        enough = len(samples) >= self.min_samples and timed_s >= self.min_time_s
        if enough and summarize(samples).rel_median_ci <= self.noise_target:
            return "converged"
        if wall_s >= self.timeout_s and len(samples) >= self.min_samples:
            return "timeout"
        return None
