"""``summary.md`` links the picture: each failing or changed case's last runs from the history as a text
sparkline, and its page in the trend site; through ``results.write_run`` as the plugin calls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuperf.output import results
from gpuperf.trend.paths import page_name_of
from gpuperf.trend.summary import RecentRuns, SummaryHistory, history_lines, sparkline
from gpuperf.vocabulary import Status

from test_results import make_record, make_run

REGRESSED = "test_gemm_perf[fp16-2048x2048x2048-cold]"
QUIET = "test_gemm_perf[fp32-1024x1024x1024-cold]"
SHIFTED = "test_gemm_perf[fp32-512x512x512-cold]"


def _case(name: str) -> str:
    return f"perf_tests/test_gemm.py::{name}"


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(results.STEP_SUMMARY_ENV, raising=False)


def _history(site: Path) -> SummaryHistory:
    return SummaryHistory("synthetic-gpu", {
        _case(REGRESSED): RecentRuns((10.0, 10.1, 9.9, None, 8.0)),
        _case(QUIET): RecentRuns((10.0, 10.0, 10.1)),
        _case(SHIFTED): RecentRuns((20.0, 20.1, 18.8, 18.9), change_point=True),
    }, site)


def test_sparkline_scales_to_the_series_and_leaves_gaps() -> None:
    assert sparkline([1.0, 2.0, None, 3.0]) == "▁▅ █"
    assert sparkline([5.0, 5.0]) == "▁▁"
    assert sparkline([None]) == ""


def test_the_failing_and_the_shifted_case_get_their_last_runs_and_page_the_quiet_one_does_not(
        tmp_path: Path) -> None:
    records = [make_record(REGRESSED, status=Status.REGRESSED, value=8.0), make_record(QUIET),
               make_record(SHIFTED, value=18.9)]
    site = tmp_path / "trend"
    lines = history_lines(records, _history(site))
    text = "\n".join(lines)
    assert lines[0] == "### History of the failing and changed cases (2)"
    assert f"Trend site: `{site / 'index.html'}` (rebuild: `python -m gpuperf history page --out {site}`)." in text
    regressed = next(line for line in lines if REGRESSED in line)
    assert "| REGRESSED | `██▇ ▁` (5) | 8 – 10.1 TFLOPS | — |" in regressed
    assert f"`{site / page_name_of('synthetic-gpu', _case(REGRESSED))}`" in regressed
    shifted = next(line for line in lines if SHIFTED in line)
    assert "| PASS | `▇█▁▂` (4) | 18.8 – 20.1 TFLOPS | yes |" in shifted
    assert QUIET not in text


def test_a_failing_case_the_history_has_not_seen_says_so_and_no_history_means_no_section(tmp_path: Path) -> None:
    records = [make_record("test_gemm_perf[fp64-64x64x64-cold]", status=Status.ERROR, value=float("nan"))]
    lines = history_lines(records, _history(tmp_path))
    assert "| ERROR | not in the history | — | — |" in lines[-2]
    assert history_lines(records, None) == []


def test_write_run_puts_the_section_in_summary_md_after_the_failing_cases(tmp_path: Path) -> None:
    records = [make_record(REGRESSED, status=Status.REGRESSED, value=8.0), make_record(QUIET)]
    files = results.write_run(tmp_path / "run", make_run(), records, history=_history(tmp_path / "trend"))
    summary = files.summary_md.read_text(encoding="utf-8")
    assert summary.index("### Failing (1)") < summary.index("### History of the failing and changed cases (1)") \
        < summary.index("### All cases")
    assert "`██▇ ▁` (5)" in summary
    plain = results.write_run(tmp_path / "plain", make_run(), records)
    assert "History of the failing" not in plain.summary_md.read_text(encoding="utf-8")
