"""Ctrl-C and SIGTERM end a command with one line and exit 2, never a KeyboardInterrupt traceback, and leave nothing
running or registered behind: no pool worker of ``history ingest``, no git worktree and no measuring process of
``bisect`` or ``ab``; ``bisect --measure-timeout`` stops a measuring command and all it started (issue 54)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuperf.cli import main
from test_ab import _env, _git
from test_ab import repo  # noqa: F401  (the fixture: a repository of fake-GPU suites)

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "evidence" / "fleet" / "1e941103-1.json"
INTERRUPTED = "gpuperf: error: interrupted ("


def _processes_naming(marker: str) -> list[int]:
    """The processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _wait_for(condition: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _started(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A command in a session of its own, as a terminal's foreground job is: Ctrl-C is SIGINT to its group."""
    return subprocess.Popen([sys.executable, "-m", "gpuperf", *argv], cwd=cwd, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            env=env or {**os.environ, "PYTHONPATH": str(ROOT)})


def _stopped(process: subprocess.Popen[str], sent: signal.Signals) -> tuple[int, str]:
    if sent == signal.SIGINT:
        os.killpg(process.pid, sent)  # the terminal's Ctrl-C: the whole foreground group
    else:
        process.send_signal(sent)  # kill PID: the command alone
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def _runs(folder: Path, count: int) -> Path:
    data = json.loads(RUN.read_text())
    folder.mkdir()
    for index in range(count):
        data["run"]["started"] = f"2026-11-{1 + index // 1440:02d}T{index // 60 % 24:02d}:{index % 60:02d}:00+00:00"
        (folder / f"run{index}.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize("command", [["history", "ingest", str(RUN), "--history", "h.sqlite"], ["fleet", str(RUN)],
                                     ["history", "page", "--history", "h.sqlite"], ["bisect", "--good", "HEAD",
                                     "--bad", "HEAD", "-k", "gemm"], ["ab", "--base", "HEAD"]])
def test_an_interrupt_inside_any_command_is_one_line_and_exit_2(command: list[str], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An interrupt inside any command (its function, as parsed) ends in ``main``'s one line."""
    monkeypatch.chdir(tmp_path)
    parse = argparse.ArgumentParser.parse_args

    def interrupted(*_args: object) -> int:
        raise KeyboardInterrupt

    def parsed(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> argparse.Namespace:
        namespace = parse(self, *args, **kwargs)
        namespace.func = interrupted
        return namespace

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parsed)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err == f"{INTERRUPTED}Ctrl-C): the command stopped and ended what it had started (worktrees, processes); " \
                  "run it again\n"


def test_an_error_an_interrupt_caused_is_the_interrupt(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C inside an import of a C extension comes back as that import's own error (matplotlib's
    ``ImportError: initialization failed``): still one line and exit 2."""
    parse = argparse.ArgumentParser.parse_args

    def importing(*_args: object) -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc

    def parsed(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> argparse.Namespace:
        namespace = parse(self, *args, **kwargs)
        namespace.func = importing
        return namespace

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parsed)
    assert main(["fleet", str(RUN)]) == 2
    assert capsys.readouterr().err.startswith(f"{INTERRUPTED}Ctrl-C)")


@pytest.mark.long
@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_history_ingest_stopped_leaves_no_pool_worker(sent: signal.Signals, tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs", 600)
    process = _started(["history", "ingest", str(runs), "--history", str(tmp_path / "h.sqlite")], tmp_path)
    _wait_for(lambda: len(_children(process.pid)) >= 1)  # the pool's workers are reading
    workers = _children(process.pid)
    code, err = _stopped(process, sent)
    assert code == 2 and err.startswith(INTERRUPTED) and err.count("\n") == 1, err
    _wait_for(lambda: not any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in workers), 10)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.long
def test_fleet_and_history_page_stopped_by_ctrl_c_say_one_line(tmp_path: Path) -> None:
    runs = _runs(tmp_path / "runs", 300)
    process = _started(["fleet", *map(str, sorted(runs.iterdir()))], tmp_path)
    time.sleep(2)
    code, err = _stopped(process, signal.SIGINT)
    assert code == 2 and err.startswith(INTERRUPTED) and err.count("\n") == 1, err
    assert main(["history", "ingest", str(runs), "--history", str(tmp_path / "h.sqlite")]) == 0
    for delay in (0.0, 0.3, 0.6, 0.9):  # in the documents' pool, between the pools, drawing the pictures
        process = _started(["history", "page", "--history", str(tmp_path / "h.sqlite"), "--out",
                            str(tmp_path / f"site{delay}")], tmp_path)
        _wait_for(lambda: len(_children(process.pid)) >= 1 or process.poll() is not None)
        time.sleep(delay)
        if process.poll() is not None:
            continue  # done before it could be stopped: nothing to see
        code, err = _stopped(process, signal.SIGINT)
        assert code == 2 and err.startswith(INTERRUPTED) and err.count("\n") == 1, (delay, err)


def _worktrees(repo: Path) -> list[str]:
    return [line for line in _git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


@pytest.mark.long
@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_bisect_stopped_removes_its_worktree_and_ends_the_measurement(sent: signal.Signals, tmp_path: Path,
                                                                      repo: tuple[Path, dict[str, str]]) -> None:  # noqa: F811
    path, commits = repo
    marker = f"{sent.value}9.125"  # a sleep of its own, found by its command line
    process = _started(["bisect", "--repo", str(path), "--good", commits["base"], "--bad", commits["slower"], "-k",
                        "gemm", "--out", str(tmp_path / "out"), "--measure-command", f"sleep {marker}; sleep 1"],
                       ROOT, env=_env())
    _wait_for(lambda: bool(_processes_naming(f"sleep\0{marker}")))  # the sleep itself, not the command naming it
    code, err = _stopped(process, sent)
    assert code == 2 and err.startswith(INTERRUPTED) and err.count("\n") == 1, err
    assert _worktrees(path) == [f"worktree {path}"]
    _wait_for(lambda: not _processes_naming(f"sleep\0{marker}"), 10)


@pytest.mark.long
def test_bisect_measure_timeout_stops_the_command_and_what_it_started(tmp_path: Path,
                                                                       repo: tuple[Path, dict[str, str]]) -> None:  # noqa: F811
    path, commits = repo
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gpuperf", "bisect", "--repo", str(path), "--good", commits["base"],
                           "--bad", commits["slower"], "-k", "gemm", "--out", str(tmp_path / "out"),
                           "--measure-command", "sleep 87.5 & sleep 87.5; wait", "--measure-timeout", "1"],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and time.monotonic() - started < 30, done.stderr
    assert "the good commit" in done.stderr and "ran past --measure-timeout 1 s (stopped)" in done.stderr
    assert not _processes_naming("sleep\0" "87.5") and _worktrees(path) == [f"worktree {path}"]


@pytest.mark.long
@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_ab_stopped_removes_its_worktree_and_ends_both_sides(sent: signal.Signals, tmp_path: Path,
                                                             repo: tuple[Path, dict[str, str]]) -> None:  # noqa: F811
    path, commits = repo
    out = tmp_path / "out"
    process = _started(["ab", "--repo", str(path), "--base", commits["base"], "--head", commits["hang"], "--out",
                        str(out)], ROOT, env=_env())
    _wait_for(lambda: (out / "head" / "pytest.log").exists() and len(_processes_naming(str(out))) >= 2)
    time.sleep(1)  # the sides have started their sessions
    code, err = _stopped(process, sent)
    assert code == 2 and err.startswith(INTERRUPTED) and err.count("\n") == 1, err
    assert _worktrees(path) == [f"worktree {path}"]
    _wait_for(lambda: not _processes_naming(str(out)), 10)
