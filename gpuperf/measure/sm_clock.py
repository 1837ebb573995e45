"""The SM clock each measured call ran at, from the GPU's own counters. Pure (NumPy only).

Why not NVML: a large tensor-core GEMM at the power limit moves its SM clock within milliseconds (1980 →
1125–1600 MHz on an H200), and NVML's polled clock does not follow that (polled every 0.5 ms during 5 ms
batches, throughput per GHz of the polled clock scattered as much as the throughput itself). The SM's cycle
counter does, exactly: ``%clock64`` counts the cycles of the SM that reads it and ``%globaltimer`` is a
device-wide nanosecond timer, so two reads on one SM give that SM's mean clock in between.

The separator kernels the measurement loop already launches before every traced call (the L2 flush when
cold, an empty marker when hot) stamp them, at no extra launch: thread 0 of every block writes one *stamp*
of ``STAMP_FIELDS`` unsigned 64-bit words, ``[smid, clock at block start, time at block start, clock at block
end, time at block end]``, into the slot of that separator launch (``timing.py`` holds the kernels). Call
``k`` of a batch ran between separator ``k`` and separator ``k + 1``; on each SM the interval from the last
block end of separator ``k`` to the first block start of separator ``k + 1`` holds the call (and the
microsecond launch gaps around it, during which the SM's clock runs at the same rate). The call's clock is
the mean over SMs of cycles ÷ nanoseconds in that interval, and its *cycles* are its kernel span times that
clock: the work a call does in SM cycles, which does not change when the power state lowers the clock of a
compute-bound kernel (measured on an H200: FP16 4096×11008×4096 time p5–p95 16.3 % as the clock fell
1697 → 1285 MHz, cycles per call 1.1 %).

On one SM both counters only grow, so the block with the earliest start time also has the smallest start
clock, and the one with the latest end has the largest end clock: per SM the minimum (maximum) of each word is
taken separately, without pairing blocks.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy

#: Words per stamp: smid, start clock, start time (ns), end clock, end time (ns).
STAMP_FIELDS = 5
SMID, START_CLOCK, START_NS, END_CLOCK, END_NS = range(STAMP_FIELDS)
#: A call whose interval is shorter than this on every SM gives no clock (the timer's tick would dominate).
MIN_INTERVAL_NS = 1_000


def call_clocks_mhz(stamps: numpy.ndarray) -> list[float]:
    """The mean SM clock (MHz) of each call between consecutive separator launches.

    ``stamps`` has shape ``(separators, blocks, STAMP_FIELDS)`` (unsigned 64-bit); the result has one value per
    call, ``separators - 1`` of them, NaN where no SM gave a usable interval (counters not advancing, an
    interval shorter than ``MIN_INTERVAL_NS``)."""
    if stamps.ndim != 3 or stamps.shape[2] != STAMP_FIELDS:
        raise ValueError(f"stamps must have shape (separators, blocks, {STAMP_FIELDS}), got {stamps.shape}")
    separators, blocks = stamps.shape[0], stamps.shape[1]
    if separators < 2 or blocks == 0:
        return []
    words = stamps.astype(numpy.int64)  # counters fit: clock64 and globaltimer stay far below 2**63
    smid = words[:, :, SMID]
    sms = int(smid.max()) + 1
    flat = (numpy.arange(separators)[:, None] * sms + smid).ravel()
    size = separators * sms
    start_clock = _reduce(numpy.minimum, flat, words[:, :, START_CLOCK], size, numpy.iinfo(numpy.int64).max)
    start_ns = _reduce(numpy.minimum, flat, words[:, :, START_NS], size, numpy.iinfo(numpy.int64).max)
    end_clock = _reduce(numpy.maximum, flat, words[:, :, END_CLOCK], size, -1)
    end_ns = _reduce(numpy.maximum, flat, words[:, :, END_NS], size, -1)
    seen = _reduce(numpy.maximum, flat, numpy.ones_like(smid), size, 0).reshape(separators, sms).astype(bool)
    start_clock, start_ns = start_clock.reshape(separators, sms), start_ns.reshape(separators, sms)
    end_clock, end_ns = end_clock.reshape(separators, sms), end_ns.reshape(separators, sms)
    cycles = start_clock[1:] - end_clock[:-1]
    nanoseconds = start_ns[1:] - end_ns[:-1]
    usable = seen[1:] & seen[:-1] & (nanoseconds >= MIN_INTERVAL_NS) & (cycles > 0)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        ghz = numpy.where(usable, cycles / numpy.where(usable, nanoseconds, 1), numpy.nan)
        counts = usable.sum(axis=1)
        mean = numpy.where(counts > 0, numpy.nansum(ghz, axis=1) / numpy.maximum(counts, 1), numpy.nan)
    return [float(value) * 1e3 for value in mean]


def _reduce(ufunc: numpy.ufunc, index: numpy.ndarray, values: numpy.ndarray, size: int,
            initial: int) -> numpy.ndarray:
    out = numpy.full(size, initial, dtype=numpy.int64)
    ufunc.at(out, index, values.ravel().astype(numpy.int64))
    return out


def call_cycles(spans_s: Sequence[float], clocks_mhz: Sequence[float]) -> list[float]:
    """Each call's cycles: its kernel span times the clock it ran at (NaN where the clock is unknown)."""
    if len(spans_s) != len(clocks_mhz):
        raise ValueError(f"{len(spans_s)} spans but {len(clocks_mhz)} clocks")
    return [span * clock * 1e6 if math.isfinite(clock) else math.nan for span, clock in zip(spans_s, clocks_mhz)]


def group_means(values: Sequence[float], group: int) -> list[float]:
    """The mean of each run of ``group`` consecutive values, over the finite ones (NaN when none is)."""
    if group < 1:
        raise ValueError(f"group must be at least 1, got {group}")
    means = []
    for start in range(0, len(values), group):
        finite = [v for v in values[start:start + group] if math.isfinite(v)]
        means.append(math.fsum(finite) / len(finite) if finite else math.nan)
    return means
