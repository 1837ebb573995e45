"""Issue 34's second and third rules end to end: a comparison that judged nothing, a history that keeps nothing and
a write its own reader would refuse each end in a one-line error, never a pass; and the commands' output survives
a stream that cannot encode it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzing import FLEET_RUNS, REPO
from gpuperf.cli import main
from gpuperf.store.baseline import BaselineError, dump_baseline, load_baseline, update_baseline
from gpuperf.store.results import ResultsError, load_run, write_results
from gpuperf.verdict.accounting import GpuAccount
from gpuperf.verdict.accounting import run_failures
from test_history_cli import project  # noqa: F401  (the fixture: a git project with the fake-timed plugin)
from test_plugin import GEMM_ID, GEMV_ID, recorded, run

pytest_plugins = ["pytester"]
RUN = FLEET_RUNS[0]


@pytest.mark.parametrize("value", ["sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:///%3Amemory%3A",
                                   "sqlite:///file:h?mode=memory&uri=true"])
def test_an_in_memory_history_is_refused_by_option_and_environment(value: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["history", "ingest", str(RUN), "--history", value]) == 1
    assert "in-memory SQLite database, which keeps nothing" in capsys.readouterr().err
    monkeypatch.setenv("GPUPERF_HISTORY", value)
    assert main(["history", "ingest", str(RUN)]) == 1
    assert "in-memory SQLite database" in capsys.readouterr().err


@pytest.mark.long
def test_the_pytest_option_refuses_an_in_memory_history(project: pytest.Pytester) -> None:  # noqa: F811
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--missing-baseline=pass", "--history",
                                          "sqlite:///")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--history*in-memory SQLite database*"])
    assert not (project.path / "results").exists()


def test_a_stream_that_cannot_encode_the_output_gets_it_escaped() -> None:
    done = subprocess.run([sys.executable, "-m", "gpuperf", "compare", str(RUN), str(FLEET_RUNS[1])], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "PYTHONIOENCODING": "ascii",
                                                               "PYTHONPATH": str(REPO)}, check=False)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr
    assert "\\u0394 %" in done.stdout  # the Δ column's title, escaped


def test_a_gate_run_whose_baseline_holds_none_of_its_cases_fails(project: pytest.Pytester) -> None:  # noqa: F811
    recorded(project)
    assert main(["baseline", "drop", str(project.path / "baselines" / "fake-gpu.yaml"), GEMV_ID, GEMM_ID]) == 0
    result = run(project, "--gate", "--missing-baseline=pass")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*GPU 0 (fake-gpu): 0 of 0 baselined cases measured*",
                                 "*GATE FAILED: nothing judged: no selected case has a baseline entry*"])


def test_a_gate_that_judged_nothing_fails() -> None:
    nothing = GpuAccount(gpu_index=0, gpu_slug="nvidia-h200", baselined=0, measured=0)
    assert any("nothing judged" in reason for reason in run_failures([nothing], [], True, False))
    assert run_failures([GpuAccount(0, "nvidia-h200", baselined=2, measured=2)], [], True, False) == []


def test_results_its_reader_would_refuse_are_not_written_and_the_old_file_stays(tmp_path: Path) -> None:
    run, records = load_run(RUN)
    write_results(tmp_path, run, records)
    good = (tmp_path / "results.json").read_text()
    from dataclasses import replace

    mixed = [replace(records[0], gpu="nvidia-a100"), *records[1:]]
    with pytest.raises(ResultsError, match="not written, as its reader would refuse it.*field 'gpu'"):
        write_results(tmp_path, run, mixed)
    assert (tmp_path / "results.json").read_text() == good


def test_a_baseline_header_field_not_of_its_form_is_refused(tmp_path: Path) -> None:
    baseline = load_baseline(REPO / "baselines" / "nvidia-h200.yaml")
    assert baseline is not None
    path = tmp_path / "nvidia-h200.yaml"
    path.write_text(dump_baseline({**baseline.header, "recorded": "last tuesday"}, baseline.entries))
    with pytest.raises(BaselineError, match="header: field 'recorded' must be an ISO 8601 time"):
        load_baseline(path)
    with pytest.raises(BaselineError, match="is named for 'other'"):
        update_baseline(tmp_path / "other.yaml", baseline.header, {})


def test_a_figure_above_the_peak_is_not_a_clean_figure_for_from_runs(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(RUN.read_text())
    data["records"] = data["records"][:2]
    data["records"][0].update(value=1.7e308, tflops=1.7e308, status="PASS")
    (tmp_path / "r.json").write_text(json.dumps(data))
    assert main(["baseline", "from-runs", str(tmp_path / "nvidia-h200.yaml"), str(tmp_path / "r.json")]) == 0
    baseline = load_baseline(tmp_path / "nvidia-h200.yaml")
    assert baseline is not None and data["records"][0]["case_id"] not in baseline.entries
    assert data["records"][1]["case_id"] in baseline.entries
