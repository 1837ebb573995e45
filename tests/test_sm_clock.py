"""``gpuperf.measure.sm_clock``: each call's SM clock from the separator kernels' ``%clock64``/``%globaltimer``
stamps, on synthetic stamp arrays whose clock is known by construction."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy
import pytest

from gpuperf.measure.sm_clock import (END_CLOCK, END_NS, MIN_INTERVAL_NS, SMID, START_CLOCK, START_NS,
                                      STAMP_FIELDS, call_clocks_mhz, call_cycles, group_means)

SEPARATOR_NS = 2_000  # how long a separator kernel's blocks run on an SM, at most


class Counter:
    """One SM's ``%clock64``: an offset plus the integral of a piecewise constant clock over ``%globaltimer``."""

    def __init__(self, offset: int, starts_ns: Sequence[int], rates_ghz: Sequence[float]) -> None:
        self.offset = offset
        self.starts_ns = list(starts_ns)  # rate ``rates_ghz[i]`` from ``starts_ns[i]`` on
        self.rates_ghz = list(rates_ghz)

    def at(self, t_ns: int) -> int:
        cycles = 0.0
        for i, start in enumerate(self.starts_ns):
            end = self.starts_ns[i + 1] if i + 1 < len(self.starts_ns) else math.inf
            if t_ns <= start:
                break
            cycles += self.rates_ghz[i] * (min(t_ns, end) - start)
        return self.offset + round(cycles)


def stamps_for(separator_starts_ns: Sequence[int], call_mhz: Sequence[float], sm_offsets: Sequence[int],
               blocks_per_sm: int, sm_scale: Sequence[float] | None = None,
               rng: numpy.random.Generator | None = None) -> numpy.ndarray:
    """Stamps of separators launched at ``separator_starts_ns``, the clock running at ``call_mhz[k]`` from
    separator ``k``'s launch to separator ``k + 1``'s (times ``sm_scale[s]`` on SM ``s``). Every SM's first block
    of a separator starts at its launch, the others start later and end in any order: the minima and maxima of
    each word are on different blocks."""
    rng = rng or numpy.random.default_rng(7)
    sms = len(sm_offsets)
    scale = list(sm_scale or [1.0] * sms)
    counters = [Counter(sm_offsets[s], separator_starts_ns, [scale[s] * mhz / 1e3 for mhz in call_mhz] + [1.98])
                for s in range(sms)]
    stamps = numpy.zeros((len(separator_starts_ns), sms * blocks_per_sm, STAMP_FIELDS), dtype=numpy.uint64)
    for k, launch in enumerate(separator_starts_ns):
        order = rng.permutation(sms * blocks_per_sm)  # blocks land on SMs in any order of the grid
        for position, block in enumerate(order):
            sm, index = divmod(int(position), blocks_per_sm)
            start = launch + (0 if index == 0 else int(rng.integers(10, SEPARATOR_NS // 2)))
            end = start + int(rng.integers(10, SEPARATOR_NS // 2))
            stamps[k, block] = (sm, counters[sm].at(start), start, counters[sm].at(end), end)
    return stamps


SMS = (0, 10 ** 12, 3 * 10 ** 11 + 17, 5)  # counter offsets: every SM's clock64 starts elsewhere


def launches(intervals_ns: Sequence[int], first: int = 10 ** 9) -> list[int]:
    times = [first]
    for interval in intervals_ns:
        times.append(times[-1] + interval)
    return times


def test_a_known_clock_comes_back_for_every_call() -> None:
    stamps = stamps_for(launches([50_000, 120_000, 80_000, 400_000]), [1500.0] * 4, SMS, blocks_per_sm=4)
    assert call_clocks_mhz(stamps) == pytest.approx([1500.0] * 4, rel=1e-4)


def test_each_call_gets_the_clock_of_its_own_interval() -> None:
    """A power-capped GEMM's clock falls call by call: every call reads its own, not an average."""
    clocks = [1980.0, 1755.0, 1410.0, 1125.0, 1600.0]
    stamps = stamps_for(launches([300_000] * 5), clocks, SMS, blocks_per_sm=3)
    assert call_clocks_mhz(stamps) == pytest.approx(clocks, rel=1e-4)


def test_the_clock_is_the_mean_over_the_sms() -> None:
    stamps = stamps_for(launches([200_000, 200_000]), [1500.0, 1500.0], SMS, blocks_per_sm=2,
                        sm_scale=[1.0, 1.1, 0.9, 1.2])
    assert call_clocks_mhz(stamps) == pytest.approx([1500.0 * 1.05] * 2, rel=1e-4)


def test_an_sm_missing_from_one_separator_is_left_out_of_its_two_calls() -> None:
    """SM 3 ran no block of separator 2 (the grid's blocks went elsewhere): calls 1 and 2 are averaged over
    the other SMs, and SM 3's different clock shows only in the calls it bounds on both sides."""
    scale = [1.0, 1.0, 1.0, 2.0]  # SM 3 would double the others' clock
    stamps = stamps_for(launches([200_000] * 4), [1500.0] * 4, SMS, blocks_per_sm=2, sm_scale=scale)
    on_sm3 = numpy.flatnonzero(stamps[2, :, SMID] == 3)
    donor = numpy.flatnonzero(stamps[2, :, SMID] == 0)[0]
    stamps[2, on_sm3] = stamps[2, donor]  # those blocks ran on SM 0 instead (same stamps as one of its blocks)
    assert not (stamps[2, :, SMID] == 3).any()
    with_sm3 = 1500.0 * (1 + 1 + 1 + 2) / 4
    assert call_clocks_mhz(stamps) == pytest.approx([with_sm3, 1500.0, 1500.0, with_sm3], rel=1e-4)


def test_an_interval_shorter_than_the_minimum_gives_no_clock() -> None:
    gap = MIN_INTERVAL_NS // 2  # the next separator starts this soon after the last block of the previous ends
    starts = launches([200_000, SEPARATOR_NS + gap, 200_000])
    stamps = stamps_for(starts, [1500.0] * 3, SMS, blocks_per_sm=1)
    for sm in range(len(SMS)):  # every SM's block of separator 1 ends right at its window's end
        block = numpy.flatnonzero(stamps[1, :, SMID] == sm)[0]
        stamps[1, block, END_NS] = starts[1] + SEPARATOR_NS
        stamps[1, block, END_CLOCK] = stamps[1, block, START_CLOCK] + round(1.5 * (SEPARATOR_NS - (
            int(stamps[1, block, START_NS]) - starts[1])))
    clocks = call_clocks_mhz(stamps)
    assert clocks[0] == pytest.approx(1500.0, rel=1e-4) and clocks[2] == pytest.approx(1500.0, rel=1e-4)
    assert math.isnan(clocks[1])


def test_only_the_sms_with_a_long_enough_interval_count() -> None:
    starts = launches([200_000, 200_000])
    stamps = stamps_for(starts, [1500.0, 1500.0], SMS, blocks_per_sm=1, sm_scale=[1.0, 1.0, 1.0, 2.0])
    block = numpy.flatnonzero(stamps[1, :, SMID] == 3)[0]
    stamps[1, block, START_NS] = stamps[0, numpy.flatnonzero(stamps[0, :, SMID] == 3)[0], END_NS] + 10
    clocks = call_clocks_mhz(stamps)
    assert clocks[0] == pytest.approx(1500.0, rel=1e-4)  # SM 3's 10 ns interval is left out
    assert clocks[1] == pytest.approx(1500.0 * 5 / 4, rel=1e-4)  # the next call still has SM 3


def test_counters_that_do_not_advance_give_no_clock() -> None:
    stamps = stamps_for(launches([200_000, 200_000]), [1500.0, 1500.0], SMS, blocks_per_sm=1)
    stamps[1, :, START_CLOCK] = 0  # a stamp slot left unwritten reads as zeros
    clocks = call_clocks_mhz(stamps)
    assert math.isnan(clocks[0])
    assert clocks[1] == pytest.approx(1500.0, rel=1e-4)


@pytest.mark.parametrize("shape", [(3, 4, 4), (3, 20), (3, 4, 5, 1), (3, 4, 6)])
def test_a_wrong_shape_is_refused(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=f"stamps must have shape \\(separators, blocks, {STAMP_FIELDS}\\)"):
        call_clocks_mhz(numpy.zeros(shape, dtype=numpy.uint64))


def test_fewer_than_two_separators_or_no_blocks_give_no_calls() -> None:
    assert call_clocks_mhz(numpy.zeros((1, 8, STAMP_FIELDS), dtype=numpy.uint64)) == []
    assert call_clocks_mhz(numpy.zeros((5, 0, STAMP_FIELDS), dtype=numpy.uint64)) == []


def test_call_cycles_are_span_times_clock() -> None:
    cycles = call_cycles([1e-3, 2.5e-4, 4e-6], [1500.0, 1980.0, math.nan])
    assert cycles[:2] == pytest.approx([1.5e6, 495_000.0])
    assert math.isnan(cycles[2])
    with pytest.raises(ValueError, match="2 spans but 3 clocks"):
        call_cycles([1e-3, 1e-3], [1.0, 2.0, 3.0])


def test_group_means_average_the_finite_values_of_each_group() -> None:
    nan = math.nan
    means = group_means([1.0, 2.0, 3.0, nan, nan, nan, 7.0, nan], 3)
    assert means[0] == 2.0 and math.isnan(means[1]) and means[2] == 7.0 and len(means) == 3
    assert group_means([4.0, 6.0, 8.0], 1) == [4.0, 6.0, 8.0]
    assert group_means([], 4) == []
    with pytest.raises(ValueError, match="group must be at least 1, got 0"):
        group_means([1.0], 0)


def test_the_kernel_writes_the_words_in_the_order_the_reader_takes_them() -> None:
    """``separators.py``'s ``gpuperf_stamp`` writes ``STAMP_FIELDS`` words per block: smid, the start clock and time
    the caller read, then the end clock and time; the reader's word names must be those positions."""
    from gpuperf.measure import separators

    source = separators._STAMP_SOURCE
    assert f"stamps + {STAMP_FIELDS}ull * blockIdx.x" in source
    written = dict(re.findall(r"s\[(\d)\] = (\w+);", source))
    assert {int(k): v for k, v in written.items()} == {SMID: "sm", START_CLOCK: "c0", START_NS: "t0",
                                                       END_CLOCK: "c1", END_NS: "t1"}
    assert "gpuperf_stamp(stamps, c0, t0)" in separators._FLUSH_SOURCE  # the flush passes its block-start reads
