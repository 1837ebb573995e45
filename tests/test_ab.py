"""``python -m gpuperf ab`` end to end over a real temporary git repository, with a synthetic GPU.

Each tree of the repository is a small suite: ``perf_tests/test_fake.py`` uses the real ``perf`` fixture (so its
checks take the A/B rounds exactly as on a GPU), and its ``conftest.py`` replaces the ``gpu`` and ``measure``
fixtures with a fake device and a timer whose seconds per call come from ``speed.json`` of the tree, with 0.1 %
noise. The plugin comes from the installed package's entry point, as in a user's repository (no conftest names
it). Commits: the base; a head whose GEMM is 5 % slower (its GEMV's kernel renamed, same speed); a head with a
test the base lacks; a head whose side crashes in its first measurement.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitrepos import commit, git
from test_plugin import FAKE_DEVICE
from gpuperf.ab.messages import NO_GPU_CHECK_ENV
from gpuperf.ab.schedule import BASE, HEAD, Schedule
from gpuperf.history.database import History, sqlite_url
from gpuperf.store.records import Record
from gpuperf.ab.messages import AGAIN, DONE, GO, SOCKET_ENV, THRESHOLD_ENV
from gpuperf.ab.side import Turns, TurnError

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = '''
import json, os, random, time
from pathlib import Path

import pytest

from gpuperf.measure.kernel_records import Kernel
from gpuperf.measure.measurement import Measurement
from gpuperf.wiring.fixtures import Measurer
''' + FAKE_DEVICE + '''
ROOT = Path(__file__).parent
random.seed(os.environ.get("GPUPERF_AB_SIDE", ""))  # each side's noise the same run after run


class SyntheticTimer:
    """Seconds per call from the tree's speed.json, with 0.1 % noise; kernels.json names each call's kernel.
    ``FAKE_FIRST_PASS_SLOWDOWN``: slower in the first pair of processes only (not in a confirming pass's), as a
    process can be."""

    def measure(self, fn, work, operands=(), flush="cold", label="", prefer_method="", band=None, repeat=False):
        name = fn()
        if (ROOT / "crash").exists():
            os._exit(3)
        if (ROOT / "hang").exists():
            time.sleep(60)
        seconds = json.loads((ROOT / "speed.json").read_text())[name] * (1 + random.gauss(0, 0.001))
        seconds *= 1 + float(os.environ.get("FAKE_SLOWDOWN", "0"))
        if "GPUPERF_AB_ONLY" not in os.environ:
            seconds *= 1 + float(os.environ.get("FAKE_FIRST_PASS_SLOWDOWN", "0"))
        kernel = json.loads((ROOT / "kernels.json").read_text())[name]
        return Measurement(samples_s=tuple(seconds * f for f in (0.999, 1.0, 1.001) * 4), work=work, flush=flush,
                           method="synthetic",
                           kernels=(Kernel(name=kernel, grid=(128, 1, 1), block=(256, 1, 1)),))


@pytest.fixture
def measure(flush_mode):
    return Measurer(SyntheticTimer(), flush_mode)
'''

TESTS = '''
import pytest

from gpuperf.measure.metrics import gemm_work, gemv_work


@pytest.mark.gemv
@pytest.mark.perf
def test_gemv(measure, perf):
    perf.check(measure(lambda: "gemv", gemv_work(16384, 16384, "fp32")))


@pytest.mark.gemm
@pytest.mark.perf
def test_gemm(measure, perf):
    perf.check(measure(lambda: "gemm", gemm_work(4096, 4096, 4096, "fp32")))


def test_gemm_correct(measure):
    """Checks no figure: an A/B side leaves it to the test run."""
    raise AssertionError("a test that checks no figure ran on an A/B side")
'''

EXTRA = '''

@pytest.mark.gemm
@pytest.mark.perf
def test_extra(measure, perf):
    perf.check(measure(lambda: "gemm", gemm_work(2048, 2048, 2048, "fp32")))
'''

GEMV_S = 16384 * 16384 * 4 / 4.0e12
GEMM_S = 2 * 4096**3 / 50e12
SPEED = {"gemv": GEMV_S, "gemm": GEMM_S}
KERNELS = {"gemv": "gemv2T_kernel_val", "gemm": "sm90_xmma_gemm"}
GEMM_ID = "perf_tests/test_fake.py::test_gemm[cold]"
GEMV_ID = "perf_tests/test_fake.py::test_gemv[cold]"


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args, env=_env())


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("GIT_") and key not in ("CI", "GITHUB_STEP_SUMMARY", "GPUPERF_HISTORY")}
    return {**env, "PYTHONPATH": str(ROOT), NO_GPU_CHECK_ENV: "1"}  # the sides' conftest stands in the GPU


def _commit(repo: Path, message: str, **files: str | None) -> str:
    return commit(repo, message, files, env=_env())


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("ab") / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    commits = {"base": _commit(repo, "base", **{
        "conftest.py": CONFTEST, "perf_tests/test_fake.py": TESTS, "speed.json": json.dumps(SPEED),
        "kernels.json": json.dumps(KERNELS), "pytest.ini": "[pytest]\n"})}
    commits["slower"] = _commit(repo, "gemm 5 % slower, gemv's kernel renamed", **{
        "speed.json": json.dumps({**SPEED, "gemm": GEMM_S * 1.05}),
        "kernels.json": json.dumps({**KERNELS, "gemv": "gemv_v2"})})
    _git(repo, "checkout", "-q", commits["base"])
    commits["extra"] = _commit(repo, "a test the base lacks", **{"perf_tests/test_fake.py": TESTS + EXTRA})
    _git(repo, "checkout", "-q", commits["base"])
    commits["crash"] = _commit(repo, "the head crashes", **{"crash": "yes"})
    _git(repo, "checkout", "-q", commits["base"])
    commits["hang"] = _commit(repo, "the head hangs", **{"hang": "yes"})
    _git(repo, "checkout", "-q", commits["base"])
    commits["no-ini"] = _commit(repo, "no pytest.ini: pytest finds the rootdir from its arguments", **{"pytest.ini": None})
    _git(repo, "checkout", "-q", commits["base"])
    return repo, commits


def _ab(repo: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuperf", "ab", "--repo", str(repo), "--out", str(out), *args],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120)


def _cases(out: Path) -> dict[str, dict[str, object]]:
    return {row["case"]: row for row in json.loads((out / "ab.json").read_text())["cases"]}


@pytest.mark.long
def test_aa_on_the_working_tree_is_all_same_and_exit_0(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, commits = repo
    done = _ab(path, tmp_path / "out", "--base", commits["base"])
    assert done.returncode == 0, done.stdout + done.stderr
    cases = _cases(tmp_path / "out")
    assert set(cases) == {GEMM_ID, GEMV_ID}
    assert {row["status"] for row in cases.values()} == {"SAME"}
    assert all(row["rounds"] >= 3 and row["kernels"] == "same kernels" for row in cases.values())
    for side in ("base", "head"):
        [found] = (tmp_path / "out" / side).rglob("results.json")
        results = json.loads(found.read_text())
        assert {record["case_id"] for record in results["records"]} == {GEMM_ID, GEMV_ID}
        assert (found.parent / "results.csv").exists()
        log = (tmp_path / "out" / side / "pytest.log").read_text()
        assert "1 deselected" in log and "test_gemm_correct" not in log
        assert json.loads((tmp_path / "out" / "ab.json").read_text())["gpu"] == results["run"]["extra"].get("uuid")
    assert "exit 0: no case slower" in (tmp_path / "out" / "summary.md").read_text()
    assert _git(path, "worktree", "list").count("\n") == 0  # the base's worktree is gone


@pytest.mark.long
def test_a_planted_slowdown_is_slower_and_exit_1_with_the_kernel_change_named(
        repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, commits = repo
    history = tmp_path / "history.sqlite"
    summary = tmp_path / "step-summary.md"
    done = subprocess.run([sys.executable, "-m", "gpuperf", "ab", "--repo", str(path), "--out", str(tmp_path / "out"),
                           "--base", commits["base"], "--head", commits["slower"], "--history", str(history)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**_env(), "GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 1, done.stdout + done.stderr
    cases = _cases(tmp_path / "out")
    gemm, gemv = cases[GEMM_ID], cases[GEMV_ID]
    assert gemm["status"] == "SLOWER" and -5.5 < float(gemm["delta_pct"]) < -4.2  # type: ignore[arg-type]
    # shown again by a fresh pair of processes: the better of its two series stands
    assert "re-measured in a fresh pair of processes: first series -" in str(gemm["note"])
    assert "(SLOWER), second -" in str(gemm["note"]) and "(SLOWER)" in str(gemm["note"])
    assert gemv["status"] == "SAME" and "kernel changed: gemv2T_kernel_val → gemv_v2" in str(gemv["kernels"])
    assert "SLOWER" in done.stdout and "exit 1: a case is slower" in done.stdout
    assert "**SLOWER**" in summary.read_text()
    with History(sqlite_url(history)) as stored:
        runs = stored.runs()
    assert sorted(run.git_commit or "" for run in runs.values()) == sorted([commits["base"], commits["slower"]])
    assert {run.kind for run in runs.values()} == {"ab"}


@pytest.mark.long
def test_a_slowdown_planted_on_the_head_side_only_is_caught(repo: tuple[Path, dict[str, str]],
                                                            tmp_path: Path) -> None:
    path, commits = repo
    done = _ab(path, tmp_path / "out", "--base", commits["base"], "--head", commits["base"], "--head-env",
               "FAKE_SLOWDOWN=0.03")
    assert done.returncode == 1, done.stdout + done.stderr
    cases = _cases(tmp_path / "out")
    assert {row["status"] for row in cases.values()} == {"SLOWER"}
    assert all(-3.4 < float(row["delta_pct"]) < -2.4 for row in cases.values())  # type: ignore[arg-type]


@pytest.mark.long
def test_a_case_on_one_side_only_is_unpaired_and_exit_2(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, commits = repo
    done = _ab(path, tmp_path / "out", "--base", commits["base"], "--head", commits["extra"], "--",
               "perf_tests", "-k", "gemm or extra")
    assert done.returncode == 2, done.stdout + done.stderr
    cases = _cases(tmp_path / "out")
    assert set(cases) == {GEMM_ID, "perf_tests/test_fake.py::test_extra[cold]"}  # the selection, on both sides
    extra = cases["perf_tests/test_fake.py::test_extra[cold]"]
    assert extra["status"] == "UNPAIRED" and "measured on the head side only" in str(extra["note"])
    assert extra["head"] is not None and extra["base"] is None
    assert cases[GEMM_ID]["status"] == "SAME"
    assert "exit 2: evidence missing" in done.stdout


@pytest.mark.long
def test_a_crashed_side_is_a_clear_error_and_exit_3(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, commits = repo
    done = _ab(path, tmp_path / "out", "--base", commits["base"], "--head", commits["crash"])
    assert done.returncode == 3, done.stdout + done.stderr
    assert "the head side exited with code 3" in done.stdout
    assert {row["status"] for row in _cases(tmp_path / "out").values()} == {"UNPAIRED"}
    unmeasured = json.loads((tmp_path / "out" / "ab.json").read_text())["unmeasured_tests"]
    assert unmeasured == {"base": [], "head": [GEMV_ID, GEMM_ID]}
    assert "2 test(s) of the head side gave no figure" in done.stdout


@pytest.mark.long
def test_a_side_that_holds_the_gpu_too_long_is_stopped_and_exit_3(repo: tuple[Path, dict[str, str]],
                                                                   tmp_path: Path) -> None:
    path, commits = repo
    done = _ab(path, tmp_path / "out", "--base", commits["base"], "--head", commits["hang"], "--turn-timeout", "0.5")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "the head side held the GPU for more than 0.5 s" in done.stdout
    assert {row["status"] for row in _cases(tmp_path / "out").values()} == {"UNPAIRED"}


def test_a_bad_revision_is_one_line_and_exit_3(repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, _ = repo
    done = _ab(path, tmp_path / "out", "--base", "no-such-rev")
    assert done.returncode == 3 and done.stderr.count("\n") == 1
    assert "'no-such-rev' is not a commit" in done.stderr and "--base" in done.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine has a GPU to find")
def test_no_usable_gpu_is_one_line_and_exit_3_before_either_side_starts(repo: tuple[Path, dict[str, str]],
                                                                         tmp_path: Path) -> None:
    path, commits = repo
    env = {key: value for key, value in _env().items() if key != NO_GPU_CHECK_ENV}
    done = subprocess.run([sys.executable, "-m", "gpuperf", "ab", "--repo", str(path), "--out", str(tmp_path / "out"),
                           "--base", commits["base"]], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 3 and done.stderr.count("\n") == 1 and done.stdout == ""
    assert done.stderr.startswith("gpuperf: error: no usable GPU, so neither side was started: ")
    assert "run the A/B gate on a GPU runner" in done.stderr
    assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_an_out_folder_that_cannot_be_made_is_one_line_and_exit_3(repo: tuple[Path, dict[str, str]],
                                                                   tmp_path: Path) -> None:
    path, commits = repo
    (tmp_path / "taken").write_text("a file")
    done = _ab(path, tmp_path / "taken" / "out", "--base", commits["base"])
    assert done.returncode == 3 and done.stderr.count("\n") == 1
    assert "a file stands where a folder is needed" in done.stderr


@pytest.mark.long
@pytest.mark.parametrize(("option", "message"), [
    (["--threshold", "0"], "the A/B threshold is a fraction between 0 and 1"),
    (["--threshold", "nan"], "got nan"),
    (["--rounds-max", "0"], "--rounds-max is a whole number of at least 3"),
    (["--head-env", "KEY"], "'KEY': write KEY=VALUE"),
    (["--turn-timeout", "-1"], "--turn-timeout"),
    (["--no-such-option"], "unrecognized arguments: --no-such-option"),
])
def test_a_usage_error_is_exit_4_not_the_missing_evidence_2_and_starts_nothing(
        repo: tuple[Path, dict[str, str]], tmp_path: Path, option: list[str], message: str) -> None:
    path, commits = repo
    done = _ab(path, tmp_path / "out", "--base", commits["base"], *option)
    assert done.returncode == 4, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "out").exists()


def test_an_out_folder_that_holds_files_is_refused_before_either_side_starts(repo: tuple[Path, dict[str, str]],
                                                                              tmp_path: Path) -> None:
    """A reused --out would report an earlier run's files (its ab.json naming the old results.json, --history
    appending the old cases under the new commit): refused, exit 4, and nothing in it touched."""
    path, commits = repo
    out = tmp_path / "out"
    (out / "base" / "20260101-000000").mkdir(parents=True)
    (out / "base" / "20260101-000000" / "results.json").write_text("an earlier run's")
    (out / "ab.json").write_text("{}")
    database = tmp_path / "h.sqlite"
    done = _ab(path, out, "--base", commits["base"], "--history", str(database))
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stdout + done.stderr
    assert f"--out {out}: already holds ab.json, base (an earlier run's?)" in done.stderr
    assert "pass a new or empty folder" in done.stderr
    assert sorted(p.name for p in out.rglob("*")) == ["20260101-000000", "ab.json", "base", "results.json"]
    assert (out / "ab.json").read_text() == "{}" and not database.exists()


@pytest.mark.long
def test_a_pytest_ini_above_out_does_not_configure_the_sides(repo: tuple[Path, dict[str, str]],
                                                              tmp_path: Path) -> None:
    """A tree with no ini file of its own: pytest takes the rootdir and ini file from the paths among its
    arguments, so an --out under a folder with a pytest.ini must not be one of them (here that ini deselects
    every test)."""
    path, commits = repo
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "pytest.ini").write_text("[pytest]\naddopts = -k no_test_is_named_this\n")
    out = tmp_path / "project" / "out"
    done = _ab(path, out, "--base", commits["no-ini"], "--head", commits["no-ini"], "--", "perf_tests", "-k", "gemm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {case: row["status"] for case, row in _cases(out).items()} == {GEMM_ID: "SAME"}


def test_the_schedule_alternates_a_b_b_a_and_waits_for_the_lagging_side() -> None:
    schedule = Schedule(rounds_max=4)
    record = {"case_id": "t::x", "nodeid": "t::x", "family": "gemm", "params": {}, "metric": "TFLOPS",
              "value": 50.0, "unit": "TFLOPS", "status": "PASS", "gpu": "fake-gpu"}
    for side in (BASE, HEAD):
        schedule.receive(side, {"kind": "hello", "tests": ["t::x"]})
    assert schedule.next_grant() is None  # both are still starting
    schedule.receive(BASE, {"kind": "start", "test": "t::x"})
    schedule.receive(HEAD, {"kind": "start", "test": "t::x"})
    assert schedule.next_grant() == (BASE, GO)
    schedule.receive(BASE, {"kind": "round", "test": "t::x", "key": "t::x", "record": record})
    assert schedule.next_grant() == (HEAD, GO)  # the base waits at its case for the head to reach it
    order: list[str] = []
    for _ in range(7):
        side = HEAD if not order else order[-1]
        schedule.receive(side, {"kind": "round", "test": "t::x", "key": "t::x", "record": record})
        grant = schedule.next_grant()
        assert grant is not None
        order.append(grant[0])
        if grant[1] == DONE:
            break
        assert grant[1] == AGAIN
    assert order == [HEAD, BASE, BASE, HEAD, BASE]  # A0 B0, B1 A1, A2 B2: three equal rounds are enough
    assert schedule.next_grant() is None  # the base runs on with the GPU; the head waits
    schedule.receive(BASE, {"kind": "end"})
    assert schedule.next_grant() == (HEAD, DONE)
    [(case, verdict)] = schedule.verdicts()
    assert verdict.status == "SAME" and verdict.rounds == 3 and len(case.measured[BASE]) == 3


def test_a_case_without_a_valid_figure_ends_at_the_round_limit_unpaired() -> None:
    schedule = Schedule(rounds_max=3)
    for side in (BASE, HEAD):
        schedule.receive(side, {"kind": "hello", "tests": ["t::x"]})
    reporting, grants = [BASE, HEAD], []  # both sides reach the case; then whoever is told "again" reports
    while len(grants) < 20:
        for side in reporting:
            value = float("nan") if side == HEAD else 50.0  # the head's figure is never valid
            schedule.receive(side, {"kind": "round", "test": "t::x", "key": "t::x", "record": {
                "case_id": "t::x", "nodeid": "t::x", "family": "gemm", "params": {}, "metric": "TFLOPS",
                "value": value, "unit": "TFLOPS", "status": "PASS", "gpu": "fake-gpu"}})
        grant = schedule.next_grant()
        assert grant is not None
        grants.append(grant)
        if grant[1] == DONE:
            break
        reporting = [grant[0]]
    assert grants[-1] == (BASE, DONE) and len(schedule.cases["t::x"].measured[BASE]) == 3
    [(_, verdict)] = schedule.verdicts()
    assert verdict.status == "UNPAIRED" and verdict.failed


def test_a_case_measured_by_other_methods_is_not_paired() -> None:
    schedule = Schedule()
    for side, method in ((BASE, "cupti-cold"), (HEAD, "cold-rotate")):
        schedule.receive(side, {"kind": "hello", "tests": ["t::x"]})
        schedule.receive(side, {"kind": "round", "test": "t::x", "key": "t::x", "record": {
            "case_id": "t::x", "nodeid": "t::x", "family": "gemm", "params": {}, "metric": "TFLOPS", "value": 50.0,
            "unit": "TFLOPS", "status": "PASS", "gpu": "fake-gpu", "method": method}})
    assert schedule.next_grant() == (BASE, DONE)
    [(_, verdict)] = schedule.verdicts()
    assert verdict.status == "UNPAIRED" and "by cupti-cold on the base side, by cold-rotate on the head" in verdict.note


def test_the_schedule_lets_a_case_of_one_side_go_alone() -> None:
    schedule = Schedule()
    record = {"case_id": "t::new", "nodeid": "t::new", "family": "gemm", "params": {}, "metric": "TFLOPS",
              "value": 50.0, "unit": "TFLOPS", "status": "PASS", "gpu": "fake-gpu"}
    schedule.receive(BASE, {"kind": "hello", "tests": ["t::x"]})
    schedule.receive(HEAD, {"kind": "hello", "tests": ["t::new", "t::x"]})
    schedule.receive(BASE, {"kind": "start", "test": "t::x"})
    schedule.receive(HEAD, {"kind": "start", "test": "t::new"})
    assert schedule.next_grant() == (HEAD, GO)  # the base will never run t::new: the head goes first
    schedule.receive(HEAD, {"kind": "round", "test": "t::new", "key": "t::new", "record": record})
    assert schedule.next_grant() == (HEAD, DONE)
    assert schedule.cases["t::new"].verdict is not None
    assert "the base tree has no test t::new" in schedule.cases["t::new"].verdict.note


def test_a_side_measures_again_while_told_and_stops_at_done() -> None:
    side, coordinator = socket.socketpair()
    record = Record(case_id="t::x", nodeid="t::x", family="gemm", params={}, metric="TFLOPS", value=50.0,
                    unit="TFLOPS", status="PASS")
    coordinator.sendall(b'{"answer": "again"}\n{"answer": "again"}\n{"answer": "done"}\n')
    turns = Turns(side, BASE)
    assert turns.rounds("t::x", record, lambda: record) == 3
    sent = [json.loads(line) for line in coordinator.recv(1 << 16).decode().splitlines()]
    assert [m["kind"] for m in sent] == ["round"] * 3 and sent[0]["key"] == "t::x"
    coordinator.sendall(b'{"answer": "done"}\n')
    assert turns.rounds("t::x", record, lambda: record) == 1  # a second check of the case id …
    assert json.loads(coordinator.recv(1 << 16).decode().splitlines()[0])["key"] == "t::x@2"  # … has its own key


def test_a_coordinator_that_went_away_is_one_line_not_a_hang(tmp_path: Path) -> None:
    side, coordinator = socket.socketpair()
    coordinator.close()
    with pytest.raises(TurnError, match="coordinator"):
        Turns(side, HEAD).start("t::x")
    with pytest.raises(TurnError, match="cannot reach the A/B coordinator .* unset it to run pytest alone"):
        Turns.from_env({SOCKET_ENV: str(tmp_path / "gone.sock")})
    assert Turns.from_env({}) is None


def test_each_side_learns_the_run_s_threshold_from_its_environment(tmp_path: Path) -> None:
    """``ab --threshold`` reaches a side as ``$GPUPERF_AB_THRESHOLD`` (``coordinator._side_env``), which its turns
    take as the band each round is sampled to (``round_band``); a side started without it uses the default."""
    from gpuperf.ab.coordinator import _side_env
    from gpuperf.ab.paired import DEFAULT_THRESHOLD

    address = tmp_path / "ab.sock"
    env = _side_env(HEAD, address, tmp_path / "siblings", 0.03, {})
    assert env[THRESHOLD_ENV] == "0.03" and env[SOCKET_ENV] == str(address)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(address))
        server.listen()
        assert Turns.from_env(env).round_band == 0.03  # type: ignore[union-attr]
        assert Turns.from_env({SOCKET_ENV: str(address)}).round_band == DEFAULT_THRESHOLD  # type: ignore[union-attr]


def _side(tests: list[tuple[str, int]], crash_after: int | None) -> Iterator[dict[str, Any] | None]:
    """A side as the schedule sees it: its requests, each sent after the answer to the one before (``send``);
    ``None`` where it crashes (after ``crash_after`` requests)."""
    record = {"case_id": "", "nodeid": "", "family": "gemm", "params": {}, "metric": "TFLOPS", "value": 50.0,
              "unit": "TFLOPS", "status": "PASS", "gpu": "fake-gpu"}
    sent = 0

    def request(message: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal sent
        sent += 1
        return None if crash_after is not None and sent > crash_after else message

    yield {"kind": "hello", "tests": [test for test, _ in tests]}
    for test, checks in tests:
        yield request({"kind": "start", "test": test})
        for check in range(checks):
            key = f"{test}#{check}"
            answer = yield request({"kind": "round", "test": test, "key": key, "record": {**record, "case_id": key}})
            while answer == AGAIN:
                answer = yield request({"kind": "round", "test": test, "key": key,
                                        "record": {**record, "case_id": key}})
    yield request({"kind": "end"})


_TESTS = st.lists(st.tuples(st.sampled_from([f"t{n}" for n in range(6)]), st.integers(0, 2)), max_size=6,
                  unique_by=lambda pair: pair[0])


@given(_TESTS, _TESTS, st.one_of(st.none(), st.integers(0, 12)), st.booleans())
def test_the_schedule_never_deadlocks_nor_lets_both_sides_run(base_tests: list[tuple[str, int]],
                                                             head_tests: list[tuple[str, int]],
                                                             crash_after: int | None, head_crashes: bool) -> None:
    """Any two test lists (other orders, tests on one side only, other checks per test), either side crashing
    at any request: every step either grants one side or waits on the one that runs, and the run ends."""
    schedule = Schedule(rounds_max=4)
    programs = {BASE: _side(base_tests, None if head_crashes else crash_after),
                HEAD: _side(head_tests, crash_after if head_crashes else None)}

    def advance(side: str, answer: str | None) -> None:
        message = next(programs[side]) if answer is None else programs[side].send(answer)
        if message is None:
            schedule.lose(side, "crashed")
        else:
            schedule.receive(side, message)

    for side in (BASE, HEAD):
        advance(side, None)  # hello
        advance(side, None)  # its first request
    for _ in range(500):
        if schedule.finished:
            break
        assert not schedule.running(), "a side runs while the schedule is asked for a turn"
        grant = schedule.next_grant()
        assert grant is not None, f"deadlock: {schedule.sides}"
        advance(*grant)
        assert len(schedule.running()) <= 1
    assert schedule.finished
    verdicts = schedule.verdicts()
    common = {test for test, _ in base_tests} & {test for test, _ in head_tests}
    if crash_after is None and [t for t, _ in base_tests if t in common] == [t for t, _ in head_tests if t in common]:
        checked = {test for test, checks in base_tests if checks} & {test for test, checks in head_tests if checks}
        paired = {case.test for case, verdict in verdicts if verdict.status == "SAME"}
        assert checked <= paired  # the tests both run, in the same order: every case both checked is paired


@pytest.mark.long
@pytest.mark.parametrize("plant", ["FAKE_FIRST_PASS_SLOWDOWN", "FAKE_SLOWDOWN"])
def test_a_slowdown_near_the_threshold_is_measured_again_in_a_fresh_pair_of_processes(
        repo: tuple[Path, dict[str, str]], tmp_path: Path, plant: str) -> None:
    """A slowdown is measured again by a fresh pair of processes (only its tests, ``confirm/``): one of the first
    head process only is cleared there, exit 0; a real one shows twice and stands, exit 1."""
    path, commits = repo
    done = _ab(path, tmp_path / "out", "--base", commits["base"], "--head", commits["base"], "--head-env",
               f"{plant}=0.024", "--", "perf_tests", "-k", "gemm")
    gemm = _cases(tmp_path / "out")[GEMM_ID]
    assert "measured again in a fresh pair of processes" in done.stdout, done.stdout + done.stderr
    assert "re-measured in a fresh pair of processes: first series -2." in str(gemm["note"]), gemm
    log = (tmp_path / "out" / "confirm" / "head" / "pytest.log").read_text()
    assert "1 skipped, 2 deselected" in log  # the GEMV (-k) and the correctness test; the GEMM measured again
    if plant == "FAKE_FIRST_PASS_SLOWDOWN":
        assert (done.returncode, gemm["status"]) == (0, "SAME"), done.stdout + done.stderr
    else:
        assert (done.returncode, gemm["status"]) == (1, "SLOWER"), done.stdout + done.stderr


def test_a_confirming_pass_s_side_keeps_only_the_tests_of_its_cases() -> None:
    """``$GPUPERF_AB_ONLY``'s case ids (the GPU segment of a node id dropped): only their tests, and only those
    that check a figure, are kept; the rest are reported deselected."""
    from types import SimpleNamespace

    from gpuperf.ab.side import SideHooks

    def item(nodeid: str, checks: bool = True) -> Any:
        return SimpleNamespace(nodeid=nodeid, fixturenames=["measure", "perf"] if checks else ["measure"])

    items = [item("t.py::a[gpu0-x]"), item("t.py::b[x]"), item("t.py::c[x]", checks=False), item("t.py::a[gpu1-y]")]
    deselected: list[Any] = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    hooks = SideHooks(turns=None, suite_test=lambda item: True, only=frozenset({"t.py::a[x]", "t.py::c[x]"}))
    hooks.pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["t.py::a[gpu0-x]"]
    assert [i.nodeid for i in deselected] == ["t.py::b[x]", "t.py::c[x]", "t.py::a[gpu1-y]"]


def test_ab_json_names_the_gpu_its_sides_measured_on(tmp_path: Path) -> None:
    """ab.json carries the UUID the base side's results.json recorded; a results file without one, or none, is None."""
    from gpuperf.ab.coordinator import _gpu

    results = tmp_path / "results.json"
    results.write_text(json.dumps({"run": {"extra": {"uuid": "GPU-312a1ad8-60d7"}}, "records": []}))
    assert _gpu(str(results)) == "GPU-312a1ad8-60d7"
    results.write_text(json.dumps({"run": {"extra": {}}, "records": []}))
    assert _gpu(str(results)) is None and _gpu(None) is None and _gpu(str(tmp_path / "absent.json")) is None
