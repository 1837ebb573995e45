"""``gpuperf.measure.stats`` (percentiles, summaries, the stopping rule) and ``gpuperf.measure.measurement.Measurement``.

The stopping rule is driven with synthetic sample sequences and a simulated clock, as nvbench tests its
stopping criteria: no GPU, no timing, fully deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from gpuperf.measure.measurement import Measurement, Method
from gpuperf.measure.metrics import gemm_work, gemv_work
from gpuperf.measure.stats import MEDIAN_CI_CONSTANT, StoppingRule, percentile, summarize

# -- percentile ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 10, 101, 1000])
def test_percentile_matches_numpy_default_method(size: int) -> None:
    values = sorted(np.random.default_rng(size).lognormal(mean=-7.0, sigma=0.3, size=size).tolist())
    for q in (0.0, 1.0, 10.0, 25.0, 33.3, 50.0, 75.0, 90.0, 99.0, 100.0):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12, abs=0.0)


def test_percentile_interpolates_between_neighbours() -> None:
    # position (4 - 1) * 0.5 = 1.5: halfway between 2.0 and 4.0
    assert percentile([1.0, 2.0, 4.0, 8.0], 50.0) == 3.0
    assert percentile([1.0, 2.0, 4.0, 8.0], 0.0) == 1.0
    assert percentile([1.0, 2.0, 4.0, 8.0], 100.0) == 8.0


def test_percentile_rejects_empty_input_and_q_out_of_range() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50.0)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        percentile([1.0], 100.5)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        percentile([1.0], -1.0)


# -- summarize -------------------------------------------------------------------------------------------


def test_summarize_fields_agree_with_numpy() -> None:
    samples = np.random.default_rng(7).normal(loc=1e-3, scale=2e-5, size=257)
    s = summarize(samples.tolist())  # unsorted input: summarize sorts
    assert s.n == 257
    assert s.median == pytest.approx(float(np.median(samples)), rel=1e-12)
    assert s.mean == pytest.approx(float(np.mean(samples)), rel=1e-12)
    assert s.minimum == float(samples.min())
    assert s.maximum == float(samples.max())
    assert s.p10 == pytest.approx(float(np.percentile(samples, 10)), rel=1e-12)
    assert s.p90 == pytest.approx(float(np.percentile(samples, 90)), rel=1e-12)
    assert s.q1 == pytest.approx(float(np.percentile(samples, 25)), rel=1e-12)
    assert s.q3 == pytest.approx(float(np.percentile(samples, 75)), rel=1e-12)
    assert s.stdev == pytest.approx(float(np.std(samples, ddof=1)), rel=1e-9)
    assert s.iqr == pytest.approx(s.q3 - s.q1)
    assert s.rel_iqr == pytest.approx(s.iqr / s.median)
    assert s.rel_stdev == pytest.approx(s.stdev / s.mean)


def test_summarize_small_hand_checked_example() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.n, s.median, s.mean, s.minimum, s.maximum) == (5, 3.0, 3.0, 1.0, 5.0)
    assert (s.q1, s.q3, s.iqr) == (2.0, 4.0, 2.0)
    assert s.p10 == pytest.approx(1.4)
    assert s.p90 == pytest.approx(4.6)
    assert s.stdev == pytest.approx(math.sqrt(2.5))


def test_summarize_single_sample_has_zero_spread() -> None:
    s = summarize([2e-3])
    assert s.n == 1
    assert s.median == s.minimum == s.maximum == 2e-3
    assert s.stdev == 0.0
    assert s.rel_iqr == 0.0


@pytest.mark.parametrize("bad", [[], [1e-3, 0.0], [1e-3, -1e-3], [1e-3, math.nan], [math.inf]])
def test_summarize_rejects_empty_nonpositive_and_nonfinite_samples(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(bad)


def test_rel_median_ci_is_the_mcgill_notch_over_the_median() -> None:
    samples = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]  # q1 3, q3 7, median 5, n 9
    s = summarize(samples)
    assert MEDIAN_CI_CONSTANT == 1.57
    assert s.rel_median_ci == pytest.approx(1.57 * 4.0 / 3.0 / 5.0)


def test_rel_median_ci_shrinks_as_one_over_sqrt_n() -> None:
    base = [0.9e-3, 1.0e-3, 1.1e-3, 1.0e-3]
    small, large = summarize(base * 4), summarize(base * 64)
    assert small.iqr == pytest.approx(large.iqr)
    assert large.rel_median_ci == pytest.approx(small.rel_median_ci / 4.0)


# -- StoppingRule ----------------------------------------------------------------------------------------


def _drive(rule: StoppingRule, draw: Callable[[], float], wall_per_timed: float = 1.5, limit: int = 100_000
           ) -> tuple[str, list[float], float, float]:
    """Feed samples one at a time, as the timing loop does; wall time runs ahead of timed GPU time (flushes,
    launches, host work)."""
    samples: list[float] = []
    timed = wall = 0.0
    for _ in range(limit):
        x = draw()
        samples.append(x)
        timed += x
        wall += x * wall_per_timed
        reason = rule.verdict(samples, timed, wall)
        if reason is not None:
            return reason, samples, timed, wall
    raise AssertionError(f"the rule never stopped after {limit} samples")


def _quiet(seconds: float, seed: int = 0) -> Callable[[], float]:
    rng = np.random.default_rng(seed)
    return lambda: float(seconds * (1.0 + 1e-4 * rng.standard_normal()))


def test_quiet_samples_converge_once_min_samples_reached_when_time_is_not_binding() -> None:
    rule = StoppingRule(min_samples=10, min_time_s=0.2, noise_target=0.005, timeout_s=3.0)
    reason, samples, timed, _ = _drive(rule, _quiet(0.05))  # 10 × 50 ms = 0.5 s ≥ 0.2 s
    assert reason == "converged"
    assert len(samples) == 10
    assert timed >= rule.min_time_s


def test_quiet_samples_converge_only_once_min_time_reached() -> None:
    """1 ms calls are precise after 10 samples, but 0.2 s of timed GPU time takes ~200 of them."""
    rule = StoppingRule(min_samples=10, min_time_s=0.2, noise_target=0.005, timeout_s=3.0)
    reason, samples, timed, _ = _drive(rule, _quiet(1e-3))
    assert reason == "converged"
    assert timed >= 0.2
    assert timed - samples[-1] < 0.2  # stopped at the first sample that reached min_time
    assert 195 <= len(samples) <= 205


def test_precise_samples_do_not_stop_before_min_samples() -> None:
    rule = StoppingRule(min_samples=10, min_time_s=0.0, noise_target=0.005, timeout_s=3.0)
    constant = [1e-3] * 9
    assert rule.verdict(constant, timed_s=100.0, wall_s=1.0) is None  # 9 samples: not yet
    assert rule.verdict(constant + [1e-3], timed_s=100.0, wall_s=1.0) == "converged"


@pytest.mark.long
def test_noisy_sequence_keeps_sampling_until_timeout() -> None:
    rule = StoppingRule(min_samples=10, min_time_s=0.2, noise_target=0.005, timeout_s=3.0)
    rng = np.random.default_rng(3)
    reason, samples, _, wall = _drive(rule, lambda: float(1e-3 * rng.lognormal(0.0, 0.2)))
    assert reason == "timeout"
    assert wall >= rule.timeout_s
    assert wall - 1.5 * samples[-1] < rule.timeout_s  # stopped at the first sample past the timeout
    assert summarize(samples).rel_median_ci > rule.noise_target


def test_noisy_sequence_converges_when_given_enough_time() -> None:
    """The same noise is not a failure of the rule: with a long timeout the median does get precise."""
    rule = StoppingRule(min_samples=10, min_time_s=0.2, noise_target=0.01, timeout_s=1e9)
    rng = np.random.default_rng(3)
    reason, samples, _, _ = _drive(rule, lambda: float(1e-3 * rng.lognormal(0.0, 0.05)))
    assert reason == "converged"
    assert summarize(samples).rel_median_ci <= 0.01
    assert summarize(samples[:-1]).rel_median_ci > 0.01 or sum(samples[:-1]) < 0.2


def test_timeout_still_requires_min_samples() -> None:
    """A very slow call is sampled at least min_samples times even past the timeout (a median needs them)."""
    rule = StoppingRule(min_samples=10, min_time_s=0.2, noise_target=0.005, timeout_s=3.0)
    noisy = [1.0, 2.0, 1.0, 2.0, 1.0]
    assert rule.verdict(noisy, timed_s=7.0, wall_s=10.0) is None
    assert rule.verdict(noisy * 2, timed_s=15.0, wall_s=20.0) == "timeout"


def test_converged_wins_over_timeout_when_both_hold() -> None:
    rule = StoppingRule(min_samples=3, min_time_s=0.0, noise_target=0.005, timeout_s=1.0)
    assert rule.verdict([1e-3, 1e-3, 1e-3], timed_s=3e-3, wall_s=5.0) == "converged"


@pytest.mark.parametrize("kwargs", [
    {"min_samples": 2},
    {"min_samples": 0},
    {"min_time_s": -0.1},
    {"timeout_s": 0.0},
    {"timeout_s": -1.0},
    {"noise_target": 0.0},
    {"noise_target": -0.01},
])
def test_invalid_stopping_parameters_raise(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        StoppingRule(**kwargs)


def test_default_stopping_rule() -> None:
    rule = StoppingRule()
    assert (rule.min_samples, rule.min_time_s, rule.noise_target) == (6, 0.2, 0.005)


# -- Measurement -----------------------------------------------------------------------------------------


def test_measurement_derives_median_and_primary_metric() -> None:
    work = gemm_work(1024, 1024, 1024, "fp32")
    m = Measurement(samples_s=(3e-4, 1e-4, 2e-4), work=work, flush="cold", method=Method.COLD_FLUSH)
    assert m.median_s == 2e-4
    assert m.summary.n == 3
    assert m.value == pytest.approx(2 * 1024**3 / 2e-4 / 1e12)  # TFLOPS
    assert m.reliable


def test_measurement_value_of_memory_bound_work_is_gbps() -> None:
    work = gemv_work(1000, 1000, "fp32")
    m = Measurement(samples_s=(1e-5,), work=work, flush="hot", method=Method.HOT)
    assert m.value == pytest.approx(work.bytes / 1e-5 / 1e9)


def test_measurement_unreliable_when_a_reason_is_given() -> None:
    m = Measurement(samples_s=(1e-3,), work=gemm_work(8, 8, 8, "fp32"), flush="cold", method=Method.COLD_FLUSH,
                    unreliable_reason="hw_thermal_slowdown")
    assert not m.reliable


def test_measurement_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        Measurement(samples_s=(), work=gemm_work(8, 8, 8, "fp32"), flush="cold", method=Method.COLD_FLUSH)
