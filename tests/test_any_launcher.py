"""A call whose kernels cannot be measured, end to end through pytester: one ERROR line, never a figure.

The synthetic timer of ``test_plugin`` raises ``UnmeasurableCall`` for a case whose timing is
``{"unmeasurable": why}``, as the real timer does when CUPTI's records show the call's kernels on another stream
than the measuring stream, or no kernel at all (``tests/test_timing.py`` and ``tests/test_kernel_records.py`` show
those decisions on synthetic records).
"""

from __future__ import annotations

import json

import pytest
import yaml

from test_plugin import GEMM_S, GEMV_ID, GEMV_S, TESTS, fake_project, run, set_timings

pytest_plugins = ["pytester"]

STRAY = ("fn launched 1 kernel a call on stream 7 (nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNN), not on the "
         "measuring stream 13 nor joined back to it, so the interval measured there holds none of that work and no "
         "figure is taken; launch on the current stream")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return fake_project(pytester, monkeypatch, {"test_perf": TESTS}, gemv={"unmeasurable": STRAY}, gemm=GEMM_S)


def test_a_call_off_the_measuring_stream_is_an_error_line_with_its_cause_and_no_figure(
        project: pytest.Pytester) -> None:
    result = run(project, "--results-dir", "results")
    result.assert_outcomes(skipped=1, failed=1, deselected=1)  # the other case has no baseline yet
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert f"\nERROR {GEMV_ID}: no figure; {STRAY}\n" in result.stdout.str()  # one line, the cause and the fix
    assert "Traceback" not in result.stdout.str() and "ANOMALY" not in result.stdout.str()
    results = json.loads(next((project.path / "results").glob("*/results.json")).read_text())
    row = next(r for r in results["records"] if r["case_id"] == GEMV_ID)
    assert row["status"] == "ERROR" and row["value"] is None and row["note"].startswith("fn launched 1 kernel")
    assert row["metric"] == "GB/s" and row["flops"] == 2 * 16384 * 16384


def test_update_baselines_records_nothing_for_it(project: pytest.Pytester) -> None:
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    entries = yaml.safe_load((project.path / "baselines" / "fake-gpu.yaml").read_text())["entries"]
    assert GEMV_ID not in entries and len(entries) == 1


def test_the_gate_counts_it_as_not_measured(project: pytest.Pytester) -> None:
    set_timings(project, gemv=GEMV_S, gemm=GEMM_S)
    run(project, "--update-baselines").assert_outcomes(passed=2, deselected=1)
    set_timings(project, gemv={"unmeasurable": STRAY}, gemm=GEMM_S)
    result = run(project, "--gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "1 of 2 baselined cases measured" in out
    assert any(GEMV_ID in line and "ERROR" in line and "fn launched" in line for line in out.splitlines())
