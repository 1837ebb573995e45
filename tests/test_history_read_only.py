"""A history the user may read but not write (a file and folder of another user, a read-only mount): the reading
commands read it as it is, and a writing one says it cannot write there, with the fix (issue 54)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuperf.cli import main
from history_support import ROOT

RUNS = [ROOT / "evidence" / "fleet" / "1e941103-1.json", ROOT / "evidence" / "fleet" / "1e941103-2.json"]
CASE = "strided-fp32-1024x256x256x256-cold"


@pytest.fixture
def read_only_history(tmp_path: Path) -> Iterator[Path]:
    """A history in a folder this process can read but not write: by its modes, or, for root (whom modes do not
    stop), through a read-only bind mount of it."""
    folder = tmp_path / "hist"
    folder.mkdir()
    assert main(["history", "ingest", *map(str, RUNS), "--history", str(folder / "h.sqlite")]) == 0
    if os.geteuid() != 0:
        (folder / "h.sqlite").chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
        yield folder / "h.sqlite"
        folder.chmod(stat.S_IRWXU)
        return
    mounted = tmp_path / "ro"
    mounted.mkdir()
    done = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(mounted)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"root, and no read-only bind mount here ({done.stderr.strip()}): nothing is read-only to root")
    try:
        yield mounted / "h.sqlite"
    finally:
        subprocess.run(["umount", str(mounted)], check=False)


def _gpuperf(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("GPUPERF_HISTORY", "CI")}
    return subprocess.run([sys.executable, "-m", "gpuperf", *args], cwd=cwd, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT)}, timeout=300, check=False)


@pytest.mark.long
def test_reading_commands_read_a_history_they_cannot_write(read_only_history: Path, tmp_path: Path) -> None:
    before = read_only_history.read_bytes()
    changes = _gpuperf(tmp_path, "history", "changes", "--history", str(read_only_history))
    assert changes.returncode == 0 and "series over 2 runs" in changes.stdout, changes.stderr
    show = _gpuperf(tmp_path, "history", "show", CASE, "--history", str(read_only_history))
    assert show.returncode == 0 and "2 runs of this case" in show.stdout, show.stderr
    page = _gpuperf(tmp_path, "history", "page", "--history", str(read_only_history), "--out", str(tmp_path / "site"))
    assert page.returncode == 0 and (tmp_path / "site" / "index.html").is_file(), page.stderr
    assert read_only_history.read_bytes() == before


@pytest.mark.long
def test_ingest_into_a_history_it_cannot_write_says_so_in_one_line(read_only_history: Path, tmp_path: Path) -> None:
    done = _gpuperf(tmp_path, "history", "ingest", str(ROOT / "evidence" / "fleet" / "3da77131-1.json"), "--history",
                    str(read_only_history))
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"gpuperf: error: history {read_only_history}: can be read but not written here (")
    assert "make it writable or pass --history a copy in a writable folder" in done.stderr
