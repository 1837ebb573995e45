"""A ``history ingest`` that adds nothing removes the history file it made only while it is still its own and
empty: never one another writer (an ingest, a suite's session) filled meanwhile, never one another writer has
open (issue 54)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuperf.cli import main
from gpuperf.history.database import History
from gpuperf.history.engine import removed_unless_kept
from gpuperf.store.history_target import sqlite_url
from history_support import ROOT

RUNS = [ROOT / "evidence" / "fleet" / "1e941103-1.json", ROOT / "evidence" / "fleet" / "1e941103-2.json"]


def _run_count(path: Path) -> int:
    with History(sqlite_url(path), create=False) as history:
        return len(history.runs())


def test_a_history_filled_by_another_writer_meanwhile_is_kept(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "results" / "race.sqlite"
    with removed_unless_kept(sqlite_url(target)) as kept:  # this ingest made the file, and will add nothing
        assert main(["history", "ingest", *map(str, RUNS), "--history", str(target)]) == 0  # another writer
        assert "2 runs added" in capsys.readouterr().out
        assert not kept[0]
    assert _run_count(target) == 2


def test_an_ingest_that_adds_nothing_still_leaves_no_new_file(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("{}")
    target = tmp_path / "new" / "h.sqlite"
    assert main(["history", "ingest", str(tmp_path / "empty.json"), "--history", str(target)]) == 1
    assert not (tmp_path / "new").exists()


@pytest.mark.long
def test_a_file_another_process_has_open_is_not_removed(tmp_path: Path) -> None:
    """A writer that has the file open holds a shared lock on it: the maker's removal waits for none and skips."""
    target = tmp_path / "h.sqlite"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from gpuperf.history.database import History\n"
        f"history = History({sqlite_url(target)!r})\n"
        "print('open', flush=True)\n"
        "sys.stdin.read()\n")], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with removed_unless_kept(sqlite_url(target)):
            assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        assert target.exists()
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0


@pytest.mark.long
def test_an_empty_ingest_racing_a_real_one_never_removes_its_runs(tmp_path: Path) -> None:
    """Issue 54's race, as found: 3,000 ``{}`` files ingested in the background, and 0.1 s later two real runs into
    the same new target: the two runs are there at the end, each time."""
    empties = tmp_path / "empties"
    empties.mkdir()
    for index in range(3000):
        (empties / f"{index}.json").write_text("{}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for attempt in range(3):
        target = tmp_path / f"results{attempt}" / "race.sqlite"
        command = [sys.executable, "-m", "gpuperf", "history", "ingest", "--history", str(target)]
        background = subprocess.Popen([*command, str(empties)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
        time.sleep(0.1)
        real = subprocess.run([*command, *map(str, RUNS)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        _, err = background.communicate(timeout=300)
        assert real.returncode == 0 and "2 runs added" in real.stdout, real.stdout + real.stderr
        assert background.returncode == 1 and "Traceback" not in err, err
        assert _run_count(target) == 2


@pytest.mark.long
def test_two_identical_ingests_at_once_leave_one_whole_history(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    target = tmp_path / "h.sqlite"
    command = [sys.executable, "-m", "gpuperf", "history", "ingest", "--history", str(target), *map(str, RUNS)]
    both = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    outs = [process.communicate(timeout=120) for process in both]
    assert [process.returncode for process in both] == [0, 0], outs
    assert _run_count(target) == 2 and target.stat().st_size > 0
    assert json.dumps(outs).count("Traceback") == 0


def test_a_process_writing_many_histories_keeps_no_descriptor_of_each(tmp_path: Path) -> None:
    """The shared lock of a written file is released with the last engine writing it: a test session, or a job
    writing hundreds of histories, does not run out of descriptors."""
    import gc

    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    gc.collect()
    before = descriptors()
    for index in range(8):  # each would hold one: 8 more than before
        with History(sqlite_url(tmp_path / f"h{index}.sqlite")):
            pass
    gc.collect()
    assert descriptors() <= before + 2
