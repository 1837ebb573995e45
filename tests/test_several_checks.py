"""A test that calls ``perf.check`` twice (a large and a small GEMM in one test): each check is keyed by its own
identity, ``<case id>`` then ``<case id>@2`` (as ``ab`` keys them), in the baseline, the gate, the results and
the history; one check's figure is never judged against the other's entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuperf.history.database import History
from gpuperf.store.history_target import sqlite_url
from test_plugin import baseline, fake_project, set_timings

pytest_plugins = ["pytester"]

TWO_CHECKS = '''
import pytest

from gpuperf.measure.metrics import gemm_work


@pytest.mark.perf
def test_two_gemms(measure, perf):
    perf.check(measure(lambda: "small", gemm_work(512, 512, 512, "fp32")))
    perf.check(measure(lambda: "big", gemm_work(4096, 4096, 4096, "fp32")))
'''
SMALL_S = 2 * 512**3 / 20e12  # 20 TFLOPS
BIG_S = 2 * 4096**3 / 50e12  # 50 TFLOPS
FIRST = "test_two.py::test_two_gemms[cold]"
SECOND = FIRST + "@2"


@pytest.fixture
def two(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return fake_project(pytester, monkeypatch, {"test_two": TWO_CHECKS}, ("GPUPERF_HISTORY",), small=SMALL_S,
                        big=BIG_S)


def _records(out: Path) -> dict[str, float]:
    (results,) = out.glob("*/results.json")
    return {record["case_id"]: record["value"] for record in json.loads(results.read_text())["records"]}


def test_each_check_is_keyed_by_its_own_identity_and_a_slower_second_check_fails_the_gate(
        two: pytest.Pytester) -> None:
    result = two.runpytest("-p", "no:cacheprovider", "--update-baselines", "--results-dir", "rec", "--history",
                           "h.sqlite")
    result.assert_outcomes(passed=1)
    entries = baseline(two)["entries"]
    assert set(entries) == {FIRST, SECOND}
    assert entries[FIRST]["value"] == pytest.approx(20, rel=1e-3)
    assert entries[SECOND]["value"] == pytest.approx(50, rel=1e-3)
    assert _records(two.path / "rec") == pytest.approx({FIRST: 20, SECOND: 50}, rel=1e-3)

    set_timings(two, small=SMALL_S, big=2 * BIG_S)  # the 4096³ GEMM at half its speed, every time it is measured
    result = two.runpytest("-p", "no:cacheprovider", "--gate", "--results-dir", "gate", "--history", "h.sqlite")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["REGRESSED test_two.py::test_two_gemms?cold?@2: 25 TFLOPS vs baseline 50 (-50.0 %*"])
    result.stdout.no_fnmatch_line("*IMPROVED*")
    result.stdout.no_fnmatch_line("*RESULTS NOT WRITTEN*")
    assert _records(two.path / "gate") == pytest.approx({FIRST: 20, SECOND: 25}, rel=1e-3)

    with History(sqlite_url(two.path / "h.sqlite")) as history:
        series = {case: [row[3] for row in history.values(case=case)] for case in (FIRST, SECOND)}
    assert series == {FIRST: pytest.approx([20, 20], rel=1e-3), SECOND: pytest.approx([50, 25], rel=1e-3)}


def test_a_gate_run_that_misses_the_second_check_fails_for_its_entry(two: pytest.Pytester) -> None:
    """The gate counts each check's entry as the test's own: a test that stopped after its first check leaves
    ``…@2`` NOT MEASURED, never a stale entry nor a pass."""
    result = two.runpytest("-p", "no:cacheprovider", "--update-baselines", "--results-dir", "none")
    result.assert_outcomes(passed=1)
    source = two.path / "test_two.py"
    source.write_text(source.read_text().replace('    perf.check(measure(lambda: "big"', '    0 and (measure(lambda: "big"'))
    result = two.runpytest("-p", "no:cacheprovider", "--gate", "--results-dir", "none")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 of 2 baselined cases measured*", "*test_two_gemms?cold?@2*"])
    result.stdout.no_fnmatch_line("*stale*")
