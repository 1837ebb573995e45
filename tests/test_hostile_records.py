"""Records a hostile or failed run holds, through every command that reads results files (``python -m gpuperf`` in
a subprocess, as a user runs it): a record with no figure is the row it is, never a traceback; a figure whose
precision has no peak is refused by the results reader, so no command takes it without the above-peak rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "evidence" / "fleet" / "1e941103-1.json"
CASE = "perf_tests/test_batched.py::test_batched_gemm_perf[strided-fp32-1024x256x256x256-cold]"


def _gpuperf(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuperf", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "GPUPERF_HISTORY": "none"},
                          check=False)


def _edited_run(path: Path, **first_record: Any) -> Path:
    """The committed H200 run as another, later run, its first record (an fp32 GEMM) edited."""
    data = json.loads(RUN.read_text())
    data["run"]["started"] = "2026-11-30T12:59:00+00:00"
    assert data["records"][0]["case_id"] == CASE
    data["records"][0].update(first_record)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.long
@pytest.mark.parametrize(("status", "code"), [("ERROR", 1), ("UNRELIABLE", 0), ("NOT_COMPARABLE", 0),
                                              ("NOT_RECORDED", 0)])
def test_compare_shows_a_record_without_a_figure_as_its_own_row(tmp_path: Path, status: str, code: int) -> None:
    """A failed gate run's file (an ERROR record, value null, as ``write_run`` writes it) and the other statuses
    that may hold no figure: the row keeps its run's verdict; an ERROR fails the comparison."""
    run = _edited_run(tmp_path / "b.json", value=None, status=status, note="the call could not be timed")
    done = _gpuperf(tmp_path, "compare", str(RUN), str(run))
    assert done.returncode == code and "Traceback" not in done.stderr, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith(CASE)]
    assert row.split()[1:5] == ["TFLOPS", "46.66", "–", "–"] and status in row
    assert "no figure in B, so not judged against A" in row and "the call could not be timed" in row
    assert done.stdout.splitlines()[-1].startswith("123 compared:")


@pytest.mark.long
def test_commands_that_keep_clean_figures_pass_over_a_record_without_one(tmp_path: Path) -> None:
    run = _edited_run(tmp_path / "b.json", value=None, status="ERROR")
    for args in (["fleet", str(RUN), str(run)], ["baseline", "diff", str(RUN), str(run)]):
        done = _gpuperf(tmp_path, *args)
        assert done.returncode == 0 and done.stderr == "", (args, done.stderr)


UNKNOWN = "precision {!r} is not one the peak table knows (fp32, tf32, fp16, bf16, fp64, fp8, int8)"
COMMANDS = {"compare": ["compare", str(RUN), "b.json"], "fleet": ["fleet", str(RUN), "b.json"],
            "readme": ["readme", "b.json", "--page", "page.md"], "plot": ["plot", "b.json", "--out", "plots"],
            "ingest": ["history", "ingest", "b.json", "--history", "h.sqlite"]}


@pytest.mark.long
@pytest.mark.parametrize(("precision", "command", "message"), [
    ("fp4", "compare", UNKNOWN.format("fp4")), ("", "fleet", UNKNOWN.format("")),
    ("FP8", "readme", UNKNOWN.format("FP8")), ("FP8", "ingest", UNKNOWN.format("FP8")),
    ("fp8", "plot", "precision 'fp8' has no peak in the run's header (it lists fp32, tf32, fp16, bf16, fp64)")])
def test_a_figure_whose_precision_has_no_peak_is_refused_by_every_command(tmp_path: Path, precision: str,
                                                                         command: str, message: str) -> None:
    """5,000 TFLOPS in a precision the peak table (or the file's header: the committed run's lists no fp8 peak)
    does not know: refused where the file is read (``store/results.py``), so compare, fleet, readme, plot and
    history ingest each say so; nothing is written."""
    _edited_run(tmp_path / "b.json", value=5000.0, tflops=5000.0, precision=precision, peak=None, status="PASS")
    page = "<!-- gpuperf:results:start -->\n<!-- gpuperf:results:end -->\n"
    (tmp_path / "page.md").write_text(page)
    done = _gpuperf(tmp_path, *COMMANDS[command])
    shown = done.stderr + done.stdout
    assert done.returncode == 1 and "Traceback" not in shown, shown
    assert f"b.json: records[0] ({CASE}): {message}" in shown, shown
    assert "re-run the suite (pytest perf_tests) or restore the file" in shown, shown
    assert not (tmp_path / "plots").exists() and (tmp_path / "page.md").read_text() == page
    assert not (tmp_path / "h.sqlite").exists() or command == "ingest"


def test_an_older_file_without_precisions_is_held_to_each_record_s_own_peak(tmp_path: Path) -> None:
    """Files written before records named their precision (``evidence/fleet/events/``) still read: each TFLOPS record
    carries its own peak. One that carries neither is refused."""
    older = REPO / "evidence" / "fleet" / "events" / "7b1b7567-1.json"
    assert _gpuperf(tmp_path, "fleet", str(older), str(REPO / "evidence" / "fleet" / "events" / "cce817af-1.json")) \
        .returncode == 0
    data = json.loads(older.read_text())
    data["records"][0].update(peak=None, value=5000.0)
    (tmp_path / "b.json").write_text(json.dumps(data))
    done = _gpuperf(tmp_path, "compare", str(older), "b.json")
    assert done.returncode == 1 and "names no precision and no peak of its own" in done.stderr, done.stderr
