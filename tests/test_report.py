"""``gpuperf.output.report`` and what it renders through: ``gpuperf.output.table`` (the column spec, the number formatters,
the status order and icons, the plain-text and Markdown renderers, the peaks line) and ``gpuperf.output.diff`` (the
old → new rows shared by ``baseline diff``, ``--update-baselines`` and ``compare``)."""

from __future__ import annotations

from dataclasses import replace

import math
from typing import Any

import pytest

from gpuperf.output import diff, table
from gpuperf.store.baseline import Change, Entry
from gpuperf.verdict.gate import FLAGGED, STATUS_ORDER
from gpuperf.store.records import Record, RunInfo
from gpuperf.output.report import (TABLE_COLUMNS, comparison_summary, diff_summary, format_changes, format_diff, format_table,
                            header_lines, status_counts)
from gpuperf.vocabulary import Status

RUN = RunInfo(gpu_name="NVIDIA H200", gpu_slug="nvidia-h200", compute_capability="9.0", driver="580.159.04",
              cuda_runtime="13.0", cublas="13.1.0", cupy="14.0.0", sm_clock_max_mhz=1980, mem_clock_mhz=3201,
              flush_modes=("cold", "hot"), started="2025-01-01T00:00:00+00:00")


def record(case: str, status: str, value: float = 50.0, **kw: Any) -> Record:
    return Record(case_id=case, nodeid=case, family="gemm", params={}, metric=kw.pop("metric", "TFLOPS"),
                  value=value, unit="TFLOPS", status=status, **kw)


def rows(text: str) -> list[str]:
    return text.splitlines()[2:]  # after the header and the rule


def test_header_lines_name_gpu_versions_clocks_and_flush() -> None:
    text = "\n".join(header_lines(RUN))
    for needle in ("NVIDIA H200", "nvidia-h200", "sm_90", "driver 580.159.04", "CUDA 13.0", "cuBLAS 13.1.0",
                   "CuPy 14.0.0", "SM max 1980 MHz", "memory 3201 MHz", "flush cold, hot"):
        assert needle in text, needle


def test_header_lines_show_peaks_when_known() -> None:
    run = RunInfo(**{**RUN.to_dict(), "flush_modes": ("cold",),
                     "extra": {"peaks": {"memory_gbps": 4814.3,
                                         "compute_tflops": {"fp32": 66.9, "tf32": 535.3, "bf16": None}}}})
    lines = header_lines(run)
    assert len(lines) == 3
    assert "fp32 66.9" in lines[2] and "tf32 535.3" in lines[2]
    assert "bf16" not in lines[2]  # no such unit: not shown
    assert "4814 GB/s" in lines[2]
    assert len(header_lines(RUN)) == 2


def test_table_has_the_header_columns() -> None:
    text = format_table([record("a", Status.PASS)])
    header = text.splitlines()[0].split()
    assert [c.title for c in TABLE_COLUMNS] == ["case", "metric", "measured", "spread %", "MHz", "@max clk",
                                                "baseline", "Δ %", "% peak", "status", "note"]
    assert header == ["case", "metric", "measured", "spread", "%", "MHz", "@max", "clk", "baseline", "Δ", "%", "%",
                      "peak", "status", "note"]
    assert set(text.splitlines()[1]) <= {"-", " "}


def test_problems_first_then_by_case_id() -> None:
    records = [record("z-pass", Status.PASS), record("b-improved", Status.IMPROVED),
               record("y-regressed", Status.REGRESSED), record("a-pass", Status.PASS),
               record("c-missing", Status.NO_BASELINE), record("d-anomaly", Status.ANOMALY),
               record("e-unreliable", Status.UNRELIABLE), record("f-updated", Status.UPDATED)]
    order = [line.split()[0] for line in rows(format_table(records))]
    assert order == ["y-regressed", "d-anomaly", "e-unreliable", "c-missing", "b-improved", "f-updated",
                     "a-pass", "z-pass"]
    assert STATUS_ORDER[0] == Status.REGRESSED and STATUS_ORDER[-1] == Status.PASS


def test_row_formatting_of_numbers_and_delta() -> None:
    r = record("case", Status.REGRESSED, value=45.123456, baseline=50.0, delta_pct=-9.7531, pct_of_peak=67.44,
               rel_iqr=0.00456, note="9.8 % below baseline")
    line = rows(format_table([r]))[0]
    cells = line.split()
    assert cells[:10] == ["case", "TFLOPS", "45.12", "0.46", "–", "–", "50.00", "-9.8", "67.4", "REGRESSED"]
    assert line.endswith("9.8 % below baseline")


def test_positive_delta_has_a_plus_and_missing_values_a_dash() -> None:
    improved = rows(format_table([record("c", Status.IMPROVED, baseline=40.0, delta_pct=25.0)]))[0].split()
    assert improved[7] == "+25.0"
    missing = rows(format_table([record("c", Status.NO_BASELINE)]))[0].split()
    assert missing[3:9] == ["–", "–", "–", "–", "–", "–"]  # spread, MHz, @max clk, baseline, Δ %, % peak


def test_a_case_judged_on_cycles_shows_its_clock_and_starred_figure_at_max_clock() -> None:
    r = replace(record("case", Status.PASS, value=600.0, baseline=640.0, delta_pct=-0.4), call_clock_mhz=1412.6,
                value_at_max_clock=840.0, judged_on="cycles", clock_bound=True)
    cells = rows(format_table([r]))[0].split()
    assert cells[4:6] == ["1413", "840.0*"]


def test_columns_are_aligned() -> None:
    text = format_table([record("short", Status.PASS, value=1.0, delta_pct=0.5),
                          record("a-much-longer-case-id", Status.REGRESSED, value=12345.0, delta_pct=-12.25)])
    lines = text.splitlines()
    assert len({line.index(status) for line, status in zip(lines[2:], ("REGRESSED", "PASS"))}) == 1  # left
    measured_ends = {line.index(value) + len(value) for line, value in zip(lines[2:], ("12345", "1.000"))}
    assert len(measured_ends) == 1  # numbers right-aligned
    assert lines[2].startswith("a-much-longer-case-id  ")
    assert lines[3].startswith("short" + " " * (len("a-much-longer-case-id") - len("short")) + "  ")


def test_long_notes_are_clipped() -> None:
    text = format_table([record("c", Status.ANOMALY, note="x" * 500)], max_note=40)
    line = rows(text)[0]
    assert line.endswith("x" * 39 + "…")
    assert "x" * 40 not in line


def test_status_counts() -> None:
    records = [record("a", Status.PASS), record("b", Status.PASS), record("c", Status.REGRESSED)]
    assert status_counts(records) == "1 regressed, 2 pass"
    assert status_counts([]) == ""


def test_format_changes_shows_added_and_signed_delta() -> None:
    new = Entry(metric="GB/s", value=4100.0, unit="GB/s")
    changes = [Change("gemv-case", Entry(metric="GB/s", value=4000.0, unit="GB/s"), new),
               Change("brand-new-case", None, Entry(metric="TFLOPS", value=51.5, unit="TFLOPS"))]
    lines = format_changes(changes).splitlines()
    assert lines[0].split() == ["case", "metric", "old", "new", "Δ", "%"]
    assert lines[2].split() == ["brand-new-case", "TFLOPS", "–", "51.50", "added"]
    assert lines[3].split() == ["gemv-case", "GB/s", "4000", "4100", "+2.5"]


def test_format_changes_of_a_slowdown() -> None:
    change = Change("c", Entry(metric="TFLOPS", value=50.0, unit="TFLOPS"),
                    Entry(metric="TFLOPS", value=45.0, unit="TFLOPS"))
    assert format_changes([change]).splitlines()[2].split()[-1] == "-10.0"


def test_format_changes_is_the_baseline_diff_table() -> None:
    """``--update-baselines`` and ``baseline diff`` print one table, from one implementation."""
    old = Entry(metric="GB/s", value=4000.0, unit="GB/s")
    new = Entry(metric="GB/s", value=3900.0, unit="GB/s")
    added = Entry(metric="TFLOPS", value=51.5, unit="TFLOPS")
    from_changes = format_changes([Change("a", None, added), Change("g", old, new)])
    assert from_changes == format_diff(diff.diff_entries({"g": old}, {"g": new, "a": added}))


# -- table: formatters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [
    (None, "–"), (math.nan, "–"), (math.inf, "–"), (-math.inf, "–"), (0.0, "0"),
    (4814.3, "4814"), (45.123456, "45.12"), (800.0, "800.0"), (0.5213, "0.5213"), (0.01234, "0.01234"),
    (123456.7, "123457"), (98765432.1, "98765432"),  # large: every integer digit, never an exponent
    (0.000123456, "1.235e-04"), (1.2e-9, "1.200e-09"),  # tiny: an exponent, not a run of zeros
    (-3.21, "-3.210"),
])
def test_format_number(value: float | None, text: str) -> None:
    assert table.format_number(value) == text


@pytest.mark.parametrize(("pct", "text"), [(2.5, "+2.5"), (-9.7531, "-9.8"), (0.04, "0.0"), (-0.04, "0.0"),
                                           (1234.56, "+1234.6"), (None, "–"), (math.nan, "–")])
def test_format_delta(pct: float | None, text: str) -> None:
    assert table.format_delta(pct) == text


def test_format_percent_and_spread() -> None:
    assert table.format_percent(67.44) == "67.4" and table.format_percent(None) == "–"
    assert table.format_percent(math.inf) == "–"
    assert table.format_spread(0.00456) == "0.46" and table.format_spread(None) == "–"
    assert table.format_spread(math.nan) == "–"


def test_peaks_line_is_one_line_for_every_place_it_appears() -> None:
    peaks = {"memory_gbps": 4814.3, "compute_tflops": {"fp32": 66.9, "tf32": 535.3, "bf16": None}}
    assert table.peaks_line(peaks) == "TFLOPS fp32 66.9, tf32 535.3 | memory 4814 GB/s"
    assert table.peaks_line({"memory_gbps": 1000.0}) == "memory 1000 GB/s"
    assert table.peaks_line(None) == "" and table.peaks_line({}) == ""
    run = RunInfo(**{**RUN.to_dict(), "flush_modes": ("cold",), "extra": {"peaks": peaks}})
    assert header_lines(run)[2] == f"gpuperf: peaks {table.peaks_line(peaks)}"


# -- table: statuses --------------------------------------------------------------------------------------


def test_every_status_has_an_icon_and_a_place_in_the_gate_order() -> None:
    statuses = {value for name, value in vars(Status).items() if name.isupper() and isinstance(value, str)}
    assert set(table.STATUS_ICONS) == statuses
    assert set(STATUS_ORDER) == statuses


def test_status_order_is_the_gate_s() -> None:
    records = [record(f"c{i}", status) for i, status in enumerate(reversed(STATUS_ORDER))]
    assert [r.status for r in table.by_status(records)] == list(STATUS_ORDER)
    counted = table.count_statuses([Status.PASS, "SOMETHING_NEW", Status.REGRESSED, Status.PASS])
    assert counted == [(Status.REGRESSED, 1), (Status.PASS, 2), ("SOMETHING_NEW", 1)]
    assert table.counts_text([Status.PASS, Status.ERROR]) == "1 error, 1 pass"


# -- table: columns and renderers -------------------------------------------------------------------------


def test_the_record_column_spec() -> None:
    by_title = {(c.title, c.align) for c in table.RECORD_COLUMNS}
    assert ("case", "left") in by_title and ("measured", "right") in by_title and ("Δ %", "right") in by_title
    r = record("perf_tests/test_gemm.py::test_gemm_perf[fp32-8x8x8-cold]", Status.IMPROVED, value=51.5,
               baseline=40.0, delta_pct=28.75, pct_of_peak=77.0, rel_iqr=0.0123, note="faster")
    cells = {c: c.cell(r) for c in table.RECORD_COLUMNS}
    assert cells[table.CASE] == r.case_id and cells[table.TEST] == "test_gemm_perf[fp32-8x8x8-cold]"
    assert [cells[c] for c in (table.MEASURED, table.BASELINE, table.DELTA, table.PEAK, table.SPREAD)] == \
        ["51.50", "40.00", "+28.8", "77.0", "1.23"]
    assert table.STATUS.markdown_cell(r) == "⬆️ IMPROVED" and table.STATUS.cell(r) == "IMPROVED"
    assert table.CASE.markdown_cell(r) == f"`{r.case_id}`"


def test_a_subset_of_columns_renders_only_those() -> None:
    r = record("c", Status.PASS, value=3916.4, pct_of_peak=81.35, rel_iqr=0.0123)
    columns = (table.TEST, table.MEASURED, table.PEAK)
    assert table.render_text(columns, [r]).splitlines() == ["case  measured  % peak", "----  --------  ------",
                                                            "c         3916    81.3"]
    assert table.render_markdown(columns, [r]).splitlines() == ["| case | measured | % peak |",
                                                                "| --- | ---: | ---: |",
                                                                "| `c` | 3916 | 81.3 |"]


def test_markdown_escapes_pipes_and_shows_line_breaks_escaped() -> None:
    r = record("test_x[a|b]", Status.ANOMALY, note="above peak | cache-resident\nsecond line")
    line = table.render_markdown((table.CASE, table.STATUS, table.NOTE), [r]).splitlines()[2]
    assert line == "| `test_x[a\\|b]` | ❌ ANOMALY | above peak \\| cache-resident\\\\nsecond line |"
    assert line.replace("\\|", "").count("|") == 4


def test_clipped_column_cuts_long_cells_in_both_renderings() -> None:
    note = table.NOTE.clipped(10)
    r = record("c", Status.PASS, note="x" * 30)
    assert note.cell(r) == "x" * 9 + "…" and note.markdown_cell(r) == "x" * 9 + "…"
    assert note.title == "note" and table.NOTE.cell(r) == "x" * 30


def test_an_empty_table_is_its_header() -> None:
    assert table.render_text((table.CASE, table.STATUS), []).splitlines() == ["case  status", "----  ------"]
    assert len(table.render_markdown((table.CASE,), []).splitlines()) == 2


# -- diff: the old → new rows -----------------------------------------------------------------------------


def gbps(value: float, **kw: Any) -> Entry:
    return Entry(metric="GB/s", value=value, unit="GB/s", **kw)


def test_diff_entries_pairs_every_case() -> None:
    old = {"b": gbps(800.0), "a": gbps(100.0), "gone": gbps(1.0),
           "m": Entry(metric="TFLOPS", value=1.0, unit="TFLOPS")}
    new = {"a": gbps(110.0), "b": gbps(760.0), "new": gbps(2.0), "m": gbps(3.0)}
    rows = {r.case_id: r for r in diff.diff_entries(old, new)}
    assert [r.case_id for r in diff.diff_entries(old, new)] == ["a", "b", "gone", "m", "new"]
    assert rows["a"].delta_pct == pytest.approx(10.0) and rows["b"].delta_pct == pytest.approx(-5.0)
    assert (rows["gone"].change, rows["gone"].new) == (diff.REMOVED, None)
    assert (rows["new"].change, rows["new"].old) == (diff.ADDED, None)
    assert rows["m"].change == diff.METRIC_CHANGED and rows["m"].metric == "TFLOPS → GB/s"
    assert rows["m"].delta_pct is None


def test_delta_pct_needs_two_valid_figures() -> None:
    assert diff.delta_pct(50.0, 45.0) == pytest.approx(-10.0)
    assert diff.delta_pct(0.0, 1.0) is None and diff.delta_pct(1.0, math.nan) is None


def test_select_rows_keeps_changes_and_large_deltas() -> None:
    rows = diff.diff_entries({"a": gbps(100.0), "b": gbps(100.0), "c": gbps(1.0)},
                             {"a": gbps(101.0), "b": gbps(106.0), "d": gbps(1.0)})
    assert [r.case_id for r in diff.select_rows(rows, 5.0)] == ["b", "c", "d"]
    assert len(diff.select_rows(rows, 0.0)) == 4


def test_diff_summary_counts_moves_and_changes() -> None:
    rows = diff.diff_entries({"a": gbps(100.0), "b": gbps(100.0), "c": gbps(1.0)},
                             {"a": gbps(90.0), "b": gbps(103.0), "d": gbps(1.0)})
    assert diff_summary(rows, 5.0) == "2 compared; 0 higher and 1 lower by more than 5 %; 1 added; 1 removed"


def test_diff_table_in_text_and_markdown() -> None:
    rows = diff.diff_entries({"a": gbps(800.0), "gone": gbps(1.0)}, {"a": gbps(760.0)})
    text = format_diff(rows).splitlines()
    assert text[2].split() == ["a", "GB/s", "800.0", "760.0", "-5.0"]
    assert text[3].split() == ["gone", "GB/s", "1.000", "–", "removed"]
    markdown = format_diff(rows, markdown=True, old="A", new="B").splitlines()
    assert markdown[:3] == ["| case | metric | A | B | Δ % |", "| --- | --- | ---: | ---: | ---: |",
                            "| `a` | GB/s | 800.0 | 760.0 | -5.0 |"]


def test_comparison_table_and_summary() -> None:
    rows = [diff.DiffRow("r", "GB/s", 100.0, 90.0, -10.0, status=Status.REGRESSED, note="10.0 % below"),
            diff.DiffRow("p", "GB/s", 100.0, 100.0, 0.0, status=Status.PASS),
            diff.DiffRow("x", "GB/s", 1.0, None, change=diff.ONLY_IN_A, note="no valid figure in B")]
    text = format_diff(rows, old="A", new="B", verdicts=True).splitlines()
    assert text[0].split() == ["case", "metric", "A", "B", "Δ", "%", "status", "note"]
    assert text[2].split()[:6] == ["r", "GB/s", "100.0", "90.00", "-10.0", "REGRESSED"]
    assert text[4].split()[:6] == ["x", "GB/s", "1.000", "–", "–", "only"]
    markdown = format_diff(rows, markdown=True, old="A", new="B", verdicts=True)
    assert "| ❌ REGRESSED | 10.0 % below |" in markdown and "| only in A | no valid figure in B |" in markdown
    assert comparison_summary(rows) == "2 compared: 1 regressed, 1 pass; 1 only in A"
    assert comparison_summary([]) == "0 compared"


def test_flagged_and_failing_cover_every_status_that_needs_a_person() -> None:
    """What summary.md lists: nothing but PASS and UPDATED (and a dry run's DRY_RUN: it writes no summary.md) may
    be left out of both sections."""
    assert set(STATUS_ORDER) - Status.FAILING - FLAGGED == {Status.PASS, Status.UPDATED, Status.DRY_RUN}
