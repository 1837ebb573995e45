"""The trend page's input model: consistency, the x axis, version/kernel/method changes, what needs attention."""

from __future__ import annotations

import pytest

from gpuperf.trend.data import (DRAWN_DELTA, DRAWN_FIGURE, ChangePoint, CaseSeries, SeriesPoint, TrendData,
                                TrendDataError, TrendRun, attention, series_changes, version_changes)
from gpuperf.vocabulary import Status

from trend_synthetic import NEW_KERNEL, OLD_KERNEL, STEP_CASE, synthetic_trend

VERSIONS = {"driver": "580.159.04", "cuda_runtime": "13.2", "cublas": "13.1.0", "cupy": "14.2.0"}


def _run(i: int, model: str = "nvidia-h200", **versions: str) -> TrendRun:
    return TrendRun(f"r{i}", f"2026-01-{i + 1:02d}T00:00:00+00:00", model, "host-a", versions={**VERSIONS, **versions})


def _series(points: list[SeriesPoint], change_points: tuple[ChangePoint, ...] = (), model: str = "nvidia-h200",
            case: str = "perf_tests/test_gemm.py::test_gemm_perf[fp32-1x1x1-cold]") -> CaseSeries:
    return CaseSeries(case, model, "gemm", "fp32", "TFLOPS", "TFLOPS", tuple(points), change_points=change_points)


def test_a_point_of_an_unknown_run_is_refused_with_the_series_named() -> None:
    with pytest.raises(TrendDataError, match="nvidia-h200/.*run 'r9'.*not among the runs"):
        TrendData((_run(0),), (_series([SeriesPoint("r9", 1.0, Status.PASS)]),))


def test_two_runs_with_one_id_are_refused() -> None:
    with pytest.raises(TrendDataError, match="share a run id"):
        TrendData((_run(0), _run(0)), ())


def test_runs_are_numbered_per_gpu_model_and_the_range_spans_every_run() -> None:
    runs = (_run(0), _run(1, model="nvidia-a100"), _run(2), _run(3, model="nvidia-a100"))
    data = TrendData(runs, ())
    assert [data.run_number(r.run_id) for r in runs] == [1, 1, 2, 2]
    assert data.gpu_models == ("nvidia-a100", "nvidia-h200")
    assert data.time_range == ("2026-01-01T00:00:00+00:00", "2026-01-04T00:00:00+00:00")


def test_version_changes_name_old_and_new_and_ignore_unknown_versions() -> None:
    assert version_changes(_run(0), _run(1, cublas="13.2.1", driver="590.1")) == \
        ["driver 580.159.04 → 590.1", "cuBLAS 13.1.0 → 13.2.1"]
    assert version_changes(_run(0), _run(1, cupy="")) == []


def test_series_changes_find_version_kernel_and_method_changes_at_the_run_where_they_happen() -> None:
    runs = (_run(0), _run(1), _run(2, cublas="13.2.1"), _run(3, cublas="13.2.1"))
    points = [SeriesPoint("r0", 10.0, Status.PASS, kernels=("a",), method="cupti-cold"),
              SeriesPoint("r1", 10.0, Status.PASS, kernels=("b",), method="cupti-cold"),
              SeriesPoint("r2", 10.0, Status.PASS, kernels=("b",), method="cupti-cold"),
              SeriesPoint("r3", 10.0, Status.PASS, kernels=(), method="cold-flush")]
    data = TrendData(runs, (_series(points),))
    found = [(a.run_id, a.kind, a.text) for a in series_changes(data, data.series[0])]
    # r3 has no kernel records: unknown kernels are not a change
    assert found == [("r1", "kernel", "kernel a → b"), ("r2", "version", "cuBLAS 13.1.0 → 13.2.1"),
                     ("r3", "method", "method cupti-cold → cold-flush")]


def test_attention_lists_a_recent_slowdown_and_a_recent_failure_but_not_an_old_shift_or_a_speedup() -> None:
    runs = tuple(_run(i) for i in range(12))
    flat = [SeriesPoint(f"r{i}", 10.0, Status.PASS) for i in range(12)]
    old_shift = ChangePoint("r2", 10.0, 9.0)
    speedup = ChangePoint("r10", 9.0, 11.0)
    recent = ChangePoint("r9", 10.0, 9.4, previous_run_id="r8")
    failing = flat[:11] + [SeriesPoint("r11", 9.0, Status.REGRESSED, note="9.0 % below")]
    data = TrendData(runs, (_series(flat, (old_shift, speedup), case="quiet"),
                            _series(flat, (old_shift, recent), case="slowed"),
                            _series(failing, case="failing")))
    items = attention(data)["nvidia-h200"]
    assert [(i.series.case_id, i.kind, i.run_id) for i in items] == [
        ("failing", Status.REGRESSED, "r11"), ("slowed", "change point", "r9")]
    assert items[1].text == "-6.0 % since run 10 (commit unknown)"
    assert items[0].text == "REGRESSED in run 12: 9.0 % below"


def test_the_synthetic_history_plants_its_step_with_the_kernel_change_at_the_same_run() -> None:
    data = synthetic_trend(cases=6, runs=20)
    step = next(s for s in data.series if s.case_id == STEP_CASE)
    (cp,) = step.change_points
    assert cp.slowdown and cp.relative == pytest.approx(-0.06)
    kernels = [a for a in series_changes(data, step) if a.kind == "kernel"]
    assert [(a.run_id, a.text) for a in kernels] == [(cp.run_id, f"kernel {OLD_KERNEL} → {NEW_KERNEL}")]


def test_a_series_judged_on_both_bases_is_drawn_as_its_gates_delta_with_no_jump_at_the_change_of_basis() -> None:
    """A power-capped GEMM: judged on time at 667 TFLOPS, then at max clock at 985 on a capped host; both runs
    within 0.5 % of their entries. Drawn as the gate's Δ, the two read alike: no 48 % jump."""
    runs = tuple(_run(i) for i in range(4))
    points = [SeriesPoint("r0", 667.0, Status.PASS, delta=0.002), SeriesPoint("r1", 668.0, Status.PASS, delta=0.004),
              SeriesPoint("r2", 985.0, Status.PASS, basis="cycles", measured=640.0, delta=-0.003),
              SeriesPoint("r3", 984.0, Status.PASS, basis="cycles", measured=641.0, delta=-0.004)]
    mixed, timed = _series(points), _series(points[:2])
    TrendData(runs, (mixed, timed))
    assert mixed.bases == ("time", "cycles") and mixed.drawn == DRAWN_DELTA
    assert [round(y, 3) for _, y in mixed.drawn_points] == [0.2, 0.4, -0.3, -0.4]
    assert "Δ %" in mixed.drawn_basis
    assert timed.drawn == DRAWN_FIGURE and [y for _, y in timed.drawn_points] == [667.0, 668.0]
    assert timed.drawn_basis == "TFLOPS"


def test_an_experiments_failures_are_not_in_needs_attention_and_the_fleets_are() -> None:
    runs = tuple(_run(i) for i in range(8)) + (
        TrendRun("r8", "2026-01-09T00:00:00+00:00", "nvidia-h200", "host-b",
                 experiment="judged against the baseline in /tmp/shifted (--baseline-dir), not the fleet's"),)
    points = [SeriesPoint(f"r{i}", 10.0, Status.PASS) for i in range(8)]
    shifted = points + [SeriesPoint("r8", 10.0, Status.REGRESSED, note="5.0 % below")]
    failing = points[:7] + [SeriesPoint("r7", 9.0, Status.REGRESSED), SeriesPoint("r8", 9.0, Status.REGRESSED)]
    data = TrendData(runs, (_series(shifted, case="shifted"), _series(failing, case="failing")))
    items = attention(data)["nvidia-h200"]
    assert [(i.series.case_id, i.run_id) for i in items] == [("failing", "r7")]
    assert data.experiments == (runs[-1],)
    assert data.last_judged(data.series[0]) == [points[-1]]  # the card's last status: the fleet's last run
