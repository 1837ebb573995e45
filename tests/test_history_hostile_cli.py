"""``history ingest|show|changes`` through the CLI on hostile input: what is not a results file is named for what
it is (a FIFO, a folder, a device, a link in a loop or to nothing, a file that cannot be read), with the fix, and
the others are still added; case ids and kernel names from a results file reach the terminal escaped."""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuperf.cli import main
from gpuperf.store import reading
from history_support import ROOT, document, write

HOSTILE_CASE = "perf_tests/test_gemm.py::test_gemm_perf[\x1b]0;owned\x07\nPASS\u202e]"
HOSTILE_KERNEL = "sm90_gemm\x1b[31m"


def _ingest(tmp_path: Path, capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, str, str]:
    code = main(["history", "--history", str(tmp_path / "h.sqlite"), "ingest", *map(str, paths)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return write(tmp_path / "good.json", document("2026-12-01T00:00:00+00:00", {"perf_tests/a": 1.0}))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_as_a_fifo_and_the_others_are_added(tmp_path: Path, good: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    code, out, _ = _ingest(tmp_path, capsys, fifo, good)
    assert code == 1 and f"refused {fifo}: is a FIFO (named pipe), not a results file; pass a regular file" in out
    assert f"added {good}" in out and "1 runs added, 0 already present, 1 files refused" in out
    folder = tmp_path / "folder"
    folder.mkdir()
    os.mkfifo(folder / "pipe.json")
    code, out, _ = _ingest(tmp_path, capsys, folder)
    assert code == 1 and f"refused {folder / 'pipe.json'}: is a FIFO" in out
    code, out, _ = _ingest(tmp_path, capsys, folder, good, "--exclude", "pipe*")
    assert code == 0 and "0 runs added, 1 already present, 0 files refused" in out


@pytest.mark.long
def test_a_fifo_never_blocks_a_real_ingest(tmp_path: Path, good: Path) -> None:
    """A fresh process, as a nightly job runs it: a FIFO nobody writes to is refused at once, not waited on."""
    os.mkfifo(tmp_path / "fifo.json")
    done = subprocess.run([sys.executable, "-m", "gpuperf", "history", "--history", str(tmp_path / "h.sqlite"),
                           "ingest", str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 1 and "is a FIFO (named pipe)" in done.stdout and "1 runs added" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_folder_with_no_results_file_is_an_error_not_a_silent_pass(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    named = tmp_path / "results.json"  # a folder named like a file
    named.mkdir()
    code, out, err = _ingest(tmp_path, capsys, named)
    assert code == 1 and out == ""
    assert err.strip() == (f"gpuperf: error: {named}: a folder with no *.json file under it; name results/ "
                           "directories, results.json files or folders of them (evidence/fleet/)")
    write(named / "inner.json", document("2026-12-01T00:00:00+00:00", {"perf_tests/a": 1.0}))
    code, out, _ = _ingest(tmp_path, capsys, tmp_path)  # a folder named *.json inside one is walked, not refused
    assert code == 0 and "1 runs added, 0 already present, 0 files refused" in out


def test_a_device_is_refused_as_a_device(tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "null.json"
    link.symlink_to(os.devnull)
    for path in (Path(os.devnull), link):
        code, out, _ = _ingest(tmp_path, capsys, path, good)
        assert code == 1 and "1 files refused" in out
        assert f"refused {path}: is a character device (such as /dev/zero), not a results file; pass a regular " \
               "file" in out


def test_links_in_a_loop_or_to_nothing_are_named_so(tmp_path: Path, good: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.json").symlink_to("b.json")
    (tmp_path / "b.json").symlink_to("a.json")
    (tmp_path / "dangling.json").symlink_to("gone.json")
    code, out, err = _ingest(tmp_path, capsys, tmp_path / "a.json", tmp_path / "dangling.json", good)
    assert code == 1 and err == "" and "1 runs added, 0 already present, 2 files refused" in out
    assert f"refused {tmp_path / 'a.json'}: is a symbolic link that leads back to itself (a loop of links), not a " \
           "results file; fix the link or pass the file itself" in out
    assert f"refused {tmp_path / 'dangling.json'}: is a symbolic link to gone.json, which does not exist; point " \
           "the link at a results file or pass the file itself" in out
    code, out, _ = _ingest(tmp_path, capsys, tmp_path)  # found in a folder: refused alike
    assert code == 1 and "3 files refused" in out and out.count("is a symbolic link") == 3


def test_an_unreadable_file_is_named_with_the_fix(tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    locked = write(tmp_path / "locked.json", document("2026-12-02T00:00:00+00:00", {"perf_tests/a": 1.0}))
    locked.chmod(0)
    if os.geteuid() == 0:  # root reads it anyway: the refusal the kernel gives another user, made here
        opened = os.open

        def refuse(path: Any, *args: Any, **kwargs: Any) -> int:
            if Path(path) == locked:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return opened(path, *args, **kwargs)
        monkeypatch.setattr(reading.os, "open", refuse)
    code, out, _ = _ingest(tmp_path, capsys, locked, good)
    assert code == 1 and "1 runs added, 0 already present, 1 files refused" in out
    assert f"refused {locked}: cannot be read: permission denied; make it readable (chmod a+r) or pass another " \
           "file" in out


def _hostile_series(folder: Path) -> None:
    rng = random.Random(3)
    for number in range(1, 13):
        slow = number >= 9
        write(folder / f"run-{number:02d}.json",
              document(f"2026-12-01T{number:02d}:00:00+00:00",
                       {HOSTILE_CASE: 700.0 * (0.95 if slow else 1.0) * (1 + rng.gauss(0, 0.003))},
                       commit=f"{number:02d}" + "ab" * 19,
                       kernels={HOSTILE_CASE: HOSTILE_KERNEL + ("x" if slow else "")}))


@pytest.mark.long
def test_show_and_changes_print_a_hostile_case_and_kernel_escaped(tmp_path: Path) -> None:
    _hostile_series(tmp_path / "results")
    target = str(tmp_path / "h.sqlite")

    def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "gpuperf", "history", "--history", target, *args],
                              capture_output=True, timeout=120, cwd=ROOT)

    assert cli("ingest", str(tmp_path / "results")).returncode == 0
    shown = cli("show", "test_gemm_perf")
    changes = cli("changes")
    assert shown.returncode == 0 and changes.returncode == 1
    for out in (shown.stdout, changes.stdout):
        assert b"\x1b" not in out and b"\x07" not in out and "\u202e".encode() not in out
        assert b"\\x1b]0;owned\\x07\\nPASS\\u202e]" in out  # the case id, escaped, on its own line's place
    lines = shown.stdout.decode().splitlines()
    assert lines[0] == "perf_tests/test_gemm.py::test_gemm_perf[\\x1b]0;owned\\x07\\nPASS\\u202e]"
    assert len(lines) == 2 + 12 + 1
    (slowdown,) = [line for line in changes.stdout.decode().splitlines() if line.startswith("SLOWDOWN")]
    assert "kernels changed: sm90_gemm\\x1b[31m → sm90_gemm\\x1b[31mx" \
        in slowdown
