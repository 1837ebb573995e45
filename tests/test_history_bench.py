"""tools/generators/history_bench.py, as docs/history.md runs it, at a small scale: it writes the files, times the ingest, the
changes, the page (with its resident memory) and the suite-end appends in fresh processes, reuses files when asked, and refuses to time appends on a
database that holds them already."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "generators" / "history_bench.py"), "--runs", "70", "--cases", "3",
                           "--out", str(out), *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.long
def test_the_bench_times_each_target_and_reuses_what_it_is_told_to(tmp_path: Path) -> None:
    first = _bench(tmp_path, "--appends", "2")
    assert first.returncode == 0, first.stderr
    assert "files: 70 results files of 3 records written" in first.stdout
    ingested = re.search(r"ingest .*: 70 runs × 3 cases in ([\d.]+) s \(.*; ([\d.]+) CPU-seconds over \d+ cores, load "
                         r"[\d.]+, [\d.]+, [\d.]+ before, .* after\): .*70 runs added, 0 already present, 0 files refused",
                         first.stdout)
    assert ingested and float(ingested.group(2)) > 0
    assert re.search(r"history changes \(a fresh process, 3 times\): median [\d.]+ s .* in 3 series over 70 runs",
                     first.stdout)
    page = re.search(r"history page \(a fresh process, the whole history\): ([\d.]+) s, (\d+) MiB resident at most, "
                     r"([\d.]+) CPU-seconds over \d+ cores .*: gpuperf: trend site .*: 70 runs from", first.stdout)
    assert page and float(page.group(1)) > 0 and 30 < int(page.group(2)) < 2048 and float(page.group(3)) > 0
    assert (tmp_path / "site" / "index.html").is_file()
    appends = re.search(r"suite-end history .*: median ([\d.]+) s, max ([\d.]+) s over 2 processes .*3 records appended",
                        first.stdout)
    assert appends and 0 < float(appends.group(1)) <= float(appends.group(2))
    again = _bench(tmp_path, "--reuse-files", "--appends", "1")
    assert again.returncode == 0, again.stderr
    assert "files: reusing 70 results files" in again.stdout and "70 runs added" in again.stdout
    only = _bench(tmp_path, "--reuse-database", "--steps", "page")
    assert only.returncode == 0 and "history page" in only.stdout and "changes" not in only.stdout, only.stderr
    held = _bench(tmp_path, "--reuse-database", "--appends", "1")
    assert "ingest" not in held.stdout and "over 71 runs" in held.stdout
    assert "it holds this bench's runs already; time the appends on a fresh copy of the database" in held.stdout \
        + held.stderr


@pytest.mark.long
def test_a_timed_command_that_fails_ends_the_bench_with_its_output(tmp_path: Path) -> None:
    """The bench keeps the module path it is given (the packages may be installed there), and an ingest that
    fails is named with its output, not taken for a time."""
    (tmp_path / "files").mkdir()
    for number in range(3):
        (tmp_path / "files" / f"run-{number:06d}.json").write_text("{}")
    held = _bench(tmp_path, "--runs", "3", "--reuse-files", "--appends", "1")
    assert held.returncode != 0
    assert "history --history" in held.stderr and "ingest" in held.stderr and "failed (exit 1)" in held.stderr
    assert "not a gpuperf results file" in held.stderr
