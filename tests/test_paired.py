"""The A/B verdict on paired rounds (``verdict/paired.py``) with synthetic rounds: no GPU, no processes."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuperf.ab.paired import (DEFAULT_ROUNDS_MAX, DEFAULT_THRESHOLD, MIN_ROUNDS, PRECISION, CaseVerdict,
                                    Paired, RoundFigure, Verdict, confirm, enough, judge, needs_confirmation, pair,
                                    rounds_needed, within)
from gpuperf.verdict.student_t import t_quantile
from gpuperf.verdict.gate import Basis


def _rounds(shift: float, noise: float, count: int, seed: int) -> tuple[list[RoundFigure], list[RoundFigure]]:
    """``count`` rounds of a case at 50 TFLOPS on the base and ``50 × (1 + shift)`` on the head, each figure with
    ``noise`` relative Gaussian noise and a drift both sides share (the host warming up)."""
    draw = random.Random(seed)
    base, head = [], []
    for index in range(count):
        drift = 1 - 0.002 * index
        base.append(RoundFigure(50 * drift * (1 + draw.gauss(0, noise))))
        head.append(RoundFigure(50 * (1 + shift) * drift * (1 + draw.gauss(0, noise))))
    return base, head


def _run(shift: float, noise: float, seed: int) -> CaseVerdict:
    """The rounds as ``ab`` takes them: one more until ``enough``, then the verdict, a slowdown near the threshold
    re-measured."""
    def series(offset: int) -> tuple[CaseVerdict, Paired]:
        base, head = _rounds(shift, noise, DEFAULT_ROUNDS_MAX, seed + offset)
        count = next(n for n in range(1, DEFAULT_ROUNDS_MAX + 1) if enough(pair(base[:n], head[:n])))
        paired = pair(base[:count], head[:count])
        return judge(paired), paired

    first, paired = series(0)
    if needs_confirmation(first):
        return confirm(first, series(10_000)[0])
    return first


def test_t_quantile_inverts_the_tail() -> None:
    assert t_quantile(0.025, 2) == pytest.approx(4.302652729749464, rel=1e-12)
    assert t_quantile(0.025, 1e6) == pytest.approx(1.959966, rel=1e-6)
    assert t_quantile(0.975, 5) == pytest.approx(-t_quantile(0.025, 5), rel=1e-12)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        t_quantile(0.0, 3)


@pytest.mark.long
def test_aa_runs_are_never_slower_or_faster() -> None:
    verdicts = [_run(0.0, 0.003, seed) for seed in range(400)]
    flagged = [v for v in verdicts if v.status in (Verdict.SLOWER, Verdict.FASTER)]
    assert not flagged  # the rule's rate is far below 1 in 400 (evidence/ab.md)
    assert sum(v.status == Verdict.SAME for v in verdicts) >= 390


@pytest.mark.long
def test_a_planted_3_percent_slowdown_is_caught_and_confirmed() -> None:
    verdicts = [_run(-0.03, 0.003, seed) for seed in range(100)]
    assert all(v.status == Verdict.SLOWER for v in verdicts)
    assert all(-4.0 < (v.delta_pct or 0) < -2.0 and (v.high_pct or 0) < 0 for v in verdicts)
    # near the threshold: a second series, unless the first one's whole interval already lay past it
    assert all(v.series == 2 or (v.high_pct or 0) < -2.0 for v in verdicts)
    assert any(v.series == 2 for v in verdicts)


def test_a_slowdown_far_past_the_threshold_is_known_at_the_first_chance_and_shown_twice() -> None:
    """Its verdict is known after the fewest rounds, in each series; it is measured again all the same (a pair of
    processes can differ by more than the threshold), and stands."""
    verdicts = [_run(-0.10, 0.003, seed) for seed in range(50)]
    assert all(v.status == Verdict.SLOWER and v.series == 2 and (v.high_pct or 0) < -2.0 for v in verdicts)
    assert all(v.rounds == MIN_ROUNDS for v in verdicts)


def test_an_unchanged_case_noisier_than_the_precision_is_same_once_its_interval_lies_inside_the_threshold() -> None:
    paired = Paired((0.008, -0.012, 0.006, -0.006))  # half-width about 1.4 %: wider than 0.5 × 2 %
    assert paired.half_width > PRECISION * DEFAULT_THRESHOLD and within(paired, DEFAULT_THRESHOLD)
    assert enough(paired)
    verdict = judge(paired)
    assert verdict.status == Verdict.SAME and "inside ±2 %" in verdict.note and not verdict.failed
    straddling = Paired((0.03, -0.03, 0.02, -0.025))
    assert not within(straddling, DEFAULT_THRESHOLD) and not enough(straddling)  # more rounds, up to the limit
    assert judge(straddling).status == Verdict.SAME and "reaches past ±2 %" in judge(straddling).note


def test_a_noisy_case_says_about_how_many_rounds_would_settle_it() -> None:
    straddling = Paired((0.03, -0.03, 0.02, -0.025))
    needed = rounds_needed(straddling)
    assert needed is not None and needed > straddling.rounds
    spread = statistics.stdev(straddling.log_ratios)
    half_width = t_quantile(0.025, needed - 1) * spread / math.sqrt(needed)
    assert half_width <= PRECISION * DEFAULT_THRESHOLD < t_quantile(0.025, needed - 2) * spread / math.sqrt(needed - 1)
    assert f"about {needed} would" in judge(straddling).note
    assert rounds_needed(Paired((0.01,))) is None
    assert rounds_needed(Paired((0.0, 0.0, 0.0))) == MIN_ROUNDS


def test_a_slowdown_under_the_threshold_is_same_even_when_certain() -> None:
    verdict = _run(-0.01, 0.001, 7)
    assert verdict.status == Verdict.SAME and (verdict.high_pct or 0) < 0  # real, but inside the threshold


def test_a_speedup_is_faster() -> None:
    assert _run(0.05, 0.003, 3).status == Verdict.FASTER


def test_at_the_round_limit_a_mean_within_the_threshold_is_same_and_one_past_it_noisy() -> None:
    """Rounds that scatter by several per cent (where a case's buffers land moves it: an H200's Llama-3-70B
    gate_up-t1 projection read [-2.90, +3.77] % after 12 rounds of an A/A run) cannot settle the interval in the
    round limit: a mean within ±2 % is SAME, judged on its mean and saying so; a mean past it whose interval still
    reaches zero is NOISY, never SAME."""
    within = judge(Paired((-0.05, 0.06, -0.03, 0.04, 0.01, -0.02)))
    assert within.status == Verdict.SAME and not within.failed
    assert "judged on its mean at the round limit" in within.note and "--rounds-max" in within.note
    past = judge(Paired((-0.09, 0.02, -0.08, 0.03, -0.07, -0.01)))
    assert abs(past.delta_pct or 0) > 2 and (past.high_pct or 0) > 0
    assert past.status == Verdict.NOISY and past.failed and "--rounds-max" in past.note


def test_a_transient_slowdown_is_cleared_by_its_second_series() -> None:
    first = judge(pair(*_rounds(-0.05, 0.002, 6, 1)))
    second = judge(pair(*_rounds(0.0, 0.002, 6, 2)))
    assert first.status == Verdict.SLOWER
    standing = confirm(first, second)
    assert standing.status == Verdict.SAME and "first series -5" in standing.note and not standing.failed


def test_a_slowdown_not_shown_twice_does_not_stand() -> None:
    """On an H200 an unchanged FP8 projection read -2.05 % (SLOWER, its interval reaching back across -2 %) in one
    pair of processes and -1.73 % (NOISY) in its second series: the slowdown did not show twice, so the second
    series' verdict stands, not the first's; shown twice, the better slowdown stands."""
    first = CaseVerdict(Verdict.SLOWER, -2.05, -3.22, -0.88, 12)
    noisy = CaseVerdict(Verdict.NOISY, -1.73, -2.9, -0.56, 12)
    assert confirm(first, noisy).status == Verdict.NOISY
    slower = CaseVerdict(Verdict.SLOWER, -2.4, -2.9, -2.1, 3)
    standing = confirm(first, slower)
    assert (standing.status, standing.delta_pct, standing.series) == (Verdict.SLOWER, -2.05, 2)
    assert "fresh pair of processes" in standing.note


def test_a_speed_up_is_confirmed_like_a_slowdown() -> None:
    """On an H200 an A/A run of unchanged code read two batched GEMMs (strided bf16 and fp16, 100000x8x8x8) FASTER by
    more than 2 % in one pair of processes: a process offset, which a fresh pair clears. A speed-up stands only when
    shown twice (the series nearer zero then); a change the second series turns round is NOISY."""
    faster = CaseVerdict(Verdict.FASTER, 2.4, 2.1, 2.7, 3)
    assert needs_confirmation(faster)
    same = CaseVerdict(Verdict.SAME, 0.3, -0.2, 0.8, 3)
    cleared = confirm(faster, same)
    assert cleared.status == Verdict.SAME and "first series +2.40 % (FASTER)" in cleared.note
    twice = confirm(faster, CaseVerdict(Verdict.FASTER, 3.1, 2.6, 3.6, 3))
    assert (twice.status, twice.delta_pct) == (Verdict.FASTER, 2.4)
    turned = confirm(CaseVerdict(Verdict.SLOWER, -2.2, -2.5, -2.1, 3), CaseVerdict(Verdict.FASTER, 2.3, 2.1, 2.5, 3))
    assert turned.status == Verdict.NOISY and turned.failed and "the two series disagree" in turned.note


def test_the_stopping_rule_waits_for_min_rounds_and_the_needed_precision() -> None:
    exact = pair([RoundFigure(10.0)] * 2, [RoundFigure(10.0)] * 2)
    assert not enough(exact)  # no spread, but fewer than MIN_ROUNDS
    assert enough(Paired((0.0, 0.001, -0.001)), 0.02)
    wide = Paired((0.0, 0.02, -0.02))
    assert wide.half_width > PRECISION * 0.02 and not enough(wide, 0.02)
    assert enough(wide, 0.02, rounds_max=3)
    assert MIN_ROUNDS >= 3 and DEFAULT_THRESHOLD == 0.02


def test_a_clock_capped_round_is_judged_on_cycles_unless_the_kernels_changed() -> None:
    capped = RoundFigure(40.0, value_at_max_clock=50.0, clock_bound=True, call_clock_mhz=1600, max_clock_mhz=1980)
    free = RoundFigure(50.0, value_at_max_clock=50.0, clock_bound=True, call_clock_mhz=1975, max_clock_mhz=1980)
    base, head = [free] * 4, [capped] * 4
    on_cycles = pair(base, head)
    assert on_cycles.basis == Basis.CYCLES and on_cycles.delta_pct == pytest.approx(0.0)
    on_time = pair(base, head, same_kernels=False)
    assert on_time.basis == Basis.TIME and on_time.delta_pct == pytest.approx(-20.0)
    assert judge(on_cycles).status == Verdict.SAME and "judged on cycles" in judge(on_cycles).note


def test_no_paired_round_is_unpaired_and_fails() -> None:
    verdict = judge(pair([RoundFigure(10.0)], [RoundFigure(math.nan)]))
    assert verdict.status == Verdict.UNPAIRED and verdict.failed


@pytest.mark.long
@given(st.lists(st.floats(-0.2, 0.2), min_size=2, max_size=30), st.floats(0.005, 0.1))
def test_the_verdict_follows_its_interval(ratios: list[float], threshold: float) -> None:
    paired = Paired(tuple(ratios))
    verdict = judge(paired, threshold)
    low, high = paired.interval_pct
    assert low <= paired.delta_pct <= high
    if verdict.status == Verdict.SLOWER:
        assert paired.delta_pct < -100 * threshold and high < 0
    if verdict.status == Verdict.SAME:
        settled = paired.half_width <= PRECISION * threshold or -100 * threshold <= low <= high <= 100 * threshold
        assert settled or (abs(paired.delta_pct) <= 100 * threshold and "judged on its mean" in verdict.note)
    if verdict.status == Verdict.NOISY:
        assert (low < -100 * threshold or high > 100 * threshold) and abs(paired.delta_pct) > 100 * threshold
    assert verdict.status in Verdict.ORDER
