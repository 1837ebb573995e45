"""``gpuperf.verdict.check``: from a (synthetic) measurement to a ``Record`` with derived figures and a verdict."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes import PEAKS

from gpuperf.store.baseline import Entry
from gpuperf.verdict.check import (
    CaseIdentity,
    context_for,
    case_record,
    entry_from_record,
    ratio_record,
    record_command,
)
from gpuperf.verdict.gate import GateConfig
from gpuperf.measure.measurement import Measurement, Method
from gpuperf.measure.metrics import Work, gemm_work, gemv_work
from gpuperf.vocabulary import Metric, Status

NODE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"
CASE = CaseIdentity(case_id=NODE, nodeid=NODE, family="gemm",
                    params={"dtype": "fp32", "shape": "4096x4096x4096", "flush_mode": "cold"}, gpu="nvidia-h200",
                    gpu_index=0)
GATE = GateConfig(tolerance=0.03, noise_k=2.0)
GATING = context_for(CASE, update=False)
SGEMM = gemm_work(4096, 4096, 4096, "fp32")
SGEMV = gemv_work(16384, 16384, "fp32")


def measured(work: Work, value: float, flush: str = "cold", n: int = 20, **kw: Any) -> Measurement:
    """A measurement whose median gives exactly ``value`` of the work's primary metric."""
    seconds = work.flops / (value * 1e12) if work.metric == Metric.TFLOPS else work.bytes / (value * 1e9)
    samples = tuple(seconds * (1.0 + 1e-4 * ((i % 5) - 2)) for i in range(n))  # 0.02 % spread, median exact
    return Measurement(samples_s=samples, work=work, flush=flush,
                       method=Method.COLD_FLUSH if flush == "cold" else Method.HOT, **kw)


def base_entry(value: float, metric: str = Metric.TFLOPS, **kw: Any) -> Entry:
    return Entry(metric=metric, value=value, unit=metric, **kw)


# -- derived figures -------------------------------------------------------------------------------------


def test_case_record_derives_tflops_gbps_and_percent_of_peak() -> None:
    m = measured(SGEMM, 50.0, sm_clock_mhz=(1980, 1965), clock_events=("sw_power_cap",), label="sgemm")
    r = case_record(CASE, m, PEAKS, base_entry(50.0), GATE, GATING)
    assert r.status == Status.PASS
    assert r.metric == r.unit == Metric.TFLOPS
    assert r.value == pytest.approx(50.0)
    assert r.tflops == pytest.approx(50.0)
    assert r.gbps == pytest.approx(SGEMM.bytes / m.median_s / 1e9)
    assert r.peak == pytest.approx(66.908, abs=1e-3)
    assert r.pct_of_peak == pytest.approx(100 * 50.0 / 66.90816)
    assert r.flops == SGEMM.flops and r.bytes == SGEMM.bytes
    assert r.arithmetic_intensity == pytest.approx(SGEMM.flops / SGEMM.bytes)
    assert r.median_s == pytest.approx(m.median_s)
    assert r.min_s == min(m.samples_s)
    assert r.samples == 20
    assert r.rel_iqr == pytest.approx(m.summary.rel_iqr)
    assert (r.flush, r.method) == ("cold", Method.COLD_FLUSH)
    assert r.sm_clock_mhz == (1980, 1965)
    assert r.clock_events == ("sw_power_cap",)
    assert (r.case_id, r.nodeid, r.family, r.gpu, r.gpu_index) == (NODE, NODE, "gemm", "nvidia-h200", 0)
    assert r.params["shape"] == "4096x4096x4096"
    assert (r.kernel, r.precision) == ("sgemm", "fp32")
    assert r.shape == {"batch": 1, "m": 4096, "n": 4096, "k": 4096}
    assert r.baseline == 50.0
    assert r.delta_pct == pytest.approx(0.0, abs=1e-9)
    assert r.tolerance == 0.03


def test_memory_bound_case_is_gated_on_gbps_against_the_memory_peak() -> None:
    r = case_record(CASE, measured(SGEMV, 4000.0), PEAKS, base_entry(4000.0, Metric.GBPS), GATE, GATING)
    assert r.metric == Metric.GBPS
    assert r.value == pytest.approx(4000.0)
    assert r.peak == pytest.approx(4814.304)
    assert r.pct_of_peak == pytest.approx(100 * 4000.0 / 4814.304)
    assert r.status == Status.PASS


def test_no_peaks_means_no_percent() -> None:
    r = case_record(CASE, measured(SGEMM, 50.0), None, base_entry(50.0), GATE, GATING)
    assert r.peak is None and r.pct_of_peak is None
    assert r.status == Status.PASS


# -- anomalies -------------------------------------------------------------------------------------------


def test_above_compute_peak_is_an_anomaly_naming_the_causes() -> None:
    r = case_record(CASE, measured(SGEMM, 80.0), PEAKS, base_entry(80.0), GATE, GATING)
    assert r.status == Status.ANOMALY
    assert r.failed
    assert "above-compute-peak" in r.note
    for cause in ("cache", "FLOP count", "timing error"):
        assert cause in r.note


def test_above_memory_peak_for_gemv_is_an_anomaly_even_hot() -> None:
    for flush in ("cold", "hot"):
        r = case_record(CASE, measured(SGEMV, 6000.0, flush=flush), PEAKS, base_entry(6000.0, Metric.GBPS), GATE, GATING)
        assert r.status == Status.ANOMALY, flush
        assert "above-memory-peak" in r.note
        assert "cache-resident" in r.note
        assert "byte count" in r.note


def test_cold_compute_bound_case_above_memory_peak_is_an_anomaly() -> None:
    small = gemm_work(256, 256, 256, "fp16")  # 0.4 MB, 85 FLOP/B: 500 TFLOPS (< 1070 peak) means 5.9 TB/s
    r = case_record(CASE, measured(small, 500.0), PEAKS, base_entry(500.0), GATE, GATING)
    assert r.gbps is not None and r.gbps > PEAKS.memory_gbps
    assert r.status == Status.ANOMALY
    assert "above-memory-peak" in r.note


def test_hot_compute_bound_case_is_not_held_to_the_memory_peak() -> None:
    small = gemm_work(256, 256, 256, "fp16")
    r = case_record(CASE, measured(small, 500.0, flush="hot"), PEAKS, base_entry(500.0), GATE, GATING)
    assert r.gbps is not None and r.gbps > PEAKS.memory_gbps  # legitimately from L2
    assert r.status == Status.PASS
    assert "above-memory-peak" not in r.note


def test_anomaly_wins_over_a_regression_and_over_update_mode() -> None:
    m = measured(SGEMM, 80.0)
    assert case_record(CASE, m, PEAKS, base_entry(200.0), GATE, GATING).status == Status.ANOMALY
    updating = case_record(CASE, m, PEAKS, None, GATE, context_for(CASE, update=True))
    assert updating.status == Status.ANOMALY  # an impossible number is never recorded as a baseline


def test_warm_up_effect_is_noted_without_failing() -> None:
    seconds = SGEMM.flops / 50e12
    samples = (seconds * 1.5,) * 3 + (seconds,) * 17
    m = Measurement(samples_s=samples, work=SGEMM, flush="cold", method=Method.COLD_FLUSH)
    r = case_record(CASE, m, PEAKS, base_entry(50.0), GATE, GATING)
    assert r.status == Status.PASS
    assert "warm-up-effect" in r.note


# -- baseline verdicts -----------------------------------------------------------------------------------


def test_regression_beyond_tolerance() -> None:
    r = case_record(CASE, measured(SGEMM, 45.0), PEAKS, base_entry(50.0), GATE, GATING)
    assert r.status == Status.REGRESSED
    assert r.failed
    assert r.delta_pct == pytest.approx(-10.0)
    assert "10.0 % below baseline (tolerance 3.0 %)" in r.note


def test_within_tolerance_passes() -> None:
    r = case_record(CASE, measured(SGEMM, 48.8), PEAKS, base_entry(50.0), GATE, GATING)
    assert r.status == Status.PASS
    assert r.delta_pct == pytest.approx(-2.4)


def test_recorded_noise_widens_the_band_up_to_the_cap() -> None:
    r = case_record(CASE, measured(SGEMM, 48.0), PEAKS, base_entry(50.0, spread=0.025), GATE, GATING)
    assert r.status == Status.PASS
    assert r.tolerance == pytest.approx(0.05)
    capped = case_record(CASE, measured(SGEMM, 46.0), PEAKS, base_entry(50.0, spread=0.05), GATE, GATING)
    assert capped.tolerance == pytest.approx(0.06)  # 2 × 5 % asked, twice the 3 % tolerance allowed
    assert capped.status == Status.REGRESSED


def noisy(work: Work, value: float, spread: float, n: int = 40) -> Measurement:
    """Samples whose median gives ``value`` and whose relative IQR is about ``spread``."""
    seconds = work.flops / (value * 1e12)
    steps = [(i / (n - 1)) - 0.5 for i in range(n)]  # uniform in [-0.5, 0.5]: IQR = half the range
    return Measurement(samples_s=tuple(seconds * (1 + 2 * spread * x) for x in steps), work=work, flush="cold",
                       method=Method.COLD_FLUSH)


def test_the_current_measurement_never_widens_the_band() -> None:
    """A 10 % slowdown that also adds noise once widened its own gate; now it is judged by the entry's band,
    and a measurement too noisy for that band is UNRELIABLE (noisy), never PASS."""
    r = case_record(CASE, noisy(SGEMM, 45.0, 0.06), PEAKS, base_entry(50.0, spread=0.005), GATE, GATING)
    assert r.tolerance == pytest.approx(0.03)
    assert r.status == Status.UNRELIABLE and r.note.startswith("noisy")
    quiet = case_record(CASE, noisy(SGEMM, 45.0, 0.01), PEAKS, base_entry(50.0, spread=0.005), GATE, GATING)
    assert quiet.status == Status.REGRESSED


@pytest.mark.parametrize("flops", [float("nan"), float("inf"), 0.0, -1.0])
def test_a_figure_that_is_not_positive_and_finite_is_an_error_never_a_verdict(flops: float) -> None:
    """Sample times are checked where they are taken; a broken work count still reaches the gate."""
    work = Work(flops=flops, bytes=SGEMM.bytes, precision="fp32", metric=Metric.TFLOPS)
    m = Measurement(samples_s=(1e-3,) * 5, work=work, flush="cold", method=Method.COLD_FLUSH)
    r = case_record(CASE, m, PEAKS, base_entry(50.0), GATE, GATING)
    assert r.status == Status.ERROR
    assert r.failed
    assert "not a positive finite number" in r.note


def test_another_method_than_the_entry_s_is_not_comparable() -> None:
    entry = base_entry(50.0, method=Method.COLD_ROTATE)
    r = case_record(CASE, measured(SGEMM, 40.0), PEAKS, entry, GATE, GATING)
    assert r.status == Status.NOT_COMPARABLE
    assert not r.failed
    assert "recorded by method cold-rotate, measured by cold-flush" in r.note


def test_update_refuses_an_entry_whose_spread_needs_more_than_the_cap() -> None:
    updating = context_for(CASE, update=True)
    r = case_record(CASE, noisy(SGEMM, 50.0, 0.05), PEAKS, None, GATE, updating)
    assert r.status == Status.NOT_RECORDED
    assert "above the cap 6.0 %" in r.note and "fix its method" in r.note
    assert case_record(CASE, noisy(SGEMM, 50.0, 0.02), PEAKS, None, GATE, updating).status == Status.UPDATED


def test_a_regression_note_says_the_versions_changed() -> None:
    context = context_for(CASE, update=False, version_changes=("driver 570.86.15 → 580.159.04",))
    r = case_record(CASE, measured(SGEMM, 45.0), PEAKS, base_entry(50.0), GATE, context)
    assert r.status == Status.REGRESSED
    assert "versions changed since the baseline: driver 570.86.15 → 580.159.04" in r.note
    assert "versions changed" not in case_record(CASE, measured(SGEMM, 45.0), PEAKS, base_entry(50.0), GATE,
                                                 GATING).note


def test_improvement_is_noted_with_the_update_command() -> None:
    r = case_record(CASE, measured(SGEMM, 60.0), PEAKS, base_entry(50.0), GATE, GATING)
    assert r.status == Status.IMPROVED
    assert not r.failed
    assert "improved 20.0 %" in r.note
    assert "update the baseline" in r.note
    assert "--update-baselines" in r.note


def test_no_baseline_note_has_the_command_that_records_it() -> None:
    r = case_record(CASE, measured(SGEMM, 50.0), PEAKS, None, GATE, GATING)
    assert r.status == Status.NO_BASELINE
    assert not r.failed
    assert "nvidia-h200" in r.note
    assert ("pytest perf_tests/test_gemm.py --update-baselines "
            "-k 'test_gemm_perf[fp32-4096x4096x4096-cold]'") in r.note
    assert r.baseline is None


def test_metric_mismatch_asks_to_re_record() -> None:
    r = case_record(CASE, measured(SGEMM, 50.0), PEAKS, base_entry(4000.0, Metric.GBPS), GATE, GATING)
    assert r.status == Status.NOT_COMPARABLE
    assert "baseline holds GB/s" in r.note
    assert "measures TFLOPS" in r.note
    assert "--update-baselines" in r.note
    assert r.baseline is None  # not compared across metrics


def test_update_mode_records_with_old_value_and_delta() -> None:
    updating = context_for(CASE, update=True)
    r = case_record(CASE, measured(SGEMM, 40.0), PEAKS, base_entry(50.0), GATE, updating)
    assert r.status == Status.UPDATED  # a slowdown is not gated while re-recording
    assert r.baseline == 50.0
    assert r.delta_pct == pytest.approx(-20.0)
    fresh = case_record(CASE, measured(SGEMM, 40.0), PEAKS, None, GATE, updating)
    assert fresh.status == Status.UPDATED
    assert fresh.baseline is None and fresh.delta_pct is None


def test_unreliable_measurement_is_neither_passed_nor_failed() -> None:
    m = measured(SGEMM, 40.0, unreliable_reason="hw_thermal_slowdown during sampling")
    r = case_record(CASE, m, PEAKS, base_entry(50.0), GATE, GATING)
    assert r.status == Status.UNRELIABLE
    assert not r.failed
    assert r.reliable is False
    assert "unreliable: hw_thermal_slowdown" in r.note
    # and it is not recorded by --update-baselines either
    assert case_record(CASE, m, PEAKS, None, GATE, context_for(CASE, update=True)).status == Status.UNRELIABLE


def test_record_command() -> None:
    assert record_command(CASE) == ("pytest perf_tests/test_gemm.py --update-baselines "
                                    "-k 'test_gemm_perf[fp32-4096x4096x4096-cold]'")


def test_entry_from_record_keeps_what_the_baseline_stores() -> None:
    r = case_record(CASE, measured(SGEMM, 50.0), PEAKS, None, GATE, context_for(CASE, update=True))
    e = entry_from_record(r)
    assert (e.metric, e.unit, e.flush, e.method, e.samples) == (Metric.TFLOPS, Metric.TFLOPS, "cold", Method.COLD_FLUSH, 20)
    assert e.value == pytest.approx(50.0)
    assert e.spread == pytest.approx(r.rel_iqr)
    assert e.tolerance is None


# -- ratios ----------------------------------------------------------------------------------------------


def test_ratio_record_is_its_own_entry() -> None:
    custom, cublas = measured(SGEMM, 30.0), measured(SGEMM, 50.0)
    r = ratio_record(CASE, custom, cublas, "vs_cublas", base_entry(0.6, Metric.RATIO), GATE, GATING)
    assert r.case_id == f"{NODE}#vs_cublas"
    assert r.nodeid == NODE
    assert r.metric == Metric.RATIO
    assert r.unit == "×"
    assert r.value == pytest.approx(0.6)
    assert r.status == Status.PASS
    assert "30 / 50 TFLOPS" in r.note
    assert r.extra["ratio_name"] == "vs_cublas"
    assert r.rel_iqr == pytest.approx((custom.summary.rel_iqr ** 2 + cublas.summary.rel_iqr ** 2) ** 0.5)


def test_ratio_regression_and_missing_baseline() -> None:
    custom, cublas = measured(SGEMM, 25.0), measured(SGEMM, 50.0)
    regressed = ratio_record(CASE, custom, cublas, "vs_cublas", base_entry(0.6, Metric.RATIO), GATE, GATING)
    assert regressed.status == Status.REGRESSED
    assert regressed.delta_pct == pytest.approx(100 * (0.5 - 0.6) / 0.6)
    missing = ratio_record(CASE, custom, cublas, "vs_cublas", None, GATE, GATING)
    assert missing.status == Status.NO_BASELINE
    assert "--update-baselines -k 'test_gemm_perf[fp32-4096x4096x4096-cold]'" in missing.note


def test_ratio_of_an_unreliable_measurement_is_unreliable() -> None:
    custom = measured(SGEMM, 30.0, unreliable_reason="other processes on the GPU: 4242")
    r = ratio_record(CASE, custom, measured(SGEMM, 50.0), "vs_cublas", base_entry(0.6, Metric.RATIO), GATE, GATING)
    assert r.status == Status.UNRELIABLE
    assert "4242" in r.note


def test_ratio_of_different_metrics_raises() -> None:
    with pytest.raises(ValueError, match="ratio of TFLOPS over GB/s"):
        ratio_record(CASE, measured(SGEMM, 30.0), measured(SGEMV, 4000.0), "x", None, GATE, GATING)


@pytest.mark.parametrize("parameters", ["x'; touch pwned; echo '", "a b", "x) or (y", "$(touch pwned)", "a::b]-[c"])
def test_record_command_is_shell_quoted_and_selects_only_its_case(tmp_path: Path, parameters: str) -> None:
    """Whatever a test id holds (ids are text a test's author controls), the suggested command is one shell word per
    part, and what it selects is the case itself: ``-k`` with the test's own name, or else its node id."""
    nodeid = f"perf_tests/test_own.py::test_attention_perf[{parameters}]"
    command = record_command(replace(CASE, nodeid=nodeid, case_id=nodeid))
    words = shlex.split(command)
    assert words[:1] == ["pytest"] and "--update-baselines" in words
    selected = words[words.index("-k") + 1] if "-k" in words else words[1]
    assert selected in (f"test_attention_perf[{parameters}]", nodeid), command
    done = subprocess.run(["sh", "-c", f"pytest() {{ :; }}; {command}"], cwd=tmp_path, capture_output=True, check=True)
    assert done.stdout == b"" and not list(tmp_path.iterdir()), command  # the shell ran nothing but the command
