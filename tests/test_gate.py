"""``gpuperf.verdict.gate``: the one rule from a figure and its entry to a status, and from statuses to outcomes.

The band is ``min(max(tolerance, k × recorded spread), cap)``; the measurement's own noise never widens it;
a figure that is not positive and finite is an error; confirmation keeps the better clean try; the test
and run outcomes follow the policies, and gate mode fails a run on missing evidence.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from gpuperf.verdict.accounting import GpuAccount, Unmeasured
from gpuperf.store.baseline import Entry
from gpuperf.verdict.gate import (
    STATUS_ORDER,
    Context,
    GateConfig,
    compare,
    confirm,
    decide,
    effective_tolerance,
    needs_confirmation,
    outcome,
    too_noisy,
)
from gpuperf.verdict.accounting import run_failures
from gpuperf.verdict.gate_config import Policy, gate_mode_from_env
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status

CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-4096x4096x4096-cold]"


def entry(value: float, **kw: Any) -> Entry:
    return Entry(metric="TFLOPS", value=value, unit="TFLOPS", **kw)


def record(value: float, spread: float = 0.001, **kw: Any) -> Record:
    return Record(case_id=CASE, nodeid=CASE, family="gemm", params={}, metric="TFLOPS", value=value,
                  unit="TFLOPS", status=Status.PASS, rel_iqr=spread, **kw)


# -- the band --------------------------------------------------------------------------------------------


def test_effective_tolerance_is_the_recorded_noise_capped() -> None:
    config = GateConfig(tolerance=0.03, noise_k=2.0)
    assert config.cap == pytest.approx(0.06)  # twice the tolerance by default
    assert effective_tolerance(entry(50, spread=0.005), config) == 0.03  # 2 × 0.5 % < 3 %
    assert effective_tolerance(entry(50, spread=0.02), config) == pytest.approx(0.04)
    assert effective_tolerance(entry(50, spread=0.04), config) == pytest.approx(0.06)  # 8 % asked, capped
    assert effective_tolerance(entry(50, spread=0.99), GateConfig(max_tolerance=0.05)) == pytest.approx(0.05)


def test_per_entry_tolerance_wins_over_configured_and_sets_its_own_cap() -> None:
    config = GateConfig(tolerance=0.03, noise_k=2.0)
    assert effective_tolerance(entry(50, tolerance=0.05), config) == 0.05
    assert effective_tolerance(entry(50, tolerance=0.01), config) == 0.01  # tighter, too
    assert effective_tolerance(entry(50, spread=0.02, tolerance=0.01), config) == pytest.approx(0.02)  # cap 2 %
    assert effective_tolerance(entry(50, tolerance=0.10), config) == pytest.approx(0.10)  # set by hand: kept
    assert effective_tolerance(entry(50, tolerance=0.10), GateConfig(max_tolerance=0.06)) == pytest.approx(0.06)


def test_a_broken_baseline_value_is_an_error_never_a_pass() -> None:
    decided = decide(record(50.0), Entry(metric="TFLOPS", value=0.0, unit="TFLOPS"), GateConfig(), Context())
    assert decided.status == Status.ERROR and decided.failed


@pytest.mark.parametrize("status", [Status.UNRELIABLE, Status.NOT_COMPARABLE, Status.ERROR])
def test_a_second_try_without_a_verdict_never_overturns_a_regression(status: str) -> None:
    regressed = decide(record(90.0), entry(100.0), GateConfig(), Context())
    second = replace(record(99.0), status=status, note="unreliable: hw_thermal_slowdown")
    assert confirm(regressed, second).status == Status.REGRESSED


def test_compare_statuses_and_delta() -> None:
    config = GateConfig(tolerance=0.05, noise_k=0.0)
    e = entry(100.0)
    assert compare(90.0, e, config).status == Status.REGRESSED
    assert compare(96.0, e, config).status == Status.PASS
    assert compare(110.0, e, config).status == Status.IMPROVED
    result = compare(90.0, e, config)
    assert (result.delta, result.baseline, result.tolerance) == (pytest.approx(-0.10), 100.0, 0.05)


def test_compare_boundary_is_a_pass() -> None:
    config = GateConfig(tolerance=0.25, noise_k=0.0, max_tolerance=0.5)  # exact in binary
    assert compare(75.0, entry(100.0), config).status == Status.PASS
    assert compare(125.0, entry(100.0), config).status == Status.PASS
    assert compare(74.0, entry(100.0), config).status == Status.REGRESSED


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0.0, -5.0])
def test_a_figure_that_is_not_positive_and_finite_is_an_error(value: float) -> None:
    assert compare(value, entry(100.0), GateConfig()).status == Status.ERROR
    decided = decide(record(value), entry(100.0), GateConfig(), Context())
    assert decided.status == Status.ERROR and decided.failed


@pytest.mark.parametrize("kwargs", [{"tolerance": -0.01}, {"tolerance": 1.0}, {"noise_k": -1.0},
                                    {"tolerance": 0.04, "max_tolerance": 0.03}, {"max_tolerance": 1.0}])
def test_gate_config_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        GateConfig(**kwargs)


# -- noise -----------------------------------------------------------------------------------------------


def test_too_noisy_is_judged_against_the_cap() -> None:
    config = GateConfig(tolerance=0.04, noise_k=2.0)
    assert not too_noisy(0.039, config) and too_noisy(0.041, config) and not too_noisy(None, config)


def test_the_measurement_s_own_noise_never_widens_the_band() -> None:
    """The defect: a 10 % slowdown measured with a 6 % IQR passed, its own noise widening its gate."""
    config = GateConfig()
    slow_and_noisy = decide(record(90.0, spread=0.06), entry(100.0, spread=0.005), config, Context())
    assert slow_and_noisy.status == Status.UNRELIABLE and slow_and_noisy.note.startswith("noisy")
    slow_and_quiet = decide(record(90.0, spread=0.03), entry(100.0, spread=0.005), config, Context())
    assert slow_and_quiet.status == Status.REGRESSED and slow_and_quiet.tolerance == 0.04


def test_confirm_keeps_the_better_clean_try() -> None:
    config, wide = GateConfig(), entry(100.0)
    regressed = decide(record(90.0), wide, config, Context())
    passed = decide(record(99.0), wide, config, Context())
    noisy = decide(record(99.0, spread=0.2), wide, config, Context())
    assert needs_confirmation(regressed) and needs_confirmation(noisy) and not needs_confirmation(passed)
    assert confirm(regressed, passed).status == Status.PASS  # a transient slowdown
    assert confirm(regressed, decide(record(91.0), wide, config, Context())).value == 91.0
    assert confirm(regressed, noisy).status == Status.REGRESSED  # the only clean try stands
    assert confirm(noisy, passed).status == Status.PASS
    both = confirm(noisy, noisy)
    assert both.status == Status.UNRELIABLE and "re-measured: first 99" in both.note


# -- outcomes --------------------------------------------------------------------------------------------


def test_outcome_of_a_test_follows_the_policies() -> None:
    assert outcome([record(100.0)], Policy()) == ("pass", "")
    failing = decide(record(80.0), entry(100.0), GateConfig(), Context())
    verdict, message = outcome([record(100.0), failing], Policy())
    assert verdict == "fail" and message.startswith(f"REGRESSED {CASE}: 80 TFLOPS vs baseline 100")
    unreliable = decide(record(99.0, spread=0.2), entry(100.0), GateConfig(), Context())
    assert outcome([unreliable], Policy())[0] == "skip"
    assert outcome([unreliable], Policy(on_unreliable="fail"))[0] == "fail"
    improved = decide(record(120.0), entry(100.0), GateConfig(), Context())
    assert outcome([improved], Policy())[0] == "pass"
    assert outcome([improved], Policy(strict=True))[0] == "fail"
    missing = decide(record(100.0), None, GateConfig(), Context())
    assert [outcome([missing], Policy(missing=p))[0] for p in ("skip", "fail", "pass")] == ["skip", "fail", "pass"]


def test_run_failures_only_in_gate_mode() -> None:
    complete = GpuAccount(0, "nvidia-h200", 3, 3)
    short = GpuAccount(0, "nvidia-h200", 3, 2, (Unmeasured("k", "UNRELIABLE: noisy"),))
    assert run_failures([short], ["stale"], gate_mode=False, allow_stale=False) == []
    assert run_failures([complete], [], gate_mode=True, allow_stale=False) == []
    reasons = run_failures([short], ["stale#x"], gate_mode=True, allow_stale=False)
    assert reasons[0].startswith("GPU 0 (nvidia-h200): 2 of 3 baselined cases measured")
    assert "1 stale baseline entry" in reasons[1]
    assert run_failures([complete], ["stale"], gate_mode=True, allow_stale=True) == []
    assert run_failures([], [], gate_mode=True, allow_stale=False, no_gpu="no CuPy") == [
        "nothing measured there: no CuPy"]


@pytest.mark.parametrize(("value", "on"), [(None, False), ("", False), ("0", False), ("false", False),
                                           ("False", False), ("true", True), ("1", True), ("yes", True),
                                           ("github", True)])
def test_gate_mode_from_ci(value: str | None, on: bool) -> None:
    assert gate_mode_from_env(value) is on


def test_status_order_puts_what_needs_a_person_first() -> None:
    assert STATUS_ORDER[0] == Status.REGRESSED and STATUS_ORDER[-1] == Status.PASS
    assert set(STATUS_ORDER) == {value for name, value in vars(Status).items() if name.isupper()
                                 and isinstance(value, str)}
