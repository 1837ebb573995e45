"""The gate on cycles: a clock-bound case whose SM clock moved (now, or when its entry was recorded) is judged on
its figure at max clock when its kernels are the same, on time otherwise; the notes say which and why; the noise
rule and confirmation follow the figure judged. Records and entries are built directly, with known answers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fakes import PEAKS

from gpuperf.measure.kernel_records import Kernel
from gpuperf.measure.measurement import Measurement, Method
from gpuperf.measure.metrics import gemm_work, gemv_work
from gpuperf.store.baseline import ClockFree, Entry
from gpuperf.verdict.check import CaseIdentity, case_record, clock_bound, clock_free, context_for, \
    entry_from_record, ratio_record
from gpuperf.verdict.gate import (CLOCK_MOVED, Basis, Context, GateConfig, clock_drop, clock_free_entry, compare,
                                  confirm, decide, figure_at_max_clock, judge_basis, needs_confirmation)
from gpuperf.store.records import Record
from gpuperf.vocabulary import Metric, Status

CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp16-nn-8192x8192x8192-cold]"
MAX_MHZ = 1980
GEMM_KERNEL = Kernel(name="nvjet_sm90_hsh_256x128", grid=(132, 1, 1), block=(384, 1, 1))
OTHER_KERNEL = Kernel(name="sm90_xmma_gemm_f16f16", grid=(264, 1, 1), block=(256, 1, 1))
CONFIG = GateConfig()  # 4 %, k 2, cap 8 %


def entry(value: float = 600.0, free: float = 800.0, clock: float | None = 1485.0, spread: float = 0.005,
          free_spread: float = 0.002, kernels: tuple[Kernel, ...] = (GEMM_KERNEL,), **kw: Any) -> Entry:
    """Recorded at 600 TFLOPS with the clock at ``clock`` (25 % below max by default): 800 at max clock."""
    return Entry(metric="TFLOPS", value=value, unit="TFLOPS", spread=spread, method=Method.TRACED_COLD,
                 kernels=kernels, at_max_clock=ClockFree(value=free, spread=free_spread, clock_mhz=clock), **kw)


def record(value: float, free: float | None, clock: float | None, spread: float = 0.005,
           cycles_spread: float | None = 0.002, bound: bool | None = True,
           kernels: tuple[Kernel, ...] = (GEMM_KERNEL,), **kw: Any) -> Record:
    return Record(case_id=CASE, nodeid=CASE, family="gemm", params={}, metric="TFLOPS", value=value, unit="TFLOPS",
                  status=Status.PASS, rel_iqr=spread, method=Method.TRACED_COLD, kernels=kernels,
                  value_at_max_clock=free, call_clock_mhz=clock, max_clock_mhz=MAX_MHZ, cycles_rel_iqr=cycles_spread,
                  clock_bound=bound, **kw)


def judged(r: Record, e: Entry | None = None) -> Record:
    return decide(r, entry() if e is None else e, CONFIG, Context())


# -- which figure is judged ------------------------------------------------------------------------------


def test_a_time_drop_that_is_only_the_clock_passes_on_cycles() -> None:
    """15 % slower than recorded because the host ran at 1287 MHz, 35 % below max; the cycles are unchanged."""
    r = judged(record(510.0, free=800.0, clock=1287.0))
    assert r.status == Status.PASS and r.judged_on == Basis.CYCLES
    assert r.delta_pct == pytest.approx(0.0) and r.baseline == 600.0  # the entry's time figure, as shown
    assert "judged on cycles: host ran at 1287 MHz, 35 % below max, 1485 MHz when recorded" in r.note
    assert "time -15.0 %, cycles +0.0 %" in r.note
    assert "the time drop is only the clock" in r.note


def test_on_time_the_same_figures_would_regress() -> None:
    """The control for the test above: the same record, judged on time, is a regression."""
    r = judged(record(510.0, free=800.0, clock=1287.0, bound=False))
    assert r.status == Status.REGRESSED and r.judged_on == Basis.TIME
    assert r.delta_pct == pytest.approx(-15.0)


def test_five_percent_more_cycles_is_a_regression_at_max_clock() -> None:
    free = 800.0 / 1.05  # 5 % more cycles per call
    r = judged(record(600.0, free=free, clock=1485.0))  # the time is unchanged: the host ran faster than
    assert r.status == Status.REGRESSED and r.judged_on == Basis.CYCLES
    assert r.delta_pct == pytest.approx(100 * (1 / 1.05 - 1))
    assert r.note.startswith("4.8 % below baseline at max clock (tolerance 4.0 %)")
    assert "judged on cycles" in r.note and "time +0.0 %, cycles -4.8 %" in r.note
    assert "the time drop is only the clock" not in r.note
    assert "same kernels" in r.note


def test_two_percent_more_cycles_passes_and_a_big_drop_in_cycles_is_an_improvement_at_max_clock() -> None:
    assert judged(record(590.0, free=800.0 / 1.02, clock=1400.0)).status == Status.PASS
    improved = judged(record(600.0, free=880.0, clock=1300.0))
    assert improved.status == Status.IMPROVED and improved.note.startswith("improved 10.0 % at max clock")


def test_a_kernel_change_is_judged_on_time_and_says_so() -> None:
    """A new kernel that burns more power runs at a lower clock: that is a real slowdown, so time decides."""
    r = judged(record(510.0, free=800.0, clock=1287.0, kernels=(OTHER_KERNEL,)))
    assert r.judged_on == Basis.TIME and r.status == Status.REGRESSED
    assert r.delta_pct == pytest.approx(-15.0)
    assert "judged on time, not cycles: the kernels changed" in r.note
    assert "kernel changed: nvjet_sm90_hsh_256x128 → sm90_xmma_gemm_f16f16" in r.note


def test_an_edited_kernel_with_the_same_name_is_a_kernel_change() -> None:
    recorded = replace(GEMM_KERNEL, code="0123456789ab")
    edited = replace(GEMM_KERNEL, code="ba9876543210")
    r = judged(record(510.0, free=800.0, clock=1287.0, kernels=(edited,)), entry(kernels=(recorded,)))
    assert r.judged_on == Basis.TIME and r.status == Status.REGRESSED
    assert "judged on time, not cycles" in r.note and "(same name, other code)" in r.note
    same = judged(record(510.0, free=800.0, clock=1287.0, kernels=(recorded,)), entry(kernels=(recorded,)))
    assert same.judged_on == Basis.CYCLES and same.status == Status.PASS


def test_a_kernel_change_at_max_clock_has_no_clock_note() -> None:
    r = judged(record(600.0, free=800.0, clock=1975.0, kernels=(OTHER_KERNEL,)), entry(clock=1975.0))
    assert r.judged_on == Basis.TIME and "judged on time, not cycles" not in r.note


@pytest.mark.parametrize("bound", [False, None])
def test_a_case_not_known_to_be_clock_bound_is_judged_on_time(bound: bool | None) -> None:
    """A GEMV's time follows memory, not the SM clock; with no peaks, clock-boundness is unknown."""
    r = judged(record(510.0, free=800.0, clock=1287.0, bound=bound))
    assert r.judged_on == Basis.TIME and r.status == Status.REGRESSED
    assert "judged on cycles" not in r.note


def test_a_case_at_max_clock_now_and_when_recorded_is_judged_on_time() -> None:
    """Both clocks within CLOCK_MOVED of the maximum: time is the figure (and cycles a different figure here)."""
    near = MAX_MHZ * (1 - CLOCK_MOVED / 2)
    r = judged(record(570.0, free=800.0, clock=near), entry(clock=near))
    assert r.judged_on == Basis.TIME and r.status == Status.REGRESSED  # -5 % on time
    assert r.delta_pct == pytest.approx(-5.0)


def test_a_clock_that_moved_only_when_recorded_still_means_cycles() -> None:
    """The host runs at max clock today, but the entry was recorded 25 % below it: time would be unfair."""
    r = judged(record(780.0, free=800.0, clock=MAX_MHZ))
    assert r.judged_on == Basis.CYCLES and r.status == Status.PASS
    moved_now = judged(record(510.0, free=800.0, clock=MAX_MHZ * 0.97), entry(clock=None))
    assert moved_now.judged_on == Basis.CYCLES


def test_clock_moved_is_a_strict_threshold() -> None:
    e = entry(value=800.0, clock=MAX_MHZ)
    just_below = MAX_MHZ * (1 - CLOCK_MOVED) + 1.0  # drop a little under 2 %
    just_past = MAX_MHZ * (1 - CLOCK_MOVED) - 1.0
    assert judge_basis(record(800.0, 800.0, just_below), e, "same kernels") == Basis.TIME
    assert judge_basis(record(800.0, 800.0, just_past), e, "same kernels") == Basis.CYCLES


def test_without_a_figure_at_max_clock_on_either_side_time_is_judged() -> None:
    no_free_entry = replace(entry(), at_max_clock=None)
    assert judged(record(510.0, free=800.0, clock=1287.0), no_free_entry).judged_on == Basis.TIME
    assert judged(record(510.0, free=None, clock=1287.0)).judged_on == Basis.TIME
    assert judge_basis(record(510.0, 800.0, 1287.0), entry(), "") == Basis.TIME  # kernels unknown
    assert judge_basis(record(510.0, 800.0, 1287.0), entry(),
                       "same kernels; launch changed: k grid 1x1x1 → 2x1x1") == Basis.TIME


# -- the band and noise of a cycles verdict --------------------------------------------------------------


def test_a_cycles_verdict_uses_the_spreads_its_cycles_were_recorded_with() -> None:
    """The entry's time spread (3 %, band 6 %) would pass a 5 % slowdown; its cycles spread (0.2 %) does not."""
    e = entry(spread=0.03, free_spread=0.002, runs=3, run_spread=0.05)
    reference = clock_free_entry(e)
    assert (reference.value, reference.spread, reference.run_spread) == (800.0, 0.002, 0.0)
    r = judged(record(600.0, free=800.0 / 1.05, clock=1300.0), e)
    assert r.judged_on == Basis.CYCLES and r.tolerance == pytest.approx(0.04) and r.status == Status.REGRESSED
    assert compare(600 * 0.95, e, CONFIG).status == Status.PASS  # on time its band is 6 %


def test_clock_free_entry_refuses_an_entry_without_one() -> None:
    with pytest.raises(ValueError, match="no figure at max clock"):
        clock_free_entry(replace(entry(), at_max_clock=None))


def test_noisy_time_with_quiet_cycles_is_judged_not_unreliable() -> None:
    """A power-capped GEMM's time IQR of 6 % is its clock wandering; its cycles are steady at 0.2 %."""
    r = judged(record(560.0, free=800.0, clock=1350.0, spread=0.06, cycles_spread=0.002))
    assert r.status == Status.PASS and r.judged_on == Basis.CYCLES


def test_noisy_cycles_are_unreliable() -> None:
    r = judged(record(600.0, free=800.0, clock=1350.0, spread=0.003, cycles_spread=0.05))
    assert r.status == Status.UNRELIABLE and not r.reliable
    assert r.note.startswith("noisy: cycles spread 5.0 % would need a band above the cap 8.0 %")
    assert needs_confirmation(r)


def test_noisy_time_of_a_case_judged_on_time_is_unreliable() -> None:
    r = judged(record(600.0, free=800.0, clock=1350.0, spread=0.06, bound=False))
    assert r.status == Status.UNRELIABLE and r.note.startswith("noisy: spread 6.0 %")


def test_confirm_keeps_the_try_with_the_better_judged_delta() -> None:
    """The first try ran at a higher clock (higher TFLOPS) but did 5 % more cycles; the second is slower in
    time and right on cycles. The standing result is the second: its judged delta is the better one."""
    first = judged(record(620.0, free=800.0 / 1.05, clock=1535.0))
    second = judged(record(560.0, free=797.0, clock=1390.0))
    assert first.status == Status.REGRESSED and second.status == Status.PASS
    assert first.value > second.value  # the rule before cycles would have kept the first
    chosen = confirm(first, second)
    assert chosen.status == Status.PASS and chosen.value == 560.0
    assert "re-measured: first 620 TFLOPS (REGRESSED), second 560 (PASS)" in chosen.note
    assert confirm(second, first).status == Status.PASS


def test_clock_drop() -> None:
    assert clock_drop(1485.0, 1980) == pytest.approx(0.25)
    assert clock_drop(2000.0, 1980) == 0.0  # a boost above the maximum is no drop
    assert clock_drop(None, 1980) == 0.0 and clock_drop(1485.0, None) == 0.0 and clock_drop(0.0, 1980) == 0.0


# -- check: what a record carries into the gate -----------------------------------------------------------

NODE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-4096x4096x4096-cold]"
IDENTITY = CaseIdentity(case_id=NODE, nodeid=NODE, family="gemm", params={}, gpu="nvidia-h200", gpu_index=0)
SGEMM = gemm_work(4096, 4096, 4096, "fp32")
SGEMV = gemv_work(16384, 16384, "fp32")


def stamped(work: Any, seconds: float, clock: float, n: int = 20, max_clock: int = MAX_MHZ) -> Measurement:
    """A traced measurement of ``seconds`` per call at ``clock`` MHz, 0.02 % spread."""
    samples = tuple(seconds * (1 + 1e-4 * ((i % 5) - 2)) for i in range(n))
    return Measurement(samples_s=samples, work=work, flush="cold", method=Method.TRACED_COLD,
                       cycles_samples=tuple(s * clock * 1e6 for s in samples), clock_samples_mhz=(clock,) * n,
                       max_clock_mhz=max_clock)


def test_clock_bound_follows_the_roofline_ridge() -> None:
    assert clock_bound(SGEMM, PEAKS) is True  # 683 FLOP/B against a ridge of ~14
    assert clock_bound(SGEMV, PEAKS) is False  # 0.5 FLOP/B
    assert clock_bound(SGEMM, None) is None


def test_case_record_carries_cycles_clock_and_the_figure_at_max_clock() -> None:
    m = stamped(SGEMM, 4e-3, 1485.0)
    r = case_record(IDENTITY, m, PEAKS, None, CONFIG, context_for(IDENTITY, update=False))
    assert r.clock_bound is True and r.max_clock_mhz == MAX_MHZ
    assert r.cycles_per_call == pytest.approx(4e-3 * 1485e6)
    assert r.call_clock_mhz == pytest.approx(1485.0)
    assert r.value_at_max_clock == pytest.approx(r.value * MAX_MHZ / 1485.0)
    assert r.cycles_rel_iqr == pytest.approx(m.summary.rel_iqr)
    e = entry_from_record(r)
    assert e.at_max_clock == ClockFree(value=r.value_at_max_clock, spread=r.cycles_rel_iqr, cycles=r.cycles_per_call,
                                       clock_mhz=r.call_clock_mhz)
    assert clock_free(replace(r, value_at_max_clock=None)) is None
    assert entry_from_record(replace(r, value_at_max_clock=None)).at_max_clock is None


def test_a_memory_bound_case_keeps_its_cycles_in_its_entry_but_is_never_read_on_them() -> None:
    """The FP8 projections recorded from runs had no figure at max clock: the record dropped it for a memory-bound
    case, so its entry had none. It is kept now (the entry holds the cycles), while the verdict and the tables read
    it only for a clock-bound case (``figure_at_max_clock``)."""
    m = stamped(SGEMV, 4e-4, 1485.0)  # 2684 GB/s, under the memory peak
    r = case_record(IDENTITY, m, PEAKS, None, CONFIG, context_for(IDENTITY, update=False))
    assert r.clock_bound is False and r.cycles_per_call == pytest.approx(4e-4 * 1485e6)
    assert r.value_at_max_clock == pytest.approx(m.value_at_max_clock)
    assert figure_at_max_clock(r.clock_bound, r.value_at_max_clock) is None
    free = entry_from_record(r).at_max_clock
    assert free is not None and free.cycles == pytest.approx(4e-4 * 1485e6) and free.clock_mhz == pytest.approx(1485.0)
    slower_clock = case_record(IDENTITY, stamped(SGEMV, 4e-4, 1300.0), PEAKS, entry_from_record(r), CONFIG,
                               context_for(IDENTITY, update=False))
    assert slower_clock.status == Status.PASS
    assert slower_clock.judged_on == Basis.TIME  # its entry's cycles are there, the rule does not read them


def test_a_ratio_s_figure_at_max_clock_is_the_ratio_of_the_sides_figures_at_max_clock() -> None:
    """A custom kernel at 1300 MHz against cuBLAS at 1600 MHz: their time ratio carries the two clocks, their
    ratio at max clock does not."""
    custom, cublas = stamped(SGEMM, 5e-3, 1300.0), stamped(SGEMM, 4e-3, 1600.0)
    r = ratio_record(IDENTITY, custom, cublas, "vs_cublas", None, CONFIG, context_for(IDENTITY, update=False),
                     PEAKS)
    assert r.metric == Metric.RATIO and r.value == pytest.approx(0.8)
    cycles_ratio = (4e-3 * 1600) / (5e-3 * 1300)
    assert r.value_at_max_clock == pytest.approx(cycles_ratio)
    assert r.call_clock_mhz == pytest.approx(1300.0)  # the slower side's
    assert r.clock_bound is True
    assert r.cycles_rel_iqr == pytest.approx((custom.summary.rel_iqr ** 2 + cublas.summary.rel_iqr ** 2) ** 0.5)
    gemv = ratio_record(IDENTITY, stamped(SGEMV, 1e-4, 1500.0), stamped(SGEMV, 1e-4, 1500.0), "x", None, CONFIG,
                        context_for(IDENTITY, update=False), PEAKS)
    assert gemv.clock_bound is False
    unstamped = Measurement(samples_s=(4e-3,) * 5, work=SGEMM, flush="cold", method=Method.TRACED_COLD)
    r = ratio_record(IDENTITY, custom, unstamped, "x", None, CONFIG, context_for(IDENTITY, update=False), PEAKS)
    assert r.value_at_max_clock is None and r.call_clock_mhz is None and r.cycles_rel_iqr is None


# -- recording -------------------------------------------------------------------------------------------


def test_update_records_a_clock_bound_case_whose_cycles_are_quiet_though_its_time_is_noisy() -> None:
    noisy_time = record(560.0, 800.0, 1400.0, spread=0.06, cycles_spread=0.002)
    assert decide(noisy_time, None, CONFIG, Context(update=True)).status == Status.UPDATED


def test_update_refuses_a_noisy_case_that_is_not_clock_bound_or_noisy_in_cycles_too() -> None:
    memory_bound = record(560.0, 800.0, 1400.0, spread=0.06, bound=False)
    noisy_cycles = record(560.0, 800.0, 1400.0, spread=0.06, cycles_spread=0.05)
    for r in (memory_bound, noisy_cycles):
        assert decide(r, None, CONFIG, Context(update=True)).status == Status.NOT_RECORDED
