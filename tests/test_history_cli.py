"""``history ingest|show|changes`` through the CLI, on both engines, and the suite appending every run
(pytester, with the synthetic GPU of test_plugin.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from gpuperf.cli import main
from gpuperf.history.database import History, sqlite_url
from history_support import ENGINES, ROOT, database_url, document, write  # noqa: F401  (a fixture)
from test_plugin import GEMM_S, GEMV_S, TESTS, fake_project

pytest_plugins = ["pytester"]

SLOW = "perf_tests/test_gemm.py::test_gemm_perf[fp16-8192x8192x8192-cold]"
STEADY = "perf_tests/test_gemv.py::test_gemv_perf[fp32-16384x16384-cold]"
KERNEL = "sm90_xmma_gemm_f16f16_f16f32"


def _commit(number: int) -> str:
    return f"{number:02d}" + "c0ffee" * 6 + "00"


def _series(folder: Path, slow_from: int = 9, runs: int = 12) -> None:
    """Twelve runs on one host; from run 9 (a new commit, a new driver, another kernel) the fp16 GEMM is 5 %
    slower; the GEMV stays put. 0.3 % noise, fresh each run."""
    import random

    rng = random.Random(5)
    for number in range(1, runs + 1):
        slow = number >= slow_from
        values = {SLOW: 700.0 * (0.95 if slow else 1.0) * (1 + rng.gauss(0, 0.003)),
                  STEADY: 4000.0 * (1 + rng.gauss(0, 0.003))}
        write(folder / f"2026120{1 + number // 10}-{number:02d}0000" / "results.json",
              document(f"2026-12-{1 + number // 10:02d}T{number:02d}:00:00+00:00", values, commit=_commit(number),
                       driver="590.10" if slow else "580.159.04",
                       kernels={SLOW: KERNEL + ("_slow" if slow else "")}))


@pytest.mark.parametrize("database_url", ENGINES, indirect=True)
def test_changes_names_the_slowdown_its_commit_versions_and_kernels(database_url: str, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _series(tmp_path / "results")
    assert main(["history", "--history", database_url, "ingest", str(tmp_path / "results")]) == 0
    assert "12 runs added, 0 already present, 0 files refused" in capsys.readouterr().out
    assert main(["history", "--history", database_url, "ingest", str(tmp_path / "results")]) == 0
    again = capsys.readouterr().out
    assert "0 runs added, 12 already present" in again and again.count("\n") == 1  # counted, not listed

    assert main(["history", "--history", database_url, "changes"]) == 1
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("SLOWDOWN")]
    assert SLOW in line and "host GPU-aaaa0001" in line and "-5.0 %" in line
    assert f"commit {_commit(8)[:10]}" in line and f"commit {_commit(9)[:10]}" in line and "4 runs since" in line
    assert "versions changed: driver 580.159.04 → 590.10" in line
    assert f"kernels changed: {KERNEL} → {KERNEL}_slow" in line
    assert "1 change points in 2 series over 12 runs; 1 slowdown in a series' last 5 runs" in out
    assert main(["history", "--history", database_url, "changes", "--last", "3"]) == 0
    assert main(["history", "--history", database_url, "changes", "--case", "gemv"]) == 0
    assert "0 change points in 1 series" in capsys.readouterr().out
    assert main(["history", "--history", database_url, "changes", "--since", "2026-12-01T09:00"]) == 0
    capsys.readouterr()
    # a filter that selects nothing is an error that says what there is, never "0 series" and exit 0
    assert main(["history", "--history", database_url, "changes", "--gpu", "other-gpu"]) == 1
    err = capsys.readouterr().err
    assert "no run of the history" in err and "--gpu other-gpu" in err and "12 runs of nvidia-h200" in err
    assert main(["history", "--history", database_url, "changes", "--since", "2027-01-01"]) == 1
    assert "matches --since 2027-01-01" in capsys.readouterr().err
    assert main(["history", "--history", database_url, "changes", "--case", "no-such-case"]) == 1
    assert "no case of the history" in capsys.readouterr().err

    assert main(["history", "--history", database_url, "show", "fp16-8192"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == SLOW and "judged (TFLOPS)" in shown[1] and len(shown) == 2 + 12 + 1
    assert _commit(9)[:10] in shown[10] and "590.10" in shown[10] and "PASS" in shown[10]
    assert main(["history", "--history", database_url, "show", "perf_tests"]) == 1
    err = capsys.readouterr().err
    assert "\\n" not in err  # a list, a case a line, not an escaped newline in one error line
    lines = err.splitlines()
    assert lines[0] == "2 cases match 'perf_tests':"
    assert sorted(lines[1:3]) == sorted(f"  {case}" for case in (SLOW, STEADY))
    assert lines[3].startswith("gpuperf: error: 2 cases match 'perf_tests'; name one of those listed above")


@pytest.mark.parametrize("database_url", ENGINES, indirect=True)
def test_a_slowdown_in_the_third_run_is_named_by_the_gates_rule_with_both_commits(
        database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The H200 demo's shape: two runs, a commit, a third run with the GEMM 5 % slower and another kernel."""
    import random

    rng = random.Random(8)
    for number in (1, 2, 3):
        slow = number == 3
        values = {SLOW: 700.0 * (0.95 if slow else 1.0) * (1 + rng.gauss(0, 0.003)),
                  STEADY: 4000.0 * (1 + rng.gauss(0, 0.003))}
        write(tmp_path / "results" / f"{number}" / "results.json",
              document(f"2026-12-01T0{number}:00:00+00:00", values, commit=_commit(1 if number < 3 else 2),
                       kernels={SLOW: KERNEL + ("_slow" if slow else "")}, rel_iqr=0.004))
    assert main(["history", "--history", database_url, "ingest", str(tmp_path / "results")]) == 0
    capsys.readouterr()
    assert main(["history", "--history", database_url, "changes", "--last", "1"]) == 1
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith(("SLOWDOWN", "speed-up"))]
    assert line.startswith(f"SLOWDOWN {SLOW}") and "by the gate's rule" in line and "1 run since" in line
    assert f"commit {_commit(1)[:10]}" in line and f"commit {_commit(2)[:10]}" in line
    assert f"kernels changed: {KERNEL} → {KERNEL}_slow" in line
    assert "1 slowdown in a series' last 1 runs" in out


@pytest.mark.long
def test_the_committed_fleet_runs_make_one_series_per_case(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed runs of 34 H200s (a few runs each, over the suite's own development) make one series per case
    and method, hosts pooled with their offsets removed; a change point at a change of host says so, with both
    hosts' offsets, and the exit code is the nightly check's over what is printed."""
    from tools.generators.changepoint_compare import committed_fleet_files

    files = committed_fleet_files(ROOT)
    target = str(tmp_path / "fleet.sqlite")
    # the commands docs/history.md shows, run from the repository root
    monkeypatch.chdir(ROOT)
    assert main(["history", "ingest", "--history", target, "--exclude", "*-slow-*", "--exclude", "*-clock-check.json",
                 "evidence/fleet", "evidence/h200"]) == 0
    ingested = capsys.readouterr().out
    assert f"{len(files) - 1} runs added, 1 already present, 0 files refused" in ingested and len(files) >= 40
    code = main(["history", "changes", "--history", target])
    lines = capsys.readouterr().out.splitlines()
    with History(sqlite_url(Path(target)), create=False) as history:
        pairs = len(history.series_columns()[0])
    summary = re.fullmatch(r"gpuperf: (\d+) change points in (\d+) series over (\d+) runs; (\d+) slowdowns? .*",
                           lines[-1])
    assert summary is not None and int(summary[2]) == pairs and int(summary[3]) == len(files) - 1  # one file twice
    found = [line for line in lines if line.startswith(("SLOWDOWN", "speed-up"))]
    assert len(found) == int(summary[1]) and all(" host all hosts: " in line for line in found)
    moved = [line for line in found if "host changed: " in line]
    assert moved and all(re.search(r"host changed: \S+ \([+-]\d+\.\d %\) → \S+ \([+-]\d+\.\d %\), offsets removed",
                                   line) for line in moved)
    assert code == (1 if int(summary[4]) else 0)


def test_ingest_names_a_refused_file_and_bad_arguments_are_refused(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "results" / "cut" / "results.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"schema": 1, "run": {"gpu_na')
    assert main(["history", "--history", str(tmp_path / "h.sqlite"), "ingest", str(tmp_path / "results")]) == 1
    out = capsys.readouterr().out
    assert f"refused {bad}: not valid JSON" in out and "1 files refused" in out
    assert main(["history", "--history", str(tmp_path / "h.sqlite"), "ingest", str(tmp_path / "absent")]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["history", "--history", "none", "changes"]) == 1
    assert "these commands need a history" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["history", "changes", "--since", "yesterday"])
    assert exited.value.code == 2 and "not an ISO date" in capsys.readouterr().err


# --- the suite appends every run ---------------------------------------------------------------------------


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    fake_project(pytester, monkeypatch, {"test_perf": TESTS},
                 ("GPUPERF_HISTORY", "GITHUB_RUN_ID", "GITHUB_HEAD_REF", "GITHUB_REF_NAME"),
                 gemv=GEMV_S, gemm=GEMM_S, slow=8 * GEMM_S)
    (pytester.path / ".gitignore").write_text("out/\n*.sqlite*\nresults/\ntimings.json\n")
    for args in (["init", "-q", "-b", "trunk"], ["add", "-A"], ["commit", "-q", "-m", "project"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=pytester.path, check=True)
    return pytester


def _runs(path: Path) -> list[dict]:
    with History(sqlite_url(path)) as history:
        return [vars(run) for run in history.runs().values()]


def test_every_run_is_appended_with_its_commit_and_ingesting_its_results_adds_nothing(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project.path, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("GITHUB_RUN_ID", "77")
    monkeypatch.setenv("GITHUB_REPOSITORY", "org/gpuperf")
    result = project.runpytest("-p", "no:cacheprovider", "--update-baselines", "--results-dir", "out",
                               "--history", "hist.sqlite")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*gpuperf: history sqlite:///*hist.sqlite: 2 records appended (*s)*"])
    result = project.runpytest("-p", "no:cacheprovider", "--results-dir", "out", "--history", "hist.sqlite")
    result.assert_outcomes(passed=2, deselected=1)
    runs = _runs(project.path / "hist.sqlite")
    assert [run["kind"] for run in runs] == ["update-baselines", "run"]
    assert all(run["git_commit"] == head and run["git_dirty"] is False and run["branch"] == "trunk" for run in runs)
    engine_url = sqlite_url(project.path / "hist.sqlite")
    import sqlalchemy as sa

    engine = sa.create_engine(engine_url)
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT ci_job, baseline_digest, options FROM runs ORDER BY pk")).all()
    engine.dispose()
    assert rows[0].ci_job == "https://github.com/org/gpuperf/actions/runs/77"
    assert rows[0].baseline_digest is None and rows[1].baseline_digest  # judged against the file the first wrote
    options = json.loads(rows[1].options)
    assert "--history" in options["args"] and options["gate"]["tolerance"] == 0.04 and options["update"] is False
    assert main(["history", "--history", str(project.path / "hist.sqlite"), "ingest", str(project.path / "out")]) == 0
    assert "0 runs added, 2 already present" in capsys.readouterr().out


@pytest.mark.long
def test_the_default_the_environment_none_and_xdist(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.runpytest("-p", "no:cacheprovider", "--missing-baseline=pass").assert_outcomes(passed=2, deselected=1)
    assert len(_runs(project.path / "results" / "history.sqlite")) == 1
    monkeypatch.setenv("GPUPERF_HISTORY", str(project.path / "env.sqlite"))
    project.runpytest("-p", "no:cacheprovider", "--missing-baseline=pass").assert_outcomes(passed=2, deselected=1)
    assert len(_runs(project.path / "env.sqlite")) == 1
    project.runpytest("-p", "no:cacheprovider", "--missing-baseline=pass", "--history", "none").assert_outcomes(
        passed=2, deselected=1)
    assert len(_runs(project.path / "env.sqlite")) == 1 and len(_runs(project.path / "results" / "history.sqlite")) == 1
    pytest.importorskip("xdist", reason="pytest-xdist is not installed: pip install -e '.[test]'")
    result = project.runpytest("-p", "no:cacheprovider", "--missing-baseline=pass", "-n", "2")
    result.assert_outcomes(passed=2)
    (last,) = [run for run in _runs(project.path / "env.sqlite")][1:]
    with History(sqlite_url(project.path / "env.sqlite")) as history:
        assert len(history.values(run_pks=[last["pk"]])) == 2  # the controller appended both workers' records once


def test_a_bad_history_target_fails_at_start_up(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--history", "mysql://u@h/db")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--history*unknown database kind 'mysql'*"])
