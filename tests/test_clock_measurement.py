"""Cycles per call and the SM clock through the measurement loop, end to end on the simulated device of
``test_timing.py``: a flush buffer that stamps ``%clock64``/``%globaltimer`` as the real separator kernels do,
from a simulated SM clock, and the ``Measurement`` figures derived from them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy
import pytest
from test_timing import (FLUSH_COST_S, L2, WORK, SimArray, SimBackend, SimDevice, SimFlush, SimNvml, SimTracer,
                         launched, make_timer)

from gpuperf.measure.measurement import DEFAULT_MAX_TRACED_CALLS, Measurement, Method
from gpuperf.measure.metrics import gemm_work
from gpuperf.measure.sm_clock import STAMP_FIELDS
from gpuperf.measure.stats import StoppingRule
from gpuperf.measure.timing import SamplingConfig, Timer

MAX_MHZ = 1980  # SimNvml's maximum SM clock
OFFSETS = (7, 10 ** 12, 4 * 10 ** 11 + 3)  # each SM's clock64 counts from elsewhere
BLOCKS_PER_SM = 2


@dataclass
class ClockedDevice(SimDevice):
    """A simulated device whose SMs count cycles at ``mhz`` while its time advances."""

    mhz: float = 1500.0
    cycles: float = 0.0

    def advance(self, seconds: float, what: str) -> None:
        self.cycles += seconds * self.mhz * 1e6
        super().advance(seconds, what)


class StampingFlush(SimFlush):
    """``SimFlush`` with the stamp slots of ``timing.FlushBuffer``: a separator launched with a slot writes one
    stamp per block (smid, clock and time at block start and end) from the simulated counters."""

    def __init__(self, device: ClockedDevice, slots: int = DEFAULT_MAX_TRACED_CALLS + 1) -> None:
        super().__init__(device)
        self.clocked = device
        self.stamps = numpy.zeros((slots, len(OFFSETS) * BLOCKS_PER_SM, STAMP_FIELDS), dtype=numpy.uint64)
        self.traced_slots: list[int | None] = []  # the slot of every separator launched while tracing

    @property
    def stamp_slots(self) -> int:
        return int(self.stamps.shape[0])

    def _separator(self, slot: int | None, seconds: float, what: str) -> None:
        tracer = self.device.tracer
        if tracer is not None and tracer.recording:
            self.traced_slots.append(slot)
        t0, c0 = self.device.now, self.clocked.cycles
        self.device.advance(seconds, what)
        t1, c1 = self.device.now, self.clocked.cycles
        if slot is None:
            return
        for block in range(self.stamps.shape[1]):
            sm = block % len(OFFSETS)
            self.stamps[slot, block] = (sm, OFFSETS[sm] + round(c0), round(t0 * 1e9), OFFSETS[sm] + round(c1),
                                        round(t1 * 1e9))

    def enqueue(self, stream: object, slot: int | None = None) -> None:
        self.count += 1
        self._separator(slot, FLUSH_COST_S, "flush")

    def mark(self, stream: object, slot: int | None = None) -> None:
        self._separator(slot, 1e-6, "mark")

    def read_stamps(self, separators: int) -> numpy.ndarray:
        return self.stamps[:separators].copy()


def stamping_timer(device: ClockedDevice, slots: int = DEFAULT_MAX_TRACED_CALLS + 1,
                   rule: StoppingRule | None = None, **config: Any) -> tuple[Timer, StampingFlush]:
    flush = StampingFlush(device, slots)
    sampling = SamplingConfig(rule=rule or StoppingRule(min_samples=10, min_time_s=0.01, noise_target=0.005,
                                                        timeout_s=5.0), **config)
    timer = Timer(L2, flush, SimNvml(), sampling, backend=SimBackend(device),
                  sleep=lambda s: device.advance(s, "sleep"), clock=lambda: device.now, tracer=SimTracer(device))
    return timer, flush


@pytest.mark.parametrize(("flush", "method"), [("cold", Method.TRACED_COLD), ("hot", Method.TRACED_HOT)])
def test_cycles_per_call_are_the_kernel_span_times_the_sm_clock(flush: str, method: str) -> None:
    device = ClockedDevice(mhz=1500.0)
    timer, _ = stamping_timer(device)
    span, gap = 100e-6, 4e-6
    m = timer.measure(launched(device, span, gap), WORK, operands=(SimArray(2**30),), flush=flush)
    assert m.method == method and m.median_s == pytest.approx(span)
    assert m.cycles_per_call == pytest.approx(span * 1500e6, rel=1e-4)  # 150 000 cycles
    assert m.call_clock_mhz == pytest.approx(1500.0, rel=1e-4)
    assert len(m.cycles_samples) == len(m.samples_s) == len(m.clock_samples_mhz)
    assert m.max_clock_mhz == MAX_MHZ
    assert m.value_at_max_clock == pytest.approx(WORK.value(span * 1500 / MAX_MHZ), rel=1e-4)
    assert m.value_at_max_clock == pytest.approx(m.value * MAX_MHZ / 1500, rel=1e-4)  # faster at max clock


def test_every_traced_call_is_bounded_by_stamped_separators_in_slot_order() -> None:
    device = ClockedDevice()
    timer, flush = stamping_timer(device)
    timer.measure(launched(device, 100e-6, 0.0), WORK, operands=(SimArray(2**30),), flush="cold")
    slots = flush.traced_slots
    assert slots[:2] == [0, 1]  # the probe: one call between two separators
    batches = slots[2:]
    per_batch = batches.index(0, 1)  # the next batch starts at slot 0 again
    assert per_batch <= flush.stamp_slots and per_batch > 2
    assert batches == list(range(per_batch)) * (len(batches) // per_batch)


def test_a_falling_clock_changes_the_time_but_not_the_cycles() -> None:
    """A power-capped GEMM: the same work (300 000 cycles) at a clock wandering 1980 → 1300 MHz."""
    device = ClockedDevice()
    cycles = 300_000.0
    clocks = [1980.0 - 40.0 * (i % 18) for i in range(18)]  # 1980 … 1300 MHz, call after call
    calls = [0]

    def capped(*operands: object) -> None:
        device.mhz = clocks[calls[0] % len(clocks)]
        calls[0] += 1
        device.advance(2e-6, "gap")
        device.advance(cycles / (device.mhz * 1e6), "call")

    rule = StoppingRule(min_samples=10, min_time_s=0.01, noise_target=0.005, timeout_s=0.3)
    timer, _ = stamping_timer(device, rule=rule, min_sample_s=1e-5)  # one call per sample
    m = timer.measure(capped, WORK, operands=(SimArray(2**30),), flush="cold")
    assert m.calls_per_sample == 1
    assert max(m.samples_s) / min(m.samples_s) == pytest.approx(1980 / 1300, rel=1e-3)
    assert m.summary.rel_iqr > 0.1
    assert m.cycles_summary is not None and m.cycles_summary.rel_iqr < 1e-4
    assert all(c == pytest.approx(cycles, rel=1e-4) for c in m.cycles_samples)
    assert m.cycles_per_call == pytest.approx(cycles, rel=1e-4)
    assert min(m.clock_samples_mhz) == pytest.approx(1300, rel=1e-4)
    assert max(m.clock_samples_mhz) == pytest.approx(1980, rel=1e-4)
    assert m.value_at_max_clock == pytest.approx(WORK.value(cycles / (MAX_MHZ * 1e6)), rel=1e-4)


def test_without_stamp_slots_a_traced_measurement_has_no_cycles() -> None:
    device = SimDevice()
    timer, flush, _ = make_timer(device, traced=True)
    assert not hasattr(flush, "stamp_slots")
    m = timer.measure(launched(device, 100e-6, 0.0), WORK, operands=(SimArray(2**30),), flush="cold")
    assert m.method == Method.TRACED_COLD and m.median_s == pytest.approx(100e-6)
    assert m.cycles_samples == () and m.clock_samples_mhz == ()
    assert m.cycles_per_call is None and m.call_clock_mhz is None and m.value_at_max_clock is None


@pytest.mark.parametrize(("slots", "stamped"), [(8, False), (100, False), (101, True)])
def test_a_batch_is_stamped_only_when_its_separators_fit_the_slots(slots: int, stamped: bool) -> None:
    """Batches of 100 calls of 100 µs (two 5 ms samples of 50 calls) need 101 slots, one separator more than
    calls; with fewer only the one-call probe is stamped, no slot past the last is written, and no sample has
    cycles."""
    device = ClockedDevice()
    timer, flush = stamping_timer(device, slots=slots)
    m = timer.measure(launched(device, 100e-6, 0.0), WORK, operands=(SimArray(2**30),), flush="cold")
    assert m.calls_per_sample == 50
    assert flush.traced_slots[:2] == [0, 1]
    batches = flush.traced_slots[2:]
    if stamped:
        assert batches == list(range(101)) * (len(batches) // 101) and len(batches) >= 101
        assert m.cycles_per_call == pytest.approx(100e-6 * 1500e6, rel=1e-4)
    else:
        assert set(batches) == {None}
        assert m.cycles_samples == () and m.cycles_per_call is None and m.call_clock_mhz is None


def test_an_event_timed_measurement_has_no_cycles() -> None:
    device = ClockedDevice()
    flush = StampingFlush(device)
    sampling = SamplingConfig(rule=StoppingRule(min_samples=10, min_time_s=0.01, noise_target=0.005, timeout_s=5.0))
    timer = Timer(L2, flush, SimNvml(), sampling, backend=SimBackend(device),
                  sleep=lambda s: device.advance(s, "sleep"), clock=lambda: device.now)
    m = timer.measure(launched(device, 200e-6, 0.0), WORK, operands=(SimArray(2**30),), flush="cold")
    assert m.method == Method.COLD_FLUSH and m.cycles_per_call is None and m.max_clock_mhz is None
    assert flush.traced_slots == []


# --- Measurement's figures from its samples --------------------------------------------------------------


def measurement(cycles: list[float], clocks: list[float], max_clock: int | None = MAX_MHZ,
                samples: list[float] | None = None, work: Any = WORK) -> Measurement:
    return Measurement(samples_s=tuple(samples or [1e-4] * len(cycles)), work=work, flush="cold",
                       method=Method.TRACED_COLD, cycles_samples=tuple(cycles), clock_samples_mhz=tuple(clocks),
                       max_clock_mhz=max_clock)


def test_cycles_need_a_clock_in_at_least_half_the_samples() -> None:
    nan = math.nan
    half = measurement([100.0, 120.0, nan, nan], [1500.0, 1600.0, nan, nan])
    assert half.cycles_summary is not None and half.cycles_summary.n == 2
    assert half.cycles_per_call == pytest.approx(110.0)
    assert half.call_clock_mhz == pytest.approx(1550.0)
    under_half = measurement([100.0, nan, nan, nan], [1500.0, nan, nan, nan])
    assert under_half.cycles_summary is None
    assert under_half.cycles_per_call is None and under_half.call_clock_mhz is None
    assert under_half.value_at_max_clock is None
    assert measurement([], [], samples=[1e-4]).cycles_summary is None
    nonpositive = measurement([0.0, -5.0, 100.0], [1500.0, 1500.0, 1500.0])
    assert nonpositive.cycles_summary is None  # 1 of 3 samples is a usable figure


def test_cycles_per_call_is_the_median_of_the_samples() -> None:
    m = measurement([100.0, 300.0, 200.0, 250.0, 150.0], [1200.0, 1300.0, 1400.0, 1500.0, math.nan])
    assert m.cycles_per_call == 200.0
    assert m.call_clock_mhz == pytest.approx(1350.0)  # the finite clocks' mean


def test_value_at_max_clock_is_the_work_at_cycles_over_the_max_clock() -> None:
    work = gemm_work(8192, 8192, 8192, "fp16")
    m = measurement([1.2e6] * 4, [1400.0] * 4, work=work)
    assert m.value_at_max_clock == pytest.approx(work.value(1.2e6 / (MAX_MHZ * 1e6)))
    assert m.value_at_max_clock == pytest.approx(work.flops / (1.2e6 / 1.98e9) / 1e12)
    assert measurement([1.2e6] * 4, [1400.0] * 4, max_clock=None).value_at_max_clock is None
    assert measurement([1.2e6] * 4, [1400.0] * 4, max_clock=0).value_at_max_clock is None
