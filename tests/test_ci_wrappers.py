"""The shell wrappers in ci/ and ``ab`` refuse a writing option among the pytest arguments before anything runs, and
``ci/gate.sh`` never passes on a pytest that exited 0 without gpuperf writing results (issue 54)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf.cli import main
from gpuperf.wiring.selection_guard import WRITING_OPTIONS, refusal, writing_options

REPO = Path(__file__).resolve().parents[1]


def test_each_writing_option_is_found_in_either_spelling_and_allowed_ones_are_kept() -> None:
    for name in WRITING_OPTIONS:
        assert writing_options(["perf_tests", "-k", "gemm", name]) == [name]
        assert writing_options(["perf_tests", f"{name}=x"]) == [name]
    assert writing_options(["perf_tests", "--history", "h.sqlite"], allowed=["--history"]) == []
    assert writing_options(["perf_tests", "-k", "update-baselines", "--", "--update-baselines"]) == []
    assert refusal("ab", ["perf_tests"]) == ""


def test_ab_refuses_update_baselines_in_its_selection_before_anything_runs(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ab", "--base", "HEAD", "--repo", str(tmp_path / "no-repo"), "--out", str(tmp_path / "out"), "--",
                 "perf_tests", "-k", "gemm", "--update-baselines"])
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1, err
    assert err.startswith("gpuperf: error: ab: --update-baselines in the pytest selection would rewrite "
                          "baselines/<gpu>.yaml in the tree it runs in (the caller's checkout)")
    assert not (tmp_path / "out").exists()


def _gate(tmp_path: Path, *args: str, python: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("GITHUB_STEP_SUMMARY", "CI")}
    env.update(GPUPERF_RESULTS=str(tmp_path / "results"), PYTHON=python or sys.executable, PYTHONPATH=str(REPO))
    return subprocess.run(["bash", str(REPO / "ci" / "gate.sh"), *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


@pytest.mark.long
@pytest.mark.parametrize(("args", "name"), [(["--update-baselines"], "--update-baselines"),
                                            (["-k", "gemm", "--results-dir=elsewhere"], "--results-dir"),
                                            (["--junitxml", "j.xml"], "--junitxml")])
def test_gate_sh_refuses_a_writing_option(tmp_path: Path, args: list[str], name: str) -> None:
    done = _gate(tmp_path, *args)
    assert done.returncode == 4 and done.stderr.startswith(f"ci/gate.sh: {name} in the pytest selection would "), \
        done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "results").exists()


@pytest.mark.long
def test_update_baselines_sh_refuses_a_results_dir_of_its_own(tmp_path: Path) -> None:
    env = {**os.environ, "GPUPERF_RESULTS": str(tmp_path / "results"), "PYTHON": sys.executable,
           "PYTHONPATH": str(REPO)}
    done = subprocess.run(["bash", str(REPO / "ci" / "update-baselines.sh"), "--results-dir=x"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert done.returncode == 4 and done.stderr.startswith("ci/update-baselines.sh: --results-dir in the pytest "
                                                           "selection would move"), done.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.long
def test_gate_sh_fails_when_pytest_exited_0_without_results(tmp_path: Path) -> None:
    """A test that calls ``os._exit(0)``: pytest exits 0 at once, the session never writes results; the gate
    fails. (The GPU check is stood in for: this machine has none; pytest and its test are real.)"""
    test = tmp_path / "test_exit.py"
    test.write_text("import os\n\n\ndef test_leaves_early():\n    os._exit(0)\n")
    python = tmp_path / "python"
    python.write_text("#!/usr/bin/env bash\n"
                      'if [[ "$1 $2 $3" == "-m gpuperf device" ]]; then exit 0; fi\n'
                      f'if [[ "$1 $2" == "-m pytest" ]]; then exec {sys.executable} -m pytest -p no:cacheprovider '
                      f'-q {test}; fi\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    summary = tmp_path / "summary.md"
    env_summary = {"GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run(["bash", str(REPO / "ci" / "gate.sh")], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, **env_summary, "GPUPERF_RESULTS": str(tmp_path / "results"),
                                            "PYTHON": str(python), "PYTHONPATH": str(REPO)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ci/gate.sh: pytest exited 0 but gpuperf wrote no results" in done.stderr, done.stderr
    assert "the gate fails without evidence" in summary.read_text()
