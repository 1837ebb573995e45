"""The anomaly rules of ``gpuperf.verdict.anomaly``: each fires when it should, stays quiet when it should not, holds
its boundary, and names the causes a reader needs (seed 001 §5–§6). No GPU: the rules are pure functions.

Boundary inputs are chosen so that the rule's arithmetic is exact in binary floating point (``5/100`` is the
double nearest 0.05, as is the literal), so "at the threshold" really is at it.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from gpuperf.verdict import anomaly
from gpuperf.verdict.anomaly import (
    FLUSH_LARGE_FACTOR,
    FLUSH_LARGE_MAX_GAP,
    FLUSH_SMALL_FACTOR,
    FLUSH_SMALL_MIN_GAP,
    PATHS_MAX_GAP,
    TF32_MIN_SPEEDUP,
    WARMUP_MAX_EXCESS,
    Anomaly,
)

L2 = 60 * 2**20  # H200


def test_anomaly_str_names_the_rule() -> None:
    assert str(Anomaly("some-rule", "what happened")) == "some-rule: what happened"


def test_thresholds_are_the_documented_values() -> None:
    """The SPEC and seed numbers; a change here is a change of the product, not a refactor."""
    assert PATHS_MAX_GAP == 0.05
    assert TF32_MIN_SPEEDUP > 1.0
    assert FLUSH_SMALL_FACTOR < 1.0 < FLUSH_LARGE_FACTOR
    assert 0.0 < FLUSH_SMALL_MIN_GAP < FLUSH_LARGE_MAX_GAP
    assert WARMUP_MAX_EXCESS > 0.0


class TestAboveComputePeak:
    @pytest.mark.parametrize("tflops", [0.0, 30.0, 66.9])
    def test_quiet_up_to_and_at_the_peak(self, tflops: float) -> None:
        assert anomaly.above_compute_peak(tflops, 66.9, "fp32") is None

    def test_fires_just_above_the_peak(self) -> None:
        found = anomaly.above_compute_peak(67.0, 66.9, "fp32")
        assert found is not None
        assert found.rule == "above-compute-peak"

    def test_message_names_numbers_and_every_cause(self) -> None:
        found = anomaly.above_compute_peak(120.0, 66.9, "fp32")
        assert found is not None
        text = found.message
        assert "120.0" in text and "66.9" in text and "fp32" in text
        assert "cache" in text
        assert "FLOP count" in text
        assert "timing error" in text
        assert "--no-flush" in text


class TestAboveMemoryPeak:
    @pytest.mark.parametrize("gemv_class", [True, False])
    def test_quiet_up_to_and_at_the_peak(self, gemv_class: bool) -> None:
        assert anomaly.above_memory_peak(4815.0, 4815.0, gemv_class) is None
        assert anomaly.above_memory_peak(3000.0, 4815.0, gemv_class) is None

    def test_gemv_class_says_cache_resident(self) -> None:
        found = anomaly.above_memory_peak(9000.0, 4815.0, gemv_class=True)
        assert found is not None
        assert found.rule == "above-memory-peak"
        assert "GEMV-class" in found.message
        assert "100 %" in found.message
        assert "cache-resident" in found.message

    def test_message_names_numbers_and_every_cause(self) -> None:
        found = anomaly.above_memory_peak(9000.0, 4815.0, gemv_class=False)
        assert found is not None
        text = found.message
        assert "9000" in text and "4815" in text
        assert "L2" in text
        assert "byte count" in text
        assert "timing error" in text


class TestCheckCase:
    """The per-case bundle: which peaks apply to which kind of case."""

    PEAKS: ClassVar[dict[str, float]] = {"peak_tflops": 66.9, "peak_gbps": 4815.0}

    def _check(self, **kwargs: object) -> list[str]:
        args: dict[str, object] = {"tflops": 10.0, "gbps": 1000.0, "precision": "fp32", "gemv_class": False,
                                   "cold": True, **self.PEAKS}
        args.update(kwargs)
        return [found.rule for found in anomaly.check_case(**args)]  # type: ignore[arg-type]

    def test_quiet_on_a_plausible_case(self) -> None:
        assert self._check() == []

    def test_compute_peak(self) -> None:
        assert self._check(tflops=100.0) == ["above-compute-peak"]

    def test_cold_compute_bound_case_is_held_to_the_memory_peak(self) -> None:
        assert self._check(gbps=6000.0, cold=True) == ["above-memory-peak"]

    def test_hot_compute_bound_case_may_come_from_l2(self) -> None:
        assert self._check(gbps=6000.0, cold=False) == []

    @pytest.mark.parametrize("cold", [True, False])
    def test_gemv_class_is_always_held_to_the_memory_peak(self, cold: bool) -> None:
        assert self._check(gbps=6000.0, gemv_class=True, cold=cold) == ["above-memory-peak"]

    def test_both_rules_fire_together_compute_first(self) -> None:
        assert self._check(tflops=100.0, gbps=6000.0) == ["above-compute-peak", "above-memory-peak"]

    def test_unknown_peaks_are_skipped(self) -> None:
        assert self._check(tflops=1e6, gbps=1e9, gemv_class=True, peak_tflops=None, peak_gbps=None) == []

    def test_unknown_compute_peak_still_checks_memory(self) -> None:
        assert self._check(tflops=1e6, gbps=1e9, peak_tflops=None) == ["above-memory-peak"]


class TestTf32Inactive:
    def test_quiet_when_tf32_is_clearly_faster(self) -> None:
        assert anomaly.tf32_inactive(50.0, 350.0, "math mode") is None

    def test_quiet_exactly_at_the_minimum_speedup(self) -> None:
        assert anomaly.tf32_inactive(100.0, 100.0 * TF32_MIN_SPEEDUP, "math mode") is None

    @pytest.mark.parametrize("tf32", [100.0, 104.0, 149.0, 90.0])
    def test_fires_below_the_minimum_speedup(self, tf32: float) -> None:
        found = anomaly.tf32_inactive(100.0, tf32, "gemmEx COMPUTE_32F_FAST_TF32")
        assert found is not None
        assert found.rule == "tf32-inactive"

    def test_custom_threshold(self) -> None:
        assert anomaly.tf32_inactive(100.0, 130.0, "x", min_speedup=1.2) is None
        assert anomaly.tf32_inactive(100.0, 130.0, "x", min_speedup=1.4) is not None

    def test_message_names_the_path_and_both_fixes(self) -> None:
        found = anomaly.tf32_inactive(50.0, 52.0, "gemmEx COMPUTE_32F_FAST_TF32")
        assert found is not None
        text = found.message
        assert "gemmEx COMPUTE_32F_FAST_TF32" in text
        assert "1.04×" in text
        assert "CUBLAS_TF32_TENSOR_OP_MATH" in text
        assert "CUBLAS_COMPUTE_32F_FAST_TF32" in text
        assert "NVIDIA_TF32_OVERRIDE" in text


class TestPathsDisagree:
    @pytest.mark.parametrize(("sgemm", "gemmex"), [(50.0, 50.0), (50.0, 49.0), (49.0, 50.0)])
    def test_quiet_when_close(self, sgemm: float, gemmex: float) -> None:
        assert anomaly.paths_disagree(sgemm, gemmex) is None

    @pytest.mark.parametrize(("sgemm", "gemmex"), [(100.0, 95.0), (95.0, 100.0)])
    def test_quiet_exactly_at_the_gap(self, sgemm: float, gemmex: float) -> None:
        assert anomaly.paths_disagree(sgemm, gemmex) is None

    @pytest.mark.parametrize(("sgemm", "gemmex"), [(100.0, 94.0), (94.0, 100.0), (50.0, 20.0)])
    def test_fires_either_way_round(self, sgemm: float, gemmex: float) -> None:
        found = anomaly.paths_disagree(sgemm, gemmex)
        assert found is not None
        assert found.rule == "sgemm-gemmex-gap"

    def test_gap_is_relative_to_the_faster_path(self) -> None:
        """100 vs 95.2 is 4.8 % of the faster path (quiet) though 5.04 % of the slower one."""
        assert anomaly.paths_disagree(100.0, 95.2) is None
        assert anomaly.paths_disagree(95.2, 100.0) is None

    def test_custom_gap(self) -> None:
        assert anomaly.paths_disagree(100.0, 94.0, max_gap=0.10) is None

    def test_message_names_both_numbers_and_the_cause(self) -> None:
        found = anomaly.paths_disagree(100.0, 80.0)
        assert found is not None
        text = found.message
        assert "100.0" in text and "80.0" in text
        assert "20.0 %" in text
        assert "COMPUTE_32F" in text
        assert "different kernels" in text


class TestFlushCheck:
    """Both directions: a working set ≫ L2 must not care about the flush; one ≪ L2 must."""

    LARGE = FLUSH_LARGE_FACTOR * L2
    SMALL = FLUSH_SMALL_FACTOR * L2

    @pytest.mark.parametrize("cold", [100.0, 104.0, 96.0, 110.0, 90.0])
    def test_large_working_set_quiet_within_the_gap(self, cold: float) -> None:
        assert anomaly.flush_check(cold, 100.0, self.LARGE, L2) is None

    @pytest.mark.parametrize("cold", [111.0, 150.0, 89.0, 50.0])
    def test_large_working_set_fires_on_a_sharp_difference_either_way(self, cold: float) -> None:
        found = anomaly.flush_check(cold, 100.0, 4 * self.LARGE, L2)
        assert found is not None
        assert found.rule == "flush-ineffective"
        assert "leaking into the timed region" in found.message

    def test_large_message_names_the_gap_and_the_ratio(self) -> None:
        found = anomaly.flush_check(150.0, 100.0, 64 * L2, L2)
        assert found is not None
        assert "+50.0 %" in found.message
        assert "64×" in found.message

    @pytest.mark.parametrize("cold", [103.0, 110.0, 200.0])
    def test_small_working_set_quiet_when_cold_is_slower(self, cold: float) -> None:
        assert anomaly.flush_check(cold, 100.0, self.SMALL, L2) is None

    @pytest.mark.parametrize("cold", [100.0, 102.0, 90.0])
    def test_small_working_set_fires_when_cold_equals_hot(self, cold: float) -> None:
        found = anomaly.flush_check(cold, 100.0, self.SMALL / 16, L2)
        assert found is not None
        assert found.rule == "flush-not-happening"

    def test_small_message_names_the_causes(self) -> None:
        found = anomaly.flush_check(100.0, 100.0, L2 / 16, L2)
        assert found is not None
        text = found.message
        assert "+0.0 %" in text
        assert "0.06×" in text
        assert "buffer too small" in text
        assert "another stream" in text

    @pytest.mark.parametrize("cold", [50.0, 100.0, 200.0])
    def test_a_working_set_near_l2_size_is_never_judged(self, cold: float) -> None:
        """Between the two factors whether the cache helps depends on the kernel: no verdict either way."""
        for working_set in (FLUSH_SMALL_FACTOR * L2 * 1.01, L2, FLUSH_LARGE_FACTOR * L2 * 0.99):
            assert anomaly.flush_check(cold, 100.0, working_set, L2) is None

    def test_boundaries_of_the_working_set_belong_to_the_rules(self) -> None:
        assert anomaly.flush_check(150.0, 100.0, FLUSH_LARGE_FACTOR * L2, L2) is not None
        assert anomaly.flush_check(100.0, 100.0, FLUSH_SMALL_FACTOR * L2, L2) is not None


class TestWarmupEffect:
    STEADY: ClassVar[list[float]] = [1.0] * 20

    def test_quiet_on_steady_samples(self) -> None:
        assert anomaly.warmup_effect(self.STEADY) is None

    def test_quiet_when_the_first_samples_are_faster(self) -> None:
        assert anomaly.warmup_effect([0.5, 0.5, 0.5, *self.STEADY]) is None

    def test_quiet_at_the_threshold(self) -> None:
        assert anomaly.warmup_effect([1.2, 1.2, 1.2, *self.STEADY]) is None

    def test_fires_when_the_first_samples_are_slow(self) -> None:
        found = anomaly.warmup_effect([3.0, 2.0, 1.5, *self.STEADY])
        assert found is not None
        assert found.rule == "warm-up-effect"
        assert "first 3 samples are 100 % slower" in found.message
        assert "--warmup-time" in found.message
        assert "clock ramp" in found.message

    def test_one_slow_first_sample_is_not_a_warm_up_effect(self) -> None:
        """The median of the leading samples ignores a single outlier (one preempted sample)."""
        assert anomaly.warmup_effect([10.0, 1.0, 1.0, *self.STEADY]) is None

    def test_too_few_samples_give_no_verdict(self) -> None:
        assert anomaly.warmup_effect([5.0, 5.0, 5.0, 1.0, 1.0, 1.0]) is None
        assert anomaly.warmup_effect([5.0, 5.0, 5.0, 1.0, 1.0, 1.0, 1.0]) is not None

    def test_leading_and_threshold_are_parameters(self) -> None:
        samples = [2.0, *self.STEADY]
        assert anomaly.warmup_effect(samples, leading=1) is not None
        assert anomaly.warmup_effect(samples, leading=1, max_excess=1.5) is None
