"""The SM clock and the figure at max clock in what a run writes: the terminal table, summary.md, results.json and
results.csv."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuperf.measure.kernel_records import Kernel
from gpuperf.output import table
from gpuperf.output.report import format_table
from gpuperf.output.results import summary_markdown, write_run
from gpuperf.store.results import load_run, results_csv_text
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Status

RUN = RunInfo("NVIDIA H200", "nvidia-h200", "9.0", "580.159.04", "13.2", "13.1.0", "14.2.0", 1980, 3201, ("cold",),
              "2026-11-30T10:00:00+00:00")
CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp16-nn-8192x8192x8192-cold]"


def record(**kw: Any) -> Record:
    return Record(case_id=CASE, nodeid=CASE, family="gemm", params={"dtype": "fp16"}, metric="TFLOPS",
                  value=kw.pop("value", 600.0), unit="TFLOPS", status=kw.pop("status", Status.PASS),
                  clock_bound=kw.pop("clock_bound", True), **{"precision": "fp16", **kw})


def cells(r: Record) -> dict[str, str]:
    """The terminal row's cells by column title (the note left out: it holds spaces)."""
    lines = format_table([r]).splitlines()
    header = [column.title for column in report_columns()]
    values = lines[2].split()
    return dict(zip(header[:-1], values[:len(header) - 1]))


def report_columns() -> tuple[table.Column[Record], ...]:
    from gpuperf.output.report import TABLE_COLUMNS
    return TABLE_COLUMNS


def test_a_case_judged_on_time_shows_its_figure_at_max_clock_unstarred() -> None:
    row = cells(record(call_clock_mhz=1975.4, value_at_max_clock=601.5, judged_on="time", baseline=598.0,
                       delta_pct=0.3))
    assert row["MHz"] == "1975" and row["@max clk"] == "601.5"


def test_a_figure_at_max_clock_is_starred_only_when_the_verdict_compared_it() -> None:
    judged = record(call_clock_mhz=1412.6, value_at_max_clock=840.0, judged_on="cycles")
    assert cells(judged)["@max clk"] == "840.0*"
    assert cells(replace(judged, judged_on=""))["@max clk"] == "840.0"  # not judged (no baseline)


def test_a_memory_bound_case_has_no_figure_at_max_clock() -> None:
    """An SM-clock scaling of a figure the SM clock does not set: FP16 GEMV opN 16384² read 4824 GB/s "at max
    clock", above the H200's 4814 GB/s memory peak, in a results file written before the rule."""
    gemv = record(call_clock_mhz=1930.0, value_at_max_clock=4824.0, judged_on="time", clock_bound=False)
    assert cells(gemv)["@max clk"] == table.MISSING
    assert cells(replace(gemv, clock_bound=None))["@max clk"] == table.MISSING  # no peaks: not known to be bound
    text = summary_markdown(RUN, [gemv])
    assert "4824" not in text


def test_missing_clock_figures_are_a_dash() -> None:
    no_free = cells(record(call_clock_mhz=1412.6, value_at_max_clock=None, judged_on="time"))
    assert no_free["MHz"] == "1413" and no_free["@max clk"] == table.MISSING
    no_clock = cells(record(call_clock_mhz=None, value_at_max_clock=840.0, judged_on="cycles"))
    assert no_clock["MHz"] == table.MISSING and no_clock["@max clk"] == "840.0*"
    neither = cells(record())
    assert neither["MHz"] == table.MISSING and neither["@max clk"] == table.MISSING


def test_summary_md_shows_the_clock_and_the_starred_figure() -> None:
    text = summary_markdown(RUN, [record(call_clock_mhz=1412.6, value_at_max_clock=840.0, judged_on="cycles",
                                         baseline=640.0, delta_pct=-0.4)])
    header = next(line for line in text.splitlines() if line.startswith("| case"))
    titles = [cell.strip() for cell in header.strip("|").split("|")]
    row = next(line for line in text.splitlines() if line.startswith(f"| `{CASE}`"))
    values = [cell.strip() for cell in row.strip("|").split("|")]
    by_title = dict(zip(titles, values))
    assert by_title["MHz"] == "1413" and by_title["@max clk"] == "840.0\\*" and by_title["measured"] == "600.0"


def test_results_files_carry_the_cycles_clock_and_basis(tmp_path: Path) -> None:
    kernel = Kernel(name="mma_hgemm", grid=(64, 32, 1), block=(128, 1, 1), median_us=812.5, code="0123456789ab")
    r = record(cycles_per_call=1.6432e6, cycles_rel_iqr=0.0031, call_clock_mhz=1397.45, value_at_max_clock=842.1,
               max_clock_mhz=1980, clock_bound=True, judged_on="cycles", kernels=(kernel,))
    files = write_run(tmp_path / "run", RUN, [r])
    _, [loaded] = load_run(files.directory)
    assert loaded == r
    assert loaded.kernels[0].code == "0123456789ab"
    [row] = csv.DictReader(io.StringIO(results_csv_text([r], RUN)))
    assert (row["cycles_per_call"], row["call_clock_mhz"], row["value_at_max_clock"], row["judged_on"],
            row["clock_bound"], row["max_clock_mhz"]) == ("1643200.0", "1397.45", "842.1", "cycles", "true", "1980")
