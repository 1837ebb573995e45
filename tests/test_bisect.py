"""``python -m gpuperf bisect`` over a real temporary git repository of ten commits, with a fake measurement.

The fake measuring command (``measure.py``, committed in the repository) writes a results file whose figure is
``speed.txt`` of the commit checked out, with 0.2 % noise: one commit plants a 10 % slowdown, one cannot run
(no results file), and one is slow only on its first measurement (the gate's re-measurement must clear it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gitrepos import commit, git
from gpuperf.history.bisect import _first_bad
from gpuperf.history.database import History, sqlite_url

ROOT = Path(__file__).resolve().parent.parent
CASE = "perf_tests/test_fake.py::test_gemm[fp32-4096-cold]"

MEASURE = '''
import json, os, random, sys
from pathlib import Path

if Path("broken").exists():
    sys.exit("this commit does not build")
speed = float(Path("speed.txt").read_text())
out = Path(os.environ["GPUPERF_BISECT_RESULTS"])
seen = out.parent / ("flaky-" + Path("flaky").read_text().strip()) if Path("flaky").exists() else None
if seen is not None and not seen.exists():
    seen.write_text("measured once")
    speed *= 0.8  # a transient slowdown: the re-measurement must clear it
value = speed * (1 + random.gauss(0, 0.002))
record = {"case_id": os.environ["GPUPERF_BISECT_CASE"], "nodeid": os.environ["GPUPERF_BISECT_CASE"],
          "family": "gemm", "params": {}, "metric": "TFLOPS", "value": value, "unit": "TFLOPS", "status": "PASS",
          "rel_iqr": 0.002, "samples": 20, "method": "synthetic", "flush": "cold", "gpu": "fake-gpu",
          "precision": "fp32"}
run = {"gpu_name": "Fake GPU", "gpu_slug": "fake-gpu", "compute_capability": "9.0", "driver": "580",
       "cuda_runtime": "13.0", "cublas": "13.1", "cupy": "14", "sm_clock_max_mhz": 1980, "mem_clock_mhz": 3201,
       "flush_modes": ["cold"], "started": "2026-12-01T00:00:00+00:00", "extra": {"uuid": "GPU-fake"}}
(out / "run").mkdir()
(out / "run" / "results.json").write_text(json.dumps({"schema": 1, "run": run, "records": [record]}))
'''


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args)


def _commit(repo: Path, message: str, **files: str | None) -> str:
    return commit(repo, message, files)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    commits = [_commit(repo, "base", **{"measure.py": MEASURE, "speed.txt": "50.0", "notes.txt": "0"})]
    for number in range(1, 4):
        commits.append(_commit(repo, f"notes {number}", **{"notes.txt": str(number)}))
    commits.append(_commit(repo, "does not build", **{"broken": "yes"}))
    commits.append(_commit(repo, "builds again, slow on its first measurement", **{"broken": None, "flaky": "c5"}))
    commits.append(_commit(repo, "plant a 10 % slowdown", **{"flaky": None, "speed.txt": "45.0"}))
    for number in range(7, 10):
        commits.append(_commit(repo, f"notes {number}", **{"notes.txt": str(number)}))
    return repo, commits


def _bisect(repo: Path, out: Path, good: str, bad: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuperf", "bisect", "--good", good, "--bad", bad, "-k", CASE,
                           "--repo", str(repo), "--out", str(out), "--history", str(out / "history.sqlite"),
                           "--measure-command", f"{sys.executable} measure.py"],
                          capture_output=True, text=True, cwd=ROOT, env={**_env(), "PYTHONPATH": str(ROOT)})


def _env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}


@pytest.mark.long
def test_bisect_names_the_planted_slowdown_skipping_what_cannot_run(repo: tuple[Path, list[str]],
                                                                     tmp_path: Path) -> None:
    path, commits = repo
    out = tmp_path / "out"
    done = _bisect(path, out, commits[0], commits[-1])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"first bad commit {commits[6]} plant a 10 % slowdown" in done.stdout
    summary = json.loads((out / "bisect.json").read_text())
    assert summary["first_bad"] == commits[6]
    by_commit = {step["commit"]: step for step in summary["steps"]}
    assert by_commit[commits[6]]["answer"] == "bad" and by_commit[commits[6]]["status"] == "REGRESSED"
    assert by_commit[commits[5]]["answer"] == "good" and by_commit[commits[5]]["measurements"] == 2  # re-measured
    assert _git(path, "status", "--porcelain") == "" and _git(path, "worktree", "list").count("\n") == 0
    with History(sqlite_url(out / "history.sqlite")) as history:
        runs = history.runs()
    measured = [step["commit"] for step in summary["steps"] if step["value"] is not None]
    assert sorted(run.git_commit or "" for run in runs.values()) == sorted(measured)  # every measured step
    assert {run.kind for run in runs.values()} == {"bisect"}
    assert any(step["answer"] == "skip" and "does not build" in step["note"] for step in summary["steps"])


@pytest.mark.long  # another range over the same commits; the fast tier's bisect above meets both on its way
def test_a_commit_that_cannot_run_is_skipped_and_a_transient_slowdown_is_remeasured(
        repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, commits = repo
    out = tmp_path / "out"
    done = _bisect(path, out, commits[1], commits[7])
    assert done.returncode == 0, done.stdout + done.stderr
    steps = {step["commit"]: step for step in json.loads((out / "bisect.json").read_text())["steps"]}
    tested = set(steps)
    if commits[4] in tested:
        assert steps[commits[4]]["answer"] == "skip" and "does not build" in steps[commits[4]]["note"]
    if commits[5] in tested:
        assert steps[commits[5]]["answer"] == "good" and steps[commits[5]]["measurements"] == 2
    assert commits[4] in tested or commits[5] in tested


@pytest.mark.long
def test_a_bad_commit_that_is_not_slower_is_refused(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, commits = repo
    done = _bisect(path, tmp_path / "out", commits[0], commits[3])
    assert done.returncode == 1
    assert "is PASS against the good one" in done.stderr and "no regression to bisect" in done.stderr


def test_an_unknown_revision_is_named(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, commits = repo
    done = _bisect(path, tmp_path / "out", "no-such-rev", commits[-1])
    assert done.returncode == 1 and "'no-such-rev' is not a commit" in done.stderr


def test_an_out_folder_through_a_loop_of_links_is_named(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, commits = repo
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    done = _bisect(path, tmp_path / "a" / "out", commits[0], commits[-1])
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "leads through a symbolic link back to itself" in done.stderr and len(done.stderr.splitlines()) == 1


def test_git_bisect_output_is_read_for_the_first_bad_commit_or_the_candidates() -> None:
    sha = "a" * 40
    assert _first_bad(f"running x\n{sha} is the first bad commit\ncommit {sha}\n") == (sha, [])
    other = "b" * 40
    skipped = f"There are only 'skip'ped commits left to test.\nThe first bad commit could be any of:\n{sha}\n{other}\n"
    assert _first_bad(skipped) == (None, [sha, other])


def test_the_case_is_picked_from_its_results_and_named_to_pytest() -> None:
    from gpuperf.history.bisect import case_record, keyword

    case = "perf_tests/test_custom.py::test_custom_perf[tiled-4096x4096x4096-cold]"
    assert keyword(case) == "test_custom_perf[tiled-4096x4096x4096-cold]" == keyword(case + "#vs_cublas") \
        == keyword(case + "@2")  # a later check of the same test: its test is what -k selects
    base = {"family": "custom", "params": {}, "metric": "TFLOPS", "unit": "TFLOPS", "status": "PASS"}
    doc = {"records": [{**base, "case_id": case, "nodeid": case, "value": 20.0},
                       {**base, "case_id": case + "#vs_cublas", "nodeid": case, "value": 0.4}]}
    assert case_record(doc, "tiled-4096")[0].value == 20.0  # type: ignore[union-attr]
    assert case_record(doc, "tiled-4096x4096x4096-cold]#vs")[0].value == 0.4  # type: ignore[union-attr]
    record, why = case_record(doc, "wmma")
    assert record is None and "no record of 'wmma'" in why
