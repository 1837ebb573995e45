"""``gpuperf.verdict.false_alarms`` and the clock figures of ``gpuperf.verdict.fleet``: the A/A false-alarm rate
the gate rule gives over synthetic runs whose answer is known, the smallest slowdown each case catches, and a
baseline gaining figures at max clock from runs without losing what it holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuperf.cli import main
from gpuperf.measure.kernel_records import Kernel
from gpuperf.output.results import write_run
from gpuperf.store.baseline import ClockFree, Entry, dump_baseline
from gpuperf.output.report import format_false_alarms
from gpuperf.verdict.false_alarms import MAX_PAIRS, false_alarms, judge, judged_pairs
from gpuperf.verdict.fleet import FleetError, Run, fleet_spread, with_clock_figures
from gpuperf.verdict.gate import Basis, GateConfig
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Status

INFO = RunInfo("NVIDIA H200", "nvidia-h200", "9.0", "580.159.04", "13.2", "13.1.0", "14.2.0", 1980, 3201,
               ("cold",), "2026-11-30T10:00:00+00:00")
STEADY = "perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-4096x4096x4096-cold]"
DROP = "perf_tests/test_gemm.py::test_gemm_perf[fp16-nn-4096x4096x4096-cold]"
NOISY = "perf_tests/test_gemv.py::test_gemv_perf[fp16-opT-16384x16384-cold]"
CAPPED = "perf_tests/test_gemm.py::test_gemm_perf[fp16-nn-8192x8192x8192-cold]"
KERNEL = Kernel(name="nvjet_sm90_hsh", grid=(132, 1, 1), block=(384, 1, 1), median_us=1500.0)
CONFIG = GateConfig()  # 4 %, k 2, cap 8 %


def record(case: str, value: float, spread: float = 0.004, status: str = Status.PASS, **kw: Any) -> Record:
    return Record(case_id=case, nodeid=case, family="gemm", params={}, metric="TFLOPS", value=value, unit="TFLOPS",
                  status=status, rel_iqr=spread, samples=60, method="cupti-cold", flush="cold",
                  **{"precision": "fp32", **kw})


def capped(value: float, free: float, clock: float, kernel: Kernel = KERNEL, cycles_rel_iqr: float = 0.002,
           **kw: Any) -> Record:
    """A power-capped GEMM: its time follows ``clock``, its figure at max clock ``free``."""
    return record(CAPPED, value, kernels=(kernel,), value_at_max_clock=free, call_clock_mhz=clock,
                  cycles_per_call=free * 1000.0, cycles_rel_iqr=cycles_rel_iqr, max_clock_mhz=1980, clock_bound=True,
                  **kw)


def run(host: str, *records: Record) -> Run:
    return Run(host=host, info=INFO, records={r.case_id: r for r in records})


def by_case(cases: list[Any]) -> dict[str, Any]:
    return {c.case_id: c for c in cases}


# -- false alarms ------------------------------------------------------------------------------------------


def three_runs() -> list[Run]:
    """STEADY the same in every run; DROP 6 % lower in run 2; NOISY too noisy to judge in run 1."""
    return [run("a", record(STEADY, 50.0), record(DROP, 100.0), record(NOISY, 2000.0)),
            run("b", record(STEADY, 50.0), record(DROP, 100.0), record(NOISY, 2000.0, spread=0.05)),
            run("c", record(STEADY, 50.0), record(DROP, 94.0), record(NOISY, 2000.0))]


def test_a_case_lower_in_one_run_raises_an_alarm_where_that_run_is_judged() -> None:
    cases, selection = false_alarms(three_runs(), None, CONFIG)
    found = by_case(cases)
    drop = found[DROP]
    # 6 ordered pairs; run c is judged against a and b (-6 % < -4 %): 2 alarms. Judged as the reference, c's
    # 94 makes the others +6.4 %, an improvement, which is no alarm.
    assert (drop.pairs, drop.pair_alarms) == (6, 2) and drop.pair_rate == pytest.approx(1 / 3)
    assert (found[STEADY].pairs, found[STEADY].pair_alarms) == (6, 0)
    noisy = found[NOISY]  # judged in run b: too noisy there, against a and c
    assert (noisy.pairs, noisy.pair_alarms) == (6, 2)
    assert (drop.baseline_runs, drop.baseline_alarms) == (0, 0)
    # red pairs (reference, judged): (a, c), (b, c) by DROP; (a, b), (c, b) by NOISY
    assert (selection.cases, selection.pairs, selection.red_pairs) == (3, 6, 4)
    assert selection.pair_rate == pytest.approx(4 / 6)
    assert (selection.baseline_runs, selection.red_runs, selection.baseline_rate) == (0, 0, 0.0)
    # most alarming first; of two equally alarming, the one that catches only the larger slowdown
    assert [c.case_id for c in cases] == [DROP, NOISY, STEADY]


def test_the_smallest_slowdown_caught_is_maximised_over_the_judgements() -> None:
    cases, _ = false_alarms(three_runs(), None, CONFIG)
    found = by_case(cases)
    # a steady case is judged at Δ 0 every time: it catches what exceeds the band
    assert found[STEADY].catches == pytest.approx(0.04)
    # DROP's worst judgement is a (100) against c (94): Δ = +6/94, so it fails only below 94 · 0.96
    assert found[DROP].catches == pytest.approx(1 - (1 - 0.04) / (1 + 6 / 94))
    assert found[DROP].catches == pytest.approx(1 - 0.96 * 94 / 100)
    # NOISY's noisy judgements have no verdict; the others are at Δ 0, against a band of 2 × 5 % capped at 8 %
    # when run b is the reference
    assert found[NOISY].catches == pytest.approx(0.08)


def test_against_a_baseline_each_run_is_judged_once() -> None:
    baseline = {STEADY: Entry("TFLOPS", 49.0, "TFLOPS", spread=0.004, method="cupti-cold"),
                DROP: Entry("TFLOPS", 100.0, "TFLOPS", spread=0.004, method="cupti-cold")}
    cases, selection = false_alarms(three_runs(), baseline, CONFIG)
    found = by_case(cases)
    assert (found[DROP].baseline_runs, found[DROP].baseline_alarms) == (3, 1)
    assert found[DROP].baseline_rate == pytest.approx(1 / 3)
    assert (found[STEADY].baseline_runs, found[STEADY].baseline_alarms) == (3, 0)
    assert (found[NOISY].baseline_runs, found[NOISY].baseline_alarms) == (0, 0)  # not in the baseline
    assert (selection.baseline_runs, selection.red_runs) == (3, 1) and selection.baseline_rate == pytest.approx(1 / 3)
    # STEADY's judgements against the baseline are at +2.04 %: its worst judgement widens to that
    assert found[STEADY].catches == pytest.approx(1 - 0.96 * 49 / 50)


def test_a_clock_bound_case_whose_time_follows_the_host_raises_no_alarm_on_cycles() -> None:
    """Three hosts at 1300, 1500 and 1750 MHz: time ranges 35 %, cycles not at all."""
    runs = [run("a", capped(500.0, 760.0, 1300.0)), run("b", capped(577.0, 760.0, 1500.0)),
            run("c", capped(673.0, 760.0, 1750.0))]
    [case], selection = false_alarms(runs, None, CONFIG)
    assert (case.pairs, case.pair_alarms, case.basis) == (6, 0, Basis.CYCLES)
    assert case.catches == pytest.approx(0.04)
    assert selection.red_pairs == 0
    on_time = [run(r.host, replace(r.records[CAPPED], clock_bound=False)) for r in runs]
    [case], selection = false_alarms(on_time, None, CONFIG)
    assert (case.pair_alarms, case.basis) == (3, Basis.TIME)  # every slower host judged against a faster one
    assert selection.red_pairs == 3


def test_only_clean_records_take_part() -> None:
    runs = [run("a", record(STEADY, 50.0)), run("b", record(STEADY, 30.0, status=Status.UNRELIABLE)),
            run("c", record(STEADY, 50.0)), run("d")]
    [case], selection = false_alarms(runs, None, CONFIG)
    assert (case.pairs, case.pair_alarms) == (2, 0)  # a ↔ c only
    assert selection.pairs == 12 and selection.red_pairs == 0


def test_judge_ignores_the_status_the_record_was_saved_with() -> None:
    """A results file's record carries its own run's verdict; judged afresh, only the figures count."""
    saved = replace(record(STEADY, 50.0), status=Status.REGRESSED, note="old note", baseline=60.0, delta_pct=-16.7)
    verdict = judge(saved, Entry("TFLOPS", 50.0, "TFLOPS", method="cupti-cold"), CONFIG)
    assert not verdict.alarm and verdict.catches == pytest.approx(0.04) and verdict.basis == Basis.TIME
    slow = judge(record(STEADY, 45.0), Entry("TFLOPS", 50.0, "TFLOPS", method="cupti-cold"), CONFIG)
    assert slow.alarm and slow.catches == 0.0


def test_the_fleet_spread_at_max_clock_is_separated_from_the_time_spread() -> None:
    runs = [run("a", capped(500.0, 760.0, 1300.0)), run("a", capped(520.0, 767.6, 1350.0)),
            run("b", capped(650.0, 775.2, 1700.0))]
    [spread] = fleet_spread(runs)
    assert spread.host_spread == pytest.approx((650.0 - 510.0) / 580.0)
    assert spread.host_spread_at_max_clock == pytest.approx((775.2 - 763.8) / 769.5)
    assert spread.run_spread_at_max_clock == pytest.approx(7.6 / 763.8)
    [plain] = fleet_spread([run("a", record(STEADY, 50.0)), run("b", record(STEADY, 51.0))])
    assert plain.host_spread_at_max_clock is None and plain.run_spread_at_max_clock is None


# -- with_clock_figures ------------------------------------------------------------------------------------

OLD = Entry(metric="TFLOPS", value=600.0, unit="TFLOPS", spread=0.021, samples=60, flush="cold", method="cupti-cold",
            runs=5, run_spread=0.048, kernels=(KERNEL,), tolerance=0.05)


def test_clock_figures_are_added_to_an_entry_keeping_its_time_figures() -> None:
    code = "0123456789ab"
    ran = replace(KERNEL, median_us=1400.0, code=code)
    runs = [run("a", capped(500.0, 760.0, 1300.0, kernel=ran)), run("b", capped(577.0, 780.0, 1500.0, kernel=ran)),
            run("c", capped(673.0, 770.0, 1750.0, kernel=ran, cycles_rel_iqr=0.004))]
    [(case, merged)] = with_clock_figures({CAPPED: OLD}, runs).items()
    assert case == CAPPED
    assert (merged.value, merged.spread, merged.runs, merged.run_spread, merged.samples, merged.tolerance) == \
        (600.0, 0.021, 5, 0.048, 60, 0.05)
    assert merged.at_max_clock == ClockFree(value=770.0, spread=0.002, run_spread=pytest.approx(20 / 770),
                                            cycles=770_000.0, clock_mhz=1500.0)
    assert merged.kernels == (replace(KERNEL, code=code),)  # the recorded kernel, with the code that ran
    assert merged.kernels[0].median_us == 1500.0


def test_a_case_the_file_lacks_gets_a_whole_entry_from_the_runs() -> None:
    runs = [run("a", capped(500.0, 760.0, 1300.0), record(STEADY, 50.0)),
            run("b", capped(577.0, 780.0, 1500.0), record(STEADY, 52.0))]
    merged = with_clock_figures({CAPPED: OLD}, runs)
    assert set(merged) == {CAPPED, STEADY}
    new = merged[STEADY]
    assert (new.value, new.runs, new.run_spread, new.at_max_clock) == (51.0, 2, pytest.approx(2 / 51), None)


def test_a_case_in_the_file_the_runs_cannot_add_a_clock_figure_to_is_left_as_it_is() -> None:
    runs = [run("a", record(STEADY, 40.0)), run("b", record(STEADY, 41.0))]
    assert with_clock_figures({STEADY: replace(OLD, kernels=())}, runs) == {}


def test_a_case_whose_runs_launched_other_kernels_is_refused_by_name() -> None:
    other = Kernel(name="sm90_xmma_gemm_f16", grid=(264, 1, 1), block=(256, 1, 1))
    runs = [run("a", capped(500.0, 760.0, 1300.0, kernel=other)), run("b", capped(577.0, 780.0, 1500.0, kernel=other))]
    with pytest.raises(FleetError) as raised:
        with_clock_figures({CAPPED: OLD}, runs)
    message = str(raised.value)
    assert CAPPED in message and "kernel changed: nvjet_sm90_hsh → sm90_xmma_gemm_f16" in message
    assert "re-record them with baseline from-runs (without --add-clock-figures)" in message


def test_other_code_under_the_same_kernel_name_is_refused() -> None:
    recorded = replace(OLD, kernels=(replace(KERNEL, code="aaaaaaaaaaaa"),))
    ran = replace(KERNEL, code="bbbbbbbbbbbb")
    runs = [run("a", capped(500.0, 760.0, 1300.0, kernel=ran)), run("b", capped(577.0, 780.0, 1500.0, kernel=ran))]
    with pytest.raises(FleetError, match="same name, other code"):
        with_clock_figures({CAPPED: recorded}, runs)


# -- through the command line ------------------------------------------------------------------------------


def results_dirs(tmp_path: Path, runs: list[Run], info: RunInfo = INFO) -> list[str]:
    return [str(write_run(tmp_path / f"run{i}", replace(info, started=f"2026-11-30T1{i}:00:00+00:00"),
                          list(r.records.values())).directory)
            for i, r in enumerate(runs)]


def baseline_file(tmp_path: Path, entries: dict[str, Entry], slug: str = "nvidia-h200") -> Path:
    path = tmp_path / f"{slug}.yaml"
    path.write_text(dump_baseline({"gpu": "NVIDIA H200", "slug": slug, "driver": "580.159.04"}, entries))
    return path


def test_fleet_prints_the_false_alarm_rates_of_the_runs_and_the_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = baseline_file(tmp_path, {DROP: Entry("TFLOPS", 100.0, "TFLOPS", spread=0.004, method="cupti-cold")})
    assert main(["fleet", *results_dirs(tmp_path, three_runs()), "--baseline", str(baseline)]) == 0
    out = capsys.readouterr().out
    assert ("false alarms over 6 ordered run pairs (3 cases, each run judged against each other run as its "
            "baseline, single tries): 4 pairs red (66.7 %); against the baseline 1 of 3 runs red (33.3 %)") in out
    alarms = out[out.index("false alarms over"):]
    drop_row = next(line for line in alarms.splitlines() if line.startswith("test_gemm_perf[fp16-nn-4096x4096x4096"))
    assert drop_row.split()[1:] == ["time", "6", "2", "(33.3", "%)", "1", "of", "3", "9.8"]
    assert main(["fleet", *results_dirs(tmp_path / "again", three_runs())]) == 0
    assert "against the baseline" not in capsys.readouterr().out


def test_fleet_refuses_a_baseline_of_another_gpu_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = baseline_file(tmp_path, {STEADY: Entry("TFLOPS", 100.0, "TFLOPS", method="cupti-cold")})
    h100 = replace(INFO, gpu_name="NVIDIA H100", gpu_slug="nvidia-h100")
    runs = results_dirs(tmp_path, [run("a", record(STEADY, 50.0)), run("b", record(STEADY, 50.0))], info=h100)
    assert main(["fleet", *runs, "--baseline", str(baseline)]) == 1
    err = capsys.readouterr().err
    assert "nvidia-h100" in err and "nvidia-h200" in err


def test_many_runs_are_judged_on_a_seeded_sample_of_pairs_and_the_report_says_so() -> None:
    runs = [run(f"h{i}", record(STEADY, 50.0), record(DROP, 94.0 if i == 7 else 100.0)) for i in range(50)]
    _, selection = false_alarms(runs, None, CONFIG)
    assert selection.pairs == MAX_PAIRS < selection.all_pairs == 50 * 49
    assert judged_pairs(50) == judged_pairs(50) and len(set(judged_pairs(50))) == MAX_PAIRS
    assert all(a != b for a, b in judged_pairs(50)) and len(judged_pairs(10)) == 90
    expected = sum(1 for a, b in judged_pairs(50) if b == 7)  # run 7 judged against any other: −6 %
    assert selection.red_pairs == expected > 0
    assert "2000 ordered run pairs (a seeded sample of the 2450)" in format_false_alarms([], selection)
