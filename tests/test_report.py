"""``gpuperf.report``: the session header, the end-of-session table and the old → new update table."""

from __future__ import annotations

from typing import Any

from gpuperf.baseline import Change, Entry
from gpuperf.records import Record, RunInfo
from gpuperf.report import STATUS_ORDER, TABLE_COLUMNS, format_changes, format_table, header_lines, status_counts
from gpuperf.vocabulary import Status

RUN = RunInfo(gpu_name="NVIDIA H200", gpu_slug="nvidia-h200", compute_capability="9.0", driver="580.159.04",
              cuda_runtime="13.0", cublas="13.1.0", cupy="14.0.0", sm_clock_max_mhz=1980, mem_clock_mhz=3201,
              flush_modes=("cold", "hot"), started="2025-01-01T00:00:00+00:00")


def record(case: str, status: str, value: float = 50.0, **kw: Any) -> Record:
    return Record(case_id=case, nodeid=case, family="gemm", params={}, metric=kw.pop("metric", "TFLOPS"),
                  value=value, unit="TFLOPS", status=status, **kw)


def rows(table: str) -> list[str]:
    return table.splitlines()[2:]  # after the header and the rule


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
    table = format_table([record("a", Status.PASS)])
    header = table.splitlines()[0].split()
    assert TABLE_COLUMNS == ("case", "metric", "measured", "spread", "baseline", "Δ %", "% peak", "status", "note")
    assert header == ["case", "metric", "measured", "spread", "baseline", "Δ", "%", "%", "peak", "status", "note"]
    assert set(table.splitlines()[1]) <= {"-", " "}


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
    assert cells[:8] == ["case", "TFLOPS", "45.12", "0.46%", "50", "-9.8", "67.4", "REGRESSED"]
    assert line.endswith("9.8 % below baseline")


def test_positive_delta_has_a_plus_and_missing_values_a_dash() -> None:
    improved = rows(format_table([record("c", Status.IMPROVED, baseline=40.0, delta_pct=25.0)]))[0].split()
    assert improved[5] == "+25.0"
    missing = rows(format_table([record("c", Status.NO_BASELINE)]))[0].split()
    assert missing[3:7] == ["-", "-", "-", "-"]  # spread, baseline, Δ %, % peak


def test_columns_are_aligned() -> None:
    table = format_table([record("short", Status.PASS, value=1.0, delta_pct=0.5),
                          record("a-much-longer-case-id", Status.REGRESSED, value=12345.0, delta_pct=-12.25)])
    lines = table.splitlines()
    status_columns = {line.index(status) + len(status) for line, status in
                      zip(lines[2:], ("REGRESSED", "PASS"))}
    assert len(status_columns) == 1  # right-aligned in one column
    assert lines[2].startswith("a-much-longer-case-id  ")
    assert lines[3].startswith("short" + " " * (len("a-much-longer-case-id") - len("short")) + "  ")


def test_long_notes_are_clipped() -> None:
    table = format_table([record("c", Status.ANOMALY, note="x" * 500)], max_note=40)
    line = rows(table)[0]
    assert line.endswith("x" * 39 + "…")
    assert "x" * 40 not in line


def test_status_counts() -> None:
    records = [record("a", Status.PASS), record("b", Status.PASS), record("c", Status.REGRESSED)]
    assert status_counts(records) == "1 regressed, 2 pass"
    assert status_counts([]) == ""


def test_format_changes_shows_new_and_signed_delta() -> None:
    new = Entry(metric="GB/s", value=4100.0, unit="GB/s")
    changes = [Change("gemv-case", Entry(metric="GB/s", value=4000.0, unit="GB/s"), new),
               Change("brand-new-case", None, Entry(metric="TFLOPS", value=51.5, unit="TFLOPS"))]
    lines = format_changes(changes).splitlines()
    assert lines[0].split() == ["case", "metric", "old", "new", "Δ", "%"]
    assert lines[1].split() == ["gemv-case", "GB/s", "4000", "4100", "+2.5"]
    assert lines[2].split() == ["brand-new-case", "TFLOPS", "-", "51.5", "new"]


def test_format_changes_of_a_slowdown() -> None:
    change = Change("c", Entry(metric="TFLOPS", value=50.0, unit="TFLOPS"),
                    Entry(metric="TFLOPS", value=45.0, unit="TFLOPS"))
    assert format_changes([change]).splitlines()[1].split()[-1] == "-10.0"
