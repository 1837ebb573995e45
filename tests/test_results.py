"""results.json / results.csv / summary.md: round trip, columns, failures first, $GITHUB_STEP_SUMMARY.

All figures are synthetic round numbers built here, never measurements.
"""

from __future__ import annotations

import csv
import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpuperf.output import results
from gpuperf.store import results as results_format
from gpuperf.store.baseline import Entry, dump_baseline
from gpuperf.verdict.check import entry_from_record
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Status

PEAKS = {"memory_gbps": 1000.0, "compute_tflops": {"fp32": 50.0, "tf32": 400.0, "fp16": 800.0}}


def make_run() -> RunInfo:
    return RunInfo(
        gpu_name="Synthetic GPU", gpu_slug="synthetic-gpu", compute_capability="9.0", driver="1.2.3",
        cuda_runtime="13.0", cublas="13.1.0", cupy="14.0.0", sm_clock_max_mhz=2000, mem_clock_mhz=3000,
        flush_modes=("cold",), started="2026-01-01T00:00:00+00:00", extra={"peaks": PEAKS},
    )


def make_record(case: str, status: str = Status.PASS, family: str = "gemm", value: float = 10.0,
                params: dict[str, str] | None = None, **kwargs: object) -> Record:
    defaults: dict[str, object] = {
        "flops": 2e9, "bytes": 1e8, "tflops": value, "baseline": value, "delta_pct": 0.0, "pct_of_peak": 20.0,
        "peak": 50.0, "median_s": 2e-4, "samples": 10, "method": "cold-flush", "flush": "cold",
        "sm_clock_mhz": (1900, 1950), "clock_events": ("idle",), "gpu": "Synthetic GPU", "gpu_index": 0,
        "precision": "fp32",
    }
    defaults.update(kwargs)
    return Record(case_id=f"perf_tests/test_{family}.py::{case}", nodeid=f"perf_tests/test_{family}.py::{case}",
                  family=family, params=params or {"dtype": "fp32", "shape": "1024x1024x1024"},
                  metric="TFLOPS", value=value, unit="TFLOPS", status=status, **defaults)  # type: ignore[arg-type]


@pytest.fixture
def records() -> list[Record]:
    return [
        make_record("test_gemm_perf[fp32-1024x1024x1024-cold]"),
        make_record("test_gemm_perf[fp16-2048x2048x2048-cold]", params={"dtype": "fp16", "shape": "2048x2048x2048"},
                    value=8.0, baseline=10.0, delta_pct=-20.0, status=Status.REGRESSED,
                    note="−20.0 % below baseline | confirmed"),
        make_record("test_sgemv_perf[opT-64x65536-cold]", family="gemv", value=900.0,
                    params={"op": "T", "shape": "64x65536"}, extra={"peaks": {"memory_gbps": 1000.0}}),
        make_record("test_batched_perf[fp32-8x64x64x64-cold]", family="batched", status=Status.NO_BASELINE,
                    params={"dtype": "fp32", "shape": "8x64x64x64", "kernel": "strided"}, baseline=None,
                    delta_pct=None),
        make_record("test_gemm_perf[tf32-4096x4096x4096-cold]", status=Status.ANOMALY,
                    params={"dtype": "tf32", "shape": "4096x4096x4096"}, value=500.0, note="above peak"),
    ]


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite itself may run under GitHub Actions: never append to the real job page."""
    monkeypatch.delenv(results.STEP_SUMMARY_ENV, raising=False)


def test_write_run_round_trips_through_load_run(tmp_path: Path, records: list[Record]) -> None:
    files = results.write_run(tmp_path / "run", make_run(), records)
    assert files.results_json.name == "results.json" and files.results_json.is_file()
    assert files.step_summary is None
    run, loaded = results.load_run(files.directory)  # a directory works as well as the file
    assert run == make_run()
    assert loaded == records
    assert results.load_run(files.results_json)[1] == records


def test_results_json_has_the_documented_shape(tmp_path: Path, records: list[Record]) -> None:
    files = results.write_run(tmp_path, make_run(), records)
    data = json.loads(files.results_json.read_text())
    assert data["run"] == make_run().to_dict()
    assert data["records"] == [r.to_dict() for r in records]


def test_non_finite_values_are_written_as_strict_json(tmp_path: Path) -> None:
    record = make_record("test_gemm_perf[fp32-1x1x1-cold]", delta_pct=math.nan, pct_of_peak=math.inf)
    files = results.write_run(tmp_path, make_run(), [record])
    text = files.results_json.read_text()
    assert "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text)["records"][0]
    assert loaded["delta_pct"] is None and loaded["pct_of_peak"] is None


def test_csv_has_one_row_per_record_and_every_parameter_column(tmp_path: Path, records: list[Record]) -> None:
    files = results.write_run(tmp_path, make_run(), records)
    with files.results_csv.open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        columns = reader.fieldnames or []
    assert len(rows) == len(records)
    assert {"param.dtype", "param.shape", "param.op", "param.kernel"} <= set(columns)
    assert columns[:3] == ["case_id", "nodeid", "family"]
    param_columns = [c for c in columns if c.startswith("param.")]
    assert param_columns == sorted(param_columns)
    for expected in ("value", "baseline", "delta_pct", "status", "samples", "method", "flush",
                     "sm_clock_mhz_before", "sm_clock_mhz_after", "extra.peaks.memory_gbps",
                     "run.driver", "run.cublas", "run.cuda_runtime"):
        assert expected in columns
    gemv = next(row for row in rows if row["family"] == "gemv")
    assert gemv["param.op"] == "T" and gemv["param.dtype"] == ""
    assert gemv["extra.peaks.memory_gbps"] == "1000.0"
    assert float(gemv["value"]) == 900.0
    assert gemv["sm_clock_mhz_before"] == "1900" and gemv["clock_events"] == "idle"
    assert gemv["run.driver"] == "1.2.3"
    no_baseline = next(row for row in rows if row["status"] == Status.NO_BASELINE)
    assert no_baseline["baseline"] == "" and no_baseline["param.kernel"] == "strided"


def test_csv_columns_are_stable_whatever_the_record_order(records: list[Record]) -> None:
    assert results_format.csv_columns(records) == results_format.csv_columns(list(reversed(records)))


def test_summary_lists_failures_first_then_flagged_then_all(records: list[Record]) -> None:
    text = results.summary_markdown(make_run(), records)
    failing = text.index("### Failing (2)")
    flagged = text.index("### Flagged (1)")
    everything = text.index("### All cases")
    assert failing < flagged < everything
    failing_block = text[failing:flagged]
    assert "test_gemm_perf[fp16-2048x2048x2048-cold]" in failing_block
    assert "test_gemm_perf[tf32-4096x4096x4096-cold]" in failing_block
    assert "test_gemm_perf[fp32-1024x1024x1024-cold]" not in failing_block
    assert failing_block.index("REGRESSED") < failing_block.index("ANOMALY")
    assert "| -20.0 |" in failing_block  # the Δ % cell
    assert "\\| confirmed" in failing_block  # a pipe in a note stays inside its cell


def test_summary_header_names_gpu_versions_clocks_flush_and_counts(records: list[Record]) -> None:
    text = results.summary_markdown(make_run(), records)
    first = text.splitlines()[0]
    assert "Synthetic GPU" in first and "2 of 5 cases failing" in first
    for fragment in ("1.2.3 / 13.0 / 13.1.0 / 14.0.0", "SM max 2000 MHz", "memory 3000 MHz",
                     "SM seen 1900–1950 MHz", "| flush | cold |", "**REGRESSED** 1", "**PASS** 2",
                     "**NO_BASELINE** 1", "memory 1000 GB/s"):
        assert fragment in text
    for family in ("batched: 1 case", "gemm: 3 cases, 2 failing", "gemv: 1 case"):
        assert family in text


def test_summary_without_failures_says_so() -> None:
    text = results.summary_markdown(make_run(), [make_record("test_gemm_perf[fp32-8x8x8-cold]")])
    assert "none failing" in text.splitlines()[0]
    assert "### Failing" not in text


def test_every_table_row_has_the_header_column_count(records: list[Record]) -> None:
    text = results.summary_markdown(make_run(), records)
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows
    for row in rows:
        assert row.replace("\\|", "").count("|") == len(results.TABLE_COLUMNS) + 1


def test_step_summary_is_appended_when_set(tmp_path: Path, records: list[Record],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv(results.STEP_SUMMARY_ENV, str(step))
    files = results.write_run(tmp_path / "run", make_run(), records)
    assert files.step_summary == step
    text = step.read_text()
    assert text.startswith("earlier step\n") and "### Failing (2)" in text
    assert files.summary_md.read_text() in text  # the artifact keeps the same summary


def test_write_summary_markdown_targets(tmp_path: Path) -> None:
    beside = results.write_summary_markdown("# hello", tmp_path, environ={})
    assert beside == tmp_path / "summary.md" and beside.read_text() == "# hello"
    step = tmp_path / "step.md"
    assert results.write_summary_markdown("one", tmp_path, environ={"GITHUB_STEP_SUMMARY": str(step)}) == step
    results.write_summary_markdown("two\n", tmp_path, environ={"GITHUB_STEP_SUMMARY": str(step)})
    assert step.read_text() == "one\ntwo\n"
    assert results.write_summary_markdown("x", tmp_path, environ={"GITHUB_STEP_SUMMARY": " "}) == beside


def test_oversized_step_summary_drops_the_per_family_tables(tmp_path: Path, records: list[Record],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    step = tmp_path / "step.md"
    monkeypatch.setenv(results.STEP_SUMMARY_ENV, str(step))
    monkeypatch.setattr(results, "STEP_SUMMARY_LIMIT", 200)
    files = results.write_run(tmp_path / "run", make_run(), records)
    assert "### All cases" in files.summary_md.read_text()
    text = step.read_text()
    assert "### Failing (2)" in text and "### All cases" not in text and "1 MiB" in text


def test_timestamped_dir_is_unique_within_one_second(tmp_path: Path) -> None:
    now = datetime(2026, 11, 29, 16, 0, 5, tzinfo=timezone.utc)
    first = results.timestamped_dir(tmp_path / "results", now=now)
    second = results.timestamped_dir(tmp_path / "results", now=now)
    third = results.timestamped_dir(tmp_path / "results", now=now)
    assert first.name == "20261129-160005"
    assert second.name == "20261129-160005-2" and third.name == "20261129-160005-3"
    assert all(path.is_dir() for path in (first, second, third))
    assert sorted([third, first, second]) == [first, second, third]


def test_timestamped_dir_defaults_to_results_under_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = results.timestamped_dir()
    assert path.parent == Path("results") and path.is_dir()


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("{not json", "not valid JSON"),
    ('{"records": []}', "'run' and 'records'"),
    ('{"schema": 1, "run": {"gpu_name": "x"}, "records": []}', "lacks the field.s. gpu_slug, compute_capability"),
    ('{"schema": 99, "run": {}, "records": []}', "results schema 99 is not 1"),
])
def test_load_run_errors_name_the_file_and_the_fix(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(results.ResultsError, match=message) as info:
        results.load_run(path)
    assert str(path) in str(info.value)


def test_summary_lists_every_status_that_needs_a_person() -> None:
    """Failing is ``Status.FAILING`` and flagged ``gate.FLAGGED``: an ERROR fails, a case not recorded or not
    comparable is flagged; none is left to the per-family tables alone."""
    records = [make_record("test_gemm_perf[fp32-1x1x1-cold]", status=Status.ERROR, value=math.nan),
               make_record("test_gemm_perf[fp32-2x2x2-cold]", status=Status.NOT_RECORDED, note="not recorded"),
               make_record("test_gemm_perf[fp32-3x3x3-cold]", status=Status.NOT_COMPARABLE),
               make_record("test_gemm_perf[fp32-4x4x4-cold]", status=Status.UNRELIABLE),
               make_record("test_gemm_perf[fp32-5x5x5-cold]")]
    text = results.summary_markdown(make_run(), records, per_family=False)
    failing = text[text.index("### Failing (1)"):text.index("### Flagged (3)")]
    flagged = text[text.index("### Flagged (3)"):]
    assert "1x1x1" in failing and "❌ ERROR" in failing and "| – |" in failing  # NaN shown as missing
    for case, status in (("2x2x2", "NOT_RECORDED"), ("3x3x3", "NOT_COMPARABLE"), ("4x4x4", "UNRELIABLE")):
        assert case in flagged and status in flagged
    assert "5x5x5" not in failing + flagged
    assert "1 of 5 cases failing" in text.splitlines()[0]


def test_summary_peaks_row_is_the_shared_peaks_line(records: list[Record]) -> None:
    text = results.summary_markdown(make_run(), records)
    assert "| peaks | TFLOPS fp32 50.0, tf32 400.0, fp16 800.0 \\| memory 1000 GB/s |" in text


# -- load_figures: the one reader behind baseline diff, compare and plot ----------------------------------


def test_load_figures_of_a_run(tmp_path: Path, records: list[Record]) -> None:
    broken = make_record("test_gemm_perf[fp32-9x9x9-cold]", status=Status.ERROR, value=math.nan)
    files = results.write_run(tmp_path / "run", make_run(), [*records, broken])
    for path in (files.directory, files.results_json):
        figures = results.load_figures(path)
        assert figures.run == make_run() and figures.baseline is None
        assert list(figures.records.values())[:-1] == records
        assert figures.records[broken.case_id].value is None  # strict JSON: NaN is written as null
        assert set(figures.entries) == {r.case_id for r in records}  # a NaN figure is nobody's baseline
        assert figures.entries[records[1].case_id] == entry_from_record(records[1])
        assert figures.gpu == "Synthetic GPU" and figures.peaks == PEAKS
        assert figures.versions == {"driver": "1.2.3", "cuda_runtime": "13.0", "cublas": "13.1.0"}


def test_load_figures_tells_the_gpus_of_one_run_apart(tmp_path: Path) -> None:
    case = "test_gemm_perf[fp32-8x8x8-cold]"
    both = [make_record(case, value=10.0, gpu_index=0), make_record(case, value=11.0, gpu_index=1),
            make_record("test_gemm_perf[fp32-16x16x16-cold]", gpu_index=0)]
    figures = results.load_figures(results.write_run(tmp_path, make_run(), both).results_json)
    key = f"perf_tests/test_gemm.py::{case}"
    assert figures.records[f"{key} @ GPU 0"].value == 10.0 and figures.records[f"{key} @ GPU 1"].value == 11.0
    assert "perf_tests/test_gemm.py::test_gemm_perf[fp32-16x16x16-cold]" in figures.records


def test_load_figures_of_a_baseline(tmp_path: Path) -> None:
    header = {"gpu": "Synthetic GPU", "slug": "synthetic-gpu", "compute_capability": "9.0", "driver": "1.2.3",
              "cuda_runtime": "13.0", "cublas": "13.1.0", "cupy": "14.0.0", "peaks": PEAKS}
    entry = Entry(metric="TFLOPS", value=40.0, unit="TFLOPS", spread=0.01, samples=10, flush="cold",
                  method="cold-flush", tolerance=0.07)
    path = tmp_path / "synthetic-gpu.yaml"
    path.write_text(dump_baseline(header, {"c": entry}))
    figures = results.load_figures(path)
    assert figures.entries == {"c": entry}  # the hand-set tolerance kept
    record = figures.records["c"]
    assert (record.value, record.rel_iqr, record.method, record.status) == (40.0, 0.01, "cold-flush", Status.UPDATED)
    assert figures.gpu == "Synthetic GPU" and figures.peaks == PEAKS and figures.versions["driver"] == "1.2.3"


@pytest.mark.parametrize(("name", "message"), [
    ("missing.yaml", "no such baseline file"),
    ("gone/results.json", "results.json: no such file"),
    ("nothing-here", "nothing-here: no such file or directory"),
])
def test_load_figures_errors_name_the_path_and_the_fix(tmp_path: Path, name: str, message: str) -> None:
    with pytest.raises(results.ResultsError, match=message):
        results.load_figures(tmp_path / name)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(results.ResultsError, match="not a baseline"):
        results.load_figures(tmp_path / "notes.txt")
