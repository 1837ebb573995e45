"""Pure statistics over per-call sample times, and the adaptive stopping rule.

The statistic of record is the median (robust to the occasional preempted sample); the spread is the
relative interquartile range. The stopping rule asks for a *precise median*, not a small spread: the
half-width of the median's ~95 % confidence interval, ``1.57·IQR/√n`` (McGill, Tukey & Larsen 1978, the
notch of a box plot), relative to the median, must fall below a target. A noisier case simply takes
more samples, up to its cap.

The target is what the verdict needs: a gated case's band times ``band_fraction`` (its interval
within a quarter of a 4 % band), the interval taken on the figure the gate will judge (cycles per call for a
clock-bound case whose clock moved, time otherwise), with a floor of samples and a cap of GPU time. A
measurement with no band (an A/B round, a tool) keeps the fixed ``noise_target``. The criterion is nvbench's
small interface (``initialize(params)``, ``add(x)``, ``is_finished()``: ``IntervalCriterion``), driven by the
loop (``timing.py``) through ``JudgedFigure`` and tested with synthetic sequences.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from gpuperf.vocabulary import Basis


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


class Stop:
    """Why sampling stopped (a measurement's ``stop_reason``)."""

    CONVERGED = "converged"  # the judged figure's interval reached its target
    CAP = "cap"  # the cap of GPU time came first
    TIMEOUT = "timeout"  # the per-case wall clock came first (the host, not the GPU, was slow)


@dataclass(frozen=True)
class StopParams:
    """What one criterion asks: the relative half-width of the median's 95 % interval to reach (``target``), at
    least ``min_samples`` samples and ``min_gpu_s`` of GPU time first, and no more than ``max_gpu_s``."""

    target: float
    min_samples: int
    min_gpu_s: float = 0.0
    max_gpu_s: float = math.inf

    def __post_init__(self) -> None:
        if not self.target > 0 or self.min_samples < 3 or self.min_gpu_s < 0 or not self.max_gpu_s > 0:
            raise ValueError(f"a stopping criterion needs target > 0, min_samples ≥ 3, min_gpu_s ≥ 0 and "
                             f"max_gpu_s > 0, got {self}")


class IntervalCriterion:
    """nvbench's stopping-criterion interface over one figure's samples: ``initialize(params)``, then ``add(x,
    gpu_s)`` per sample (``gpu_s``: the GPU time the sample cost), ``is_finished()`` after each batch; ``reason``
    says why it finished, ``interval`` what it reached (the median's relative 95 % half-width)."""

    def __init__(self) -> None:
        self.initialize(StopParams(target=math.inf, min_samples=3))

    def initialize(self, params: StopParams) -> None:
        self.params = params
        self.values: list[float] = []
        self.gpu_s = 0.0
        self.reason = ""

    def add(self, value: float, gpu_s: float = 0.0) -> None:
        """One sample of the figure; a sample with no figure (NaN: its clock was not stamped) is spent, not kept."""
        self.gpu_s += gpu_s
        if math.isfinite(value) and value > 0:
            self.values.append(value)

    @property
    def interval(self) -> float | None:
        """The median's relative 95 % half-width over the samples so far (``None`` below three)."""
        return summarize(self.values).rel_median_ci if len(self.values) >= 3 else None

    def is_finished(self) -> bool:
        params = self.params
        if len(self.values) < params.min_samples:
            return False
        interval = self.interval
        if self.gpu_s >= params.min_gpu_s and interval is not None and interval <= params.target:
            self.reason = Stop.CONVERGED
        elif self.gpu_s >= params.max_gpu_s:
            self.reason = Stop.CAP
        return bool(self.reason)


def _never(clock_mhz: float | None) -> bool:
    return False


@dataclass(frozen=True)
class Band:
    """The bands a case's verdict will judge it within, as the stopping rule needs them (``gate.stopping_band``
    builds it): ``time`` for its measured figure, ``cycles`` for its figure at max clock (``None``: never judged on
    cycles), and ``on_cycles(clock)``, whether the verdict reads cycles when the calls ran at that mean SM clock."""

    time: float
    cycles: float | None = None
    on_cycles: Callable[[float | None], bool] = field(default=_never, compare=False)


@dataclass(frozen=True)
class Sampling:
    """What the stopping rule did for a measurement's figure of record, as data (a record's ``extra.sampling``):
    the samples and GPU time (flushes included) it took, the figure whose interval decided (``Basis``), the
    interval it reached and the one it sought (relative half-widths), the band (``None``: none known) and why it
    stopped (``Stop``)."""

    samples: int
    gpu_s: float
    basis: str
    interval: float | None
    target: float
    reason: str
    band: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {"samples": self.samples, "gpu_s": self.gpu_s, "basis": self.basis, "interval": self.interval,
                "target": self.target, "band": self.band, "reason": self.reason}


@dataclass(frozen=True)
class StoppingRule:
    """When to stop sampling (the one home of its settings): enough samples *and* (without a band) enough timed
    GPU time, then a precise enough median; or the cap of GPU time (with a band), or the per-case timeout (wall
    clock), whichever comes first.

    With a band, the target is ``band_fraction`` × the band and there is no floor of GPU time: a quiet case stops
    at ``min_samples``. ``band_fraction`` = 0.25 puts the interval of a 4 % band at ±1 %, the margin between that
    band and a 5 % slowdown (to be caught) or a 3 % one (to pass). The floor is 6 samples: the fewest whose range
    holds the median with at least 95 % (1 − 2 × 2⁻⁶ = 96.9 %) whatever the distribution; on three H200s
    (evidence/measuring.md) the floor of 10 it replaced left the cases that stopped there with an
    interval a twentieth of their target, so the floor, not the precision, decided their sampling."""

    min_samples: int = 6
    min_time_s: float = 0.2
    noise_target: float = 0.005
    timeout_s: float = 3.0
    band_fraction: float = 0.25
    max_gpu_s: float = 0.5

    def __post_init__(self) -> None:
        if self.min_samples < 3:
            raise ValueError(f"min_samples must be at least 3 (a median and a spread), got {self.min_samples}")
        if self.min_time_s < 0 or self.timeout_s <= 0 or self.noise_target <= 0:
            raise ValueError("min_time_s ≥ 0, timeout_s > 0 and noise_target > 0 are required")
        if not 0 < self.band_fraction <= 1 or self.max_gpu_s <= 0:
            raise ValueError(f"band_fraction in (0, 1] and max_gpu_s > 0 are required, got {self.band_fraction} and "
                             f"{self.max_gpu_s}")

    def params(self, band: float | None = None, min_gpu_s: float | None = None) -> StopParams:
        """The criterion's parameters: for a case judged within ``band``, its interval within ``band_fraction`` of
        it and the cap of GPU time; without one, ``noise_target`` after ``min_gpu_s`` (default ``min_time_s``)."""
        if band is not None:
            return StopParams(target=self.band_fraction * band, min_samples=self.min_samples,
                              max_gpu_s=self.max_gpu_s)
        return StopParams(target=self.noise_target, min_samples=self.min_samples,
                          min_gpu_s=self.min_time_s if min_gpu_s is None else min_gpu_s)

    def verdict(self, samples: Sequence[float], timed_s: float, wall_s: float) -> str | None:
        """``None`` to keep sampling, else why to stop (``Stop``), for samples with no band that cost ``timed_s``
        of GPU time over ``wall_s``."""
        figure = JudgedFigure(self)
        figure.add(samples, (), (), timed_s)
        return figure.stop(wall_s) or None


class JudgedFigure:
    """The stopping rule over a measurement's batches: a criterion on time and, where ``band`` lets the verdict read
    cycles, one on cycles per call. The one that decides is the figure the verdict would read at the calls' mean
    clock so far (``band.on_cycles``): a power-capped GEMM whose time scatters by 5 % stops once its cycles are
    known. Cycles decide only where at least half the samples have them (as ``Measurement.cycles_summary`` asks)."""

    def __init__(self, rule: StoppingRule, band: Band | None = None) -> None:
        self.rule, self.band = rule, band
        self.on_time = IntervalCriterion()
        self.on_time.initialize(rule.params(band.time if band is not None else None))
        self.on_cycles: IntervalCriterion | None = None
        if band is not None and band.cycles is not None:
            self.on_cycles = IntervalCriterion()
            self.on_cycles.initialize(rule.params(band.cycles))
        self.samples = 0
        self.clocks_mhz: list[float] = []

    def add(self, samples: Sequence[float], cycles: Sequence[float], clocks_mhz: Sequence[float],
            gpu_s: float) -> None:
        """One batch: its samples, their cycles and SM clocks where stamped, and the GPU time it took."""
        share = gpu_s / max(1, len(samples))
        for index, sample in enumerate(samples):
            self.on_time.add(sample, share)
            if self.on_cycles is not None:
                self.on_cycles.add(cycles[index] if index < len(cycles) else math.nan, share)
        self.samples += len(samples)
        self.clocks_mhz.extend(clock for clock in clocks_mhz if math.isfinite(clock) and clock > 0)

    def judged(self) -> tuple[IntervalCriterion, str]:
        """The criterion of the figure the verdict would read now, and its ``Basis``."""
        cycles, band = self.on_cycles, self.band
        if band is None or cycles is None or 2 * len(cycles.values) < len(self.on_time.values):
            return self.on_time, Basis.TIME
        clock = math.fsum(self.clocks_mhz) / len(self.clocks_mhz) if self.clocks_mhz else None
        return (cycles, Basis.CYCLES) if band.on_cycles(clock) else (self.on_time, Basis.TIME)

    def stop(self, wall_s: float) -> str:
        """Why to stop after ``wall_s`` of sampling (``Stop``), or ``""`` to go on: the judged figure's criterion,
        else the wall-clock timeout once the floor of samples is met (the host, not the GPU, was slow)."""
        criterion, _ = self.judged()
        if criterion.is_finished():
            return criterion.reason
        return Stop.TIMEOUT if wall_s >= self.rule.timeout_s and self.samples >= self.rule.min_samples else ""

    def sampling(self, reason: str) -> Sampling:
        """What the rule did, as a record carries it."""
        criterion, basis = self.judged()
        band = None if self.band is None else self.band.cycles if basis == Basis.CYCLES else self.band.time
        return Sampling(samples=self.samples, gpu_s=criterion.gpu_s, basis=basis, interval=criterion.interval,
                        target=criterion.params.target, reason=reason, band=band)


def batch_sizes(full: int, per_sample: int, floor: int | None) -> Iterator[int]:
    """Calls per batch of a phase whose samples are ``per_sample`` calls each: ``full`` batches without a floor
    (a fixed noise target); with one (a band), the first batch holds the floor of samples and each next one twice
    as many, up to ``full``, so a quiet case stops at its floor instead of a full batch and a noisy one soon
    samples in full batches."""
    size = full if floor is None else max(per_sample, min(full, per_sample * floor))
    while True:
        yield size
        size = min(full, 2 * size)
