"""The stopping rule's docs table (``output/stopping_table.py``, ``tools/evidence/stopping_table.py``) from synthetic
results files: per family, samples, GPU time and the interval reached relative to the band, over runs of several
GPUs."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuperf.output.stopping_table import (END, START, StoppingError, family_rows, replace_stopping_section,
                                           stopping_section)
from gpuperf.store.records import Record, RunInfo
from gpuperf.store.results import write_results
from gpuperf.vocabulary import Status

ROOT = Path(__file__).resolve().parents[1]
INFO = RunInfo("NVIDIA H200", "nvidia-h200", "9.0", "580.159.04", "13.2", "13.1.0", "14.2.0", 1980, 3201,
               ("cold",), "2026-12-02T10:00:00+00:00", extra={"uuid": "GPU-aaaaaaaa-0000"})


def sampling(samples: int, gpu_s: float, interval: float, band: float = 0.04, basis: str = "time",
             reason: str = "converged") -> dict[str, Any]:
    return {"samples": samples, "gpu_s": gpu_s, "basis": basis, "interval": interval, "target": 0.25 * band,
            "band": band, "reason": reason}


def record(case: str, family: str, data: dict[str, Any] | None) -> Record:
    return Record(case_id=case, nodeid=case, family=family, params={}, metric="TFLOPS", value=50.0, unit="TFLOPS",
                  precision="fp32", status=Status.PASS, extra={"sampling": data} if data is not None else {})


def run(uuid: str, scale: float = 1.0) -> tuple[RunInfo, list[Record]]:
    return replace(INFO, extra={"uuid": uuid}), [
        record("t.py::test_gemm[a]", "gemm", sampling(10, 0.01 * scale, 0.002)),
        record("t.py::test_gemm[b]", "gemm", sampling(40, 0.5 * scale, 0.012, reason="cap")),
        record("t.py::test_gemm[c]", "gemm", sampling(10, 0.02, 0.0001, band=0.03, basis="cycles")),
        record("t.py::test_gemv[a]", "gemv", sampling(12, 0.004, 0.006)),
        record("t.py::test_gemm[a]#ratio", "gemm", None),  # a ratio: no stopping data of its own
    ]


def test_each_family_has_its_samples_gpu_time_and_interval_over_the_band() -> None:
    rows = {row.family: row for row in family_rows([run("GPU-1"), run("GPU-2", 2.0), run("GPU-3")])}
    gemm, gemv, total = rows["gemm"], rows["gemv"], rows["all"]
    assert (gemm.gpus, gemm.runs, gemm.records) == (3, 3, 9)
    assert gemm.samples == (10, 40) and gemm.on_cycles == 3
    assert gemm.gpu_s[1] == pytest.approx(1.0) and gemm.gpu_s[0] == pytest.approx(0.02)
    assert gemm.gpu_s_per_run == pytest.approx((0.53 * 2 + 1.04) / 3)
    assert gemm.relative[0] == pytest.approx(0.05) and gemm.relative[1] == pytest.approx(0.3)
    assert dict(gemm.reasons) == {"converged": 6, "cap": 3}
    assert gemv.samples == (12, 12) and gemv.relative == (pytest.approx(0.15), pytest.approx(0.15))
    assert total.records == 12 and total.gpus == 3


def test_a_record_whose_stopping_data_is_not_what_the_rule_writes_is_left_out() -> None:
    info, records = run("GPU-1")
    odd = [record("t.py::x", "gemm", {"samples": "many", "gpu_s": 0.1}), record("t.py::y", "gemm", "converged"),
           record("t.py::z", "gemm", {"samples": 10, "gpu_s": 0.1, "interval": None, "band": None})]
    rows = {row.family: row for row in family_rows([(info, records + odd)])}
    assert rows["gemm"].records == 4 and rows["gemm"].relative[1] == pytest.approx(0.3)


def test_runs_without_stopping_data_name_the_fix() -> None:
    info, records = run("GPU-1")
    with pytest.raises(StoppingError, match="extra.sampling.*perf_tests --gate"):
        family_rows([(info, [replace(r, extra={}) for r in records])])


def test_the_section_names_its_runs_and_gpus() -> None:
    text = stopping_section([run("GPU-11111111-2222"), run("GPU-33333333-4444")], ["a/results.json", "b"])
    lines = text.splitlines()
    assert lines[0] == START and lines[-1] == END
    assert "From 2 runs on 2 GPUs (GPU-11111111, GPU-33333333): a/results.json, b." in text
    assert "| family | GPUs | records | samples median / max |" in text
    assert "| gemm | 2 | 6 | 10 / 40 | 20 / 500 |" in text


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "evidence" / "stopping_table.py"), *args],
                          capture_output=True, text=True, check=False, cwd=ROOT)


def test_the_tool_prints_and_writes_the_section_of_a_page(tmp_path: Path) -> None:
    folders = []
    for number, uuid in enumerate(("GPU-1", "GPU-2", "GPU-3")):
        folder = tmp_path / f"run{number}"
        folder.mkdir()
        write_results(folder, *run(uuid))
        folders.append(str(folder))
    printed = tool(*folders)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith(START) and "| all | 3 | 12 |" in printed.stdout
    page = tmp_path / "measuring.md"
    page.write_text(f"# How\n\nbefore\n{START}\nold\n{END}\nafter\n", encoding="utf-8")
    written = tool(*folders, "--page", str(page))
    assert written.returncode == 0, written.stderr
    text = page.read_text(encoding="utf-8")
    assert "old" not in text and text.startswith("# How\n\nbefore\n" + START) and text.endswith(END + "\nafter\n")
    assert printed.stdout.strip() in text


@pytest.mark.long
def test_the_tool_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    missing = tool(str(tmp_path / "nothing.json"))
    assert missing.returncode == 2 and missing.stderr.startswith("tools/evidence/stopping_table.py: ")
    assert len(missing.stderr.strip().splitlines()) == 1 and "Traceback" not in missing.stderr
    folder = tmp_path / "run"
    folder.mkdir()
    info, records = run("GPU-1")
    write_results(folder, info, [replace(r, extra={}) for r in records])
    empty = tool(str(folder))
    assert empty.returncode == 2 and "extra.sampling" in empty.stderr
    write_results(folder, *run("GPU-1"))
    page = tmp_path / "page.md"
    page.write_text("no markers\n", encoding="utf-8")
    unmarked = tool(str(folder), "--page", str(page))
    assert unmarked.returncode == 2 and "markers" in unmarked.stderr and page.read_text() == "no markers\n"


def test_the_measuring_page_has_the_section_the_tool_writes() -> None:
    page = (ROOT / "evidence" / "measuring.md").read_text(encoding="utf-8")
    section = stopping_section([run("GPU-1")], ["run1/results.json"])
    assert section in replace_stopping_section(page, section)


def test_the_measuring_page_s_table_is_the_committed_recording_runs(tmp_path: Path) -> None:
    """evidence/measuring.md's table and the figures its text quotes are rebuilt from the three GPUs' gate runs under
    evidence/fleet/recording/ by the command the page gives."""
    recording = ROOT / "evidence" / "fleet" / "recording"
    runs = sorted(str(path.relative_to(ROOT)) for path in recording.glob("*-gate.json"))
    assert len(runs) == 3
    page = (ROOT / "evidence" / "measuring.md").read_text(encoding="utf-8")
    copy = tmp_path / "measuring.md"
    copy.write_text(page, encoding="utf-8")
    out = subprocess.run([sys.executable, "tools/evidence/stopping_table.py", *runs, "--page", str(copy)], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert copy.read_text(encoding="utf-8") == page
    text = " ".join(page.split())
    assert "every one of 420 traced records converged" in text and "| all | 3 | 420 |" in page
    assert "0.01 / 0.16 | 137 | 420 / 0 / 0 |" in page and "0.16 of it at worst" in text
