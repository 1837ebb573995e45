"""The measurement loop with a simulated device: a stream whose clock advances by what is enqueued."""

from __future__ import annotations

import contextlib
import math

from dataclasses import dataclass, field

import pytest

from gpuperf.measure.kernel_records import FLUSH_KERNEL, MARK_KERNEL, KernelActivity
from gpuperf.measure.measurement import Method, UnmeasurableCall
from gpuperf.measure.metrics import gemm_work
from gpuperf.measure.stats import StoppingRule
from gpuperf.measure.timing import SamplingConfig, Timer

L2 = 50 * 2**20
FLUSH_COST_S = 40e-6


#: What the simulated device logs, as the kernel a tracer would see (the rest, a launch gap or a sleep, is not
#: a kernel).
SIM_KERNELS = {"flush": FLUSH_KERNEL, "mark": MARK_KERNEL, "call": "sim_gemm_kernel", "reduce": "splitKreduce_kernel"}


@dataclass
class SimDevice:
    """Device time advances by each enqueued call; the host clock follows it."""

    now: float = 0.0
    log: list[str] = field(default_factory=list)
    tracer: SimTracer | None = None

    def advance(self, seconds: float, what: str) -> None:
        if self.tracer is not None and self.tracer.recording and what in SIM_KERNELS:
            self.tracer.records.append(KernelActivity(SIM_KERNELS[what], round(self.now * 1e9),
                                                      round((self.now + seconds) * 1e9), grid=(64, 1, 1)))
        self.now += seconds
        self.log.append(what)


class SimTracer:
    """Records the simulated kernels while started, as ``cupti_trace.KernelTracer`` does the real ones."""

    def __init__(self, device: SimDevice) -> None:
        self.records: list[KernelActivity] = []
        self.recording = False
        device.tracer = self

    def start(self) -> None:
        self.records, self.recording = [], True

    def collect(self) -> list[KernelActivity]:
        records, self.records = self.records, []
        return records

    def stop(self) -> None:
        self.recording = False


class SimEvent:
    def __init__(self, device: SimDevice) -> None:
        self.device = device
        self.time: float | None = None

    def record(self, stream: object) -> None:
        self.time = self.device.now
        self.device.log.append("event")

    def synchronize(self) -> None:
        assert self.time is not None


class SimBackend:
    def __init__(self, device: SimDevice) -> None:
        self.device = device
        self.copies = 0
        self.release_ok = True

    def current_stream(self) -> object:
        return object()

    def event(self) -> SimEvent:
        return SimEvent(self.device)

    def elapsed_s(self, start: SimEvent, stop: SimEvent) -> float:
        assert start.time is not None and stop.time is not None
        return stop.time - start.time

    def copy(self, operand: object) -> object:
        self.copies += 1
        return SimArray(getattr(operand, "nbytes"))

    def hold(self, stream: object):
        """The simulated stream runs enqueued work at once; the hold only records its place."""
        self.device.log.append("hold")
        return lambda: self.release_ok



class SimFlush:
    def __init__(self, device: SimDevice) -> None:
        self.device = device
        self.count = 0

    def enqueue(self, stream: object, slot: int | None = None) -> None:
        self.count += 1
        self.device.advance(FLUSH_COST_S, "flush")

    def mark(self, stream: object, slot: int | None = None) -> None:
        self.device.advance(1e-6, "mark")


class SimFlags:
    c_contiguous = True
    f_contiguous = False


class SimArray:
    flags = SimFlags()

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


class SimNvml:
    def __init__(self, masks: list[int] | None = None, others: tuple[int, ...] = ()) -> None:
        self.masks = list(masks or [])
        self.others = others

    def sm_clock_mhz(self) -> int:
        return 1980

    def max_sm_clock_mhz(self) -> int:
        return 1980

    def clock_event_mask(self) -> int:
        return self.masks.pop(0) if self.masks else 0

    def other_processes(self) -> tuple[int, ...]:
        return self.others


def make_timer(device: SimDevice, nvml: SimNvml | None = None, traced: bool = False,
               **config: object) -> tuple[Timer, SimFlush, SimBackend]:
    flush = SimFlush(device)
    backend = SimBackend(device)
    sampling = SamplingConfig(rule=StoppingRule(min_samples=10, min_time_s=0.01, noise_target=0.005, timeout_s=5.0),
                              **config)  # type: ignore[arg-type]
    timer = Timer(L2, flush, nvml or SimNvml(), sampling, backend=backend, sleep=lambda s: device.advance(s, "sleep"),
                  clock=lambda: device.now, tracer=SimTracer(device) if traced else None)
    return timer, flush, backend


def sampled_flush(log: list[str]) -> int:
    """Where the first sample's flush is: after the one launched (and compiled) before warm-up."""
    return log.index("flush", log.index("flush") + 1)


def kernel(device: SimDevice, seconds: float):
    def call(*operands: object) -> None:
        device.advance(seconds, "call")
    return call


WORK = gemm_work(4096, 4096, 4096, "fp32")


def test_cold_flush_excludes_the_flush_from_every_sample() -> None:
    device = SimDevice()
    timer, flush, _ = make_timer(device)
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(3 * 2**26),), flush="cold")
    assert m.method == Method.COLD_FLUSH
    assert m.median_s == pytest.approx(1e-3)
    assert max(m.samples_s) == pytest.approx(1e-3)  # the 40 µs flush never enters a sample
    assert flush.count >= len(m.samples_s)
    assert m.stop_reason == "converged"
    assert sum(m.samples_s) >= 0.01 and len(m.samples_s) >= 10


def test_flush_sits_outside_the_event_pair() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device)
    timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),), flush="cold")
    timed = device.log[sampled_flush(device.log):]
    pattern = ["flush", "event", "call", "event"]
    assert timed[: len(pattern) * 3] == pattern * 3


def test_short_calls_rotate_copies_larger_than_twice_l2() -> None:
    device = SimDevice()
    timer, flush, backend = make_timer(device)
    footprint = 3 * 2**20
    m = timer.measure(kernel(device, 20e-6), WORK, operands=(SimArray(footprint),), flush="cold")
    copies = math.ceil(2 * L2 / footprint) + 1
    assert m.method == Method.COLD_ROTATE
    assert (backend.copies + 1) * footprint > 2 * L2  # a copy is read again only after 2 × L2 of others
    assert backend.copies == copies - 1
    assert m.calls_per_sample == 250  # enough calls to last the 5 ms minimum sample, over the copies in turn
    assert flush.count == 1  # only the one before warm-up; none between calls
    assert m.median_s == pytest.approx(20e-6)


def test_a_rotated_sample_lasts_at_least_the_minimum_sample_time() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, min_sample_s=1e-3)
    m = timer.measure(kernel(device, 40e-6), WORK, operands=(SimArray(8 * 2**20),), flush="cold")
    assert m.method == Method.COLD_ROTATE and m.calls_per_sample == 25  # 14 copies, 25 calls for 1 ms
    assert m.calls_per_sample * m.median_s == pytest.approx(1e-3)


def test_a_call_above_the_rotation_threshold_is_flushed_one_at_a_time() -> None:
    device = SimDevice()
    timer, flush, _ = make_timer(device)
    m = timer.measure(kernel(device, 150e-6), WORK, operands=(SimArray(3 * 2**20),), flush="cold")
    assert m.method == Method.COLD_FLUSH and m.calls_per_sample == 1 and flush.count > 0


@pytest.mark.parametrize(("seconds", "prefer", "method"), [
    (150e-6, Method.COLD_ROTATE, Method.COLD_ROTATE),  # long enough to flush, but recorded rotated
    (20e-6, Method.COLD_FLUSH, Method.COLD_FLUSH),  # short enough to rotate, but recorded flushed
    (20e-6, Method.COLD_FLUSH + Method.UNHELD_SUFFIX, Method.COLD_FLUSH),
    (20e-6, "", Method.COLD_ROTATE),
])
def test_the_method_of_the_baseline_entry_is_kept(seconds: float, prefer: str, method: str) -> None:
    """A call near the threshold must not be measured one way today and the other tomorrow."""
    device = SimDevice()
    timer, _, _ = make_timer(device)
    m = timer.measure(kernel(device, seconds), WORK, operands=(SimArray(3 * 2**20),), flush="cold",
                      prefer_method=prefer)
    assert m.method == method


def test_the_flush_is_launched_once_before_the_first_hold() -> None:
    """Its first launch compiles it: inside a held batch that outlasted the hold and unheld the case."""
    device = SimDevice()
    timer, _, _ = make_timer(device)
    timer.measure(kernel(device, 20e-6), WORK, operands=(SimArray(3 * 2**20),), flush="cold")
    assert device.log.index("flush") < device.log.index("hold")


def test_short_call_without_operands_falls_back_to_flush() -> None:
    device = SimDevice()
    timer, flush, _ = make_timer(device)
    m = timer.measure(kernel(device, 5e-6), WORK, flush="cold")
    assert m.method == Method.COLD_FLUSH and flush.count > 0


def test_hot_batches_back_to_back_calls() -> None:
    device = SimDevice()
    timer, flush, _ = make_timer(device)
    m = timer.measure(kernel(device, 5e-6), WORK, operands=(SimArray(1024),), flush="hot")
    assert m.method == Method.HOT and m.flush == "hot"
    assert m.calls_per_sample == 10  # 50 µs minimum sample / 5 µs
    assert flush.count == 0
    assert m.median_s == pytest.approx(5e-6)


def test_warmup_runs_by_count_and_by_time() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, warmup_calls=3, warmup_time_s=0.01)
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),))
    assert m.warmup_calls == 11  # one unheld first call, then 10 ms of warm-up at 1 ms per call
    device = SimDevice()
    timer, _, _ = make_timer(device, warmup_calls=3, warmup_time_s=0.001)
    assert timer.measure(kernel(device, 1e-2), WORK, operands=(SimArray(2**30),)).warmup_calls == 3


def test_every_batch_is_enqueued_behind_a_hold() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device)
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),))
    first_flush = sampled_flush(device.log)
    assert device.log[first_flush - 1] == "hold"  # the first sampled batch sits behind a hold
    assert device.log.count("hold") >= m.warmup_calls - 1 + 1  # every held warm-up call and every batch
    assert m.method == Method.COLD_FLUSH


def test_a_hold_that_times_out_drops_the_batch_and_continues_unheld() -> None:
    device = SimDevice()
    timer, _, backend = make_timer(device)
    backend.release_ok = False
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),))
    assert m.method == "cold-flush-unheld"
    assert m.median_s == pytest.approx(1e-3)


class StallingBackend(SimBackend):
    """Holds that time out on the calls numbered in ``stalls`` (a host stalled for a moment), and only those."""

    def __init__(self, device: SimDevice, stalls: set[int]) -> None:
        super().__init__(device)
        self.stalls, self.count = stalls, 0

    def hold(self, stream: object):
        self.count += 1
        made_it = self.count not in self.stalls
        self.device.log.append("hold")
        return lambda: made_it


@pytest.mark.parametrize("stalls", [{1}, {3}, {3, 4}])
def test_a_hold_that_times_out_once_is_taken_again_held(stalls: set[int]) -> None:
    """One warm-up call's hold timing out ({1}) or one or two sampled batches' ({3}, {3, 4}: the first batch and its
    retry): a host stalled for a moment, not a callable that waits on the host. The batch is dropped and taken again
    held, and the method stays held, as the baseline recorded it (an H200 gate read one batched GEMM
    ``cupti-cold-unheld`` against its ``cupti-cold`` entry: NOT_COMPARABLE, the gate failed)."""
    device = SimDevice()
    timer, _, _ = make_timer(device, warmup_calls=3, warmup_time_s=0.0)
    timer.backend = StallingBackend(device, stalls)
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),))
    assert m.method == Method.COLD_FLUSH and m.median_s == pytest.approx(1e-3)


def test_a_hold_that_keeps_timing_out_goes_unheld_after_its_retries() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, warmup_calls=3, warmup_time_s=0.0)
    timer.backend = StallingBackend(device, {3, 4, 5})  # the first sampled batch and both retries
    assert timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),)).method == "cold-flush-unheld"


def test_throttled_batch_is_discarded_and_resampled() -> None:
    device = SimDevice()
    hw_slowdown = 0x8
    nvml = SimNvml(masks=[hw_slowdown])  # the first sampled batch starts slowed down
    timer, _, _ = make_timer(device, nvml)
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),))
    assert m.discarded_samples > 0
    assert m.reliable
    assert "hw_slowdown" in m.clock_events


def test_persistent_contention_marks_the_measurement_unreliable() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, SimNvml(others=(4242,)), throttle_retries=2)
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),))
    assert not m.reliable
    assert "4242" in m.unreliable_reason and "2 re-samplings" in m.unreliable_reason


def test_power_cap_alone_is_recorded_but_reliable() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, SimNvml(masks=[0x4] * 1000))
    m = timer.measure(kernel(device, 1e-3), WORK, operands=(SimArray(2**30),))
    assert m.reliable and m.clock_events == ("sw_power_cap",)


def test_noisy_calls_sample_until_timeout() -> None:
    device = SimDevice()
    durations = iter([1e-3, 2e-3] * 100000)

    def noisy(*operands: object) -> None:
        device.advance(next(durations), "call")

    timer, _, _ = make_timer(device)
    m = timer.measure(noisy, WORK, operands=(SimArray(2**30),))
    assert m.stop_reason == "timeout"


def test_bad_flush_mode_is_rejected() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device)
    with pytest.raises(ValueError, match="flush must be one of \\('cold', 'hot'\\), got 'warm'"):
        timer.measure(kernel(device, 1e-3), WORK, flush="warm")


def test_a_call_that_is_no_call_or_a_work_that_is_no_work_is_refused_before_anything_runs() -> None:
    """The same refusals as a dry run's (``measurement.check_call``), so its message is the GPU run's."""
    from gpuperf.wiring.dry_run import DryTimer

    device = SimDevice()
    timer, _, _ = make_timer(device)
    for measure in (timer.measure, DryTimer().measure):
        with pytest.raises(TypeError, match="measure's work must be a gpuperf.measure.metrics.Work .*got float"):
            measure(kernel(device, 1e-3), 2.0)
        with pytest.raises(TypeError, match="measure's fn must be callable .*got str"):
            measure("sgemm", WORK)
    assert "call" not in device.log  # refused before a call was enqueued


def test_a_held_batch_never_exceeds_the_launch_queue_budget() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, max_held_calls=100)
    m = timer.measure(kernel(device, 5e-6), WORK, operands=(SimArray(3 * 2**20),), flush="cold")
    assert m.method == Method.COLD_ROTATE and m.calls_per_sample == 100  # 1000 wanted for 5 ms, capped
    holds = [i for i, entry in enumerate(device.log) if entry == "hold"]
    calls_between = [device.log[a:b].count("call") for a, b in zip(holds, holds[1:] + [len(device.log)])]
    assert max(calls_between[-3:]) <= 100  # the sampled batches: one sample of 100 calls each


# --- traced: the figure is each call's kernel span from the tracer's records ----------------------------


def launched(device: SimDevice, seconds: float, gap: float, *extra: tuple[str, float]):
    """A call whose kernel runs ``seconds`` after a launch gap of ``gap`` (then any ``extra`` kernels)."""
    def call(*operands: object) -> None:
        device.advance(gap, "gap")
        device.advance(seconds, "call")
        for what, duration in extra:
            device.advance(duration, what)
    return call


def test_a_traced_figure_is_the_kernel_time_and_the_event_figure_its_cross_check() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    m = timer.measure(launched(device, 6e-6, 3e-6), WORK, operands=(SimArray(2**30),), flush="cold")
    assert m.method == Method.TRACED_COLD
    assert m.calls_per_sample == 128  # 5 ms of 6 µs calls, capped at the batch (256 held launches / 2 per call)
    assert m.median_s == pytest.approx(6e-6)  # the launch gap is not the kernel's time
    assert m.event_median_s == pytest.approx(9e-6, rel=0.01) and m.event_method == Method.COLD_ROTATE
    assert m.launch_overhead_s == pytest.approx(3e-6, rel=0.05)
    assert [k.name for k in m.kernels] == ["sim_gemm_kernel"]  # the flush is no part of the call
    assert m.kernels[0].median_us == pytest.approx(6.0) and m.kernels[0].grid == (64, 1, 1)


def test_a_rotated_cross_check_takes_its_floor_of_samples_in_one_held_batch() -> None:
    """The cross-check of a short traced call: five rotated samples of 51 calls (256 held calls over its floor of
    five), all behind one hold, not five samples of 5 ms behind five; without a tracer the samples, being the
    figure, still cover ``min_sample_s``."""
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True, warmup_time_s=0.0)
    timer.measure(launched(device, 6e-6, 3e-6), WORK, operands=(SimArray(2**30),), flush="cold")
    log = device.log
    holds = [i for i, what in enumerate(log) if what == "hold"]
    warm = 3 - 1  # the held warm-up calls (the first is unheld)
    crosscheck = log[holds[warm]:log.index("flush", holds[warm])]  # up to the traced probe's separator
    assert crosscheck.count("call") == 5 * 51 and crosscheck.count("event") == 10
    device = SimDevice()
    timer, _, _ = make_timer(device, warmup_time_s=0.0)
    m = timer.measure(launched(device, 6e-6, 3e-6), WORK, operands=(SimArray(2**30),), flush="cold")
    assert m.method == Method.COLD_ROTATE and m.calls_per_sample == 256  # 5 ms of 9 µs calls, capped at 256


def test_every_traced_call_follows_its_own_flush() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    timer.measure(launched(device, 1e-4, 0.0), WORK, operands=(SimArray(2**30),), flush="cold")
    traced = device.log[len(device.log) - device.log[::-1].index("hold"):]  # after the last batch's hold
    assert traced[:6] == ["flush", "gap", "call"] * 2


def test_a_call_of_several_kernels_is_timed_first_start_to_last_end() -> None:
    """A split-K GEMM and its reduction are one call: a span, not the sum of their kernel times."""
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    m = timer.measure(launched(device, 8e-6, 2e-6, ("gap", 1e-6), ("reduce", 2e-6)), WORK,
                      operands=(SimArray(2**30),), flush="cold")
    assert m.median_s == pytest.approx(11e-6)
    assert [k.name for k in m.kernels] == ["sim_gemm_kernel", "splitKreduce_kernel"]


def test_traced_hot_calls_are_separated_by_an_empty_marker() -> None:
    device = SimDevice()
    timer, flush, _ = make_timer(device, traced=True)
    m = timer.measure(launched(device, 5e-6, 1e-6), WORK, operands=(SimArray(1024),), flush="hot")
    assert m.method == Method.TRACED_HOT and flush.count == 0
    assert m.median_s == pytest.approx(5e-6) and "mark" in device.log


def test_a_call_without_kernels_is_no_figure_but_an_error_that_says_why() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    with pytest.raises(UnmeasurableCall, match="^fn launched no kernel on any stream") as raised:
        timer.measure(lambda *ops: device.advance(1e-3, "host-side"), WORK, operands=(SimArray(2**30),),
                      label="host only")
    assert raised.value.work == WORK and raised.value.label == "host only"
    assert device.tracer is not None and not device.tracer.recording  # the tracer is stopped on that path too


def unordered(device: SimDevice, seconds: float, stream: int, lead: float):
    """A call whose kernel runs on ``stream`` as soon as it is launched, ``lead`` before the measuring stream's
    work enqueued ahead of it has finished (PyTorch's own stream, say): it overlaps the separator before it."""
    def call(*operands: object) -> None:
        assert device.tracer is not None
        if device.tracer.recording:
            start = device.now - lead
            device.tracer.records.append(KernelActivity("nvjet_sm90_tst", round(start * 1e9),
                                                        round((start + seconds) * 1e9), stream=stream))
        else:
            # the event-timed phase sees a bare launch gap; a realistic one, since the warm-up runs calls until
            # 0.05 s of device time has passed (25,000 of these, where 1 ns calls took 50 million)
            device.advance(2e-6, "gap")
    return call


def test_a_call_whose_kernels_run_unordered_on_another_stream_is_an_error_naming_both_streams() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    with pytest.raises(UnmeasurableCall) as raised:
        timer.measure(unordered(device, 300e-6, stream=7, lead=FLUSH_COST_S / 2), WORK, operands=(SimArray(2**30),))
    message = str(raised.value)
    assert message.startswith("fn launched 1 kernel a call on stream 7 (nvjet_sm90_tst), not on the measuring "
                              "stream 0")
    assert "no figure is taken" in message


def forked(device: SimDevice, seconds: float, stream: int):
    """A call forked onto ``stream`` and joined back: its kernel lies between the separators around it."""
    def call(*operands: object) -> None:
        assert device.tracer is not None
        if device.tracer.recording:
            device.tracer.records.append(KernelActivity("side_kernel", round(device.now * 1e9),
                                                        round((device.now + seconds) * 1e9), stream=stream))
        device.advance(seconds, "gap")
    return call


def test_a_call_forked_onto_a_side_stream_and_joined_back_is_measured_whole() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    m = timer.measure(forked(device, 2e-4, stream=21), WORK, operands=(SimArray(2**30),))
    assert m.method == Method.TRACED_COLD and m.median_s == pytest.approx(2e-4)
    assert [k.name for k in m.kernels] == ["side_kernel"]


def test_what_the_launcher_compiled_joins_the_kernel_identity() -> None:
    device = SimDevice()
    seen: list[object] = []

    @contextlib.contextmanager
    def identify(fn: object, operands: object):
        codes: dict[str, str] = {}
        yield codes
        seen.append(fn)
        codes["sim_gemm_kernel"] = "0123456789ab"

    timer, _, _ = make_timer(device, traced=True)
    timer.identify = identify
    call = launched(device, 1e-4, 0.0)
    m = timer.measure(call, WORK, operands=(SimArray(2**30),))
    assert seen == [call]  # the first call only
    assert [(k.name, k.code) for k in m.kernels] == [("sim_gemm_kernel", "0123456789ab")]


def test_the_tracer_records_nothing_while_events_time_the_calls() -> None:
    """CUPTI's launch overhead must not enter the event-timed cross-check."""
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    assert device.tracer is not None
    starts: list[int] = []
    original_start = device.tracer.start
    device.tracer.start = lambda: (starts.append(device.log.count("call")), original_start())[1]  # type: ignore
    m = timer.measure(launched(device, 1e-4, 0.0), WORK, operands=(SimArray(2**30),))
    assert len(starts) == 1 and starts[0] >= m.warmup_calls + 5  # after warm-up and the event-timed samples
    assert not device.tracer.recording


def test_a_traced_sample_averages_the_calls_that_fill_the_minimum_sample_time() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True, min_sample_s=1e-3)
    m = timer.measure(launched(device, 1e-4, 0.0), WORK, operands=(SimArray(2**30),), flush="cold")
    assert m.calls_per_sample == 10 and m.median_s == pytest.approx(1e-4)
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True, min_sample_s=1e-3)
    long_call = timer.measure(launched(device, 3e-3, 0.0), WORK, operands=(SimArray(2**30),), flush="cold")
    assert long_call.calls_per_sample == 1  # a call longer than the minimum sample is a sample


class TensorLike:
    """A PyTorch tensor as the loop sees one: ``nbytes``, ``is_contiguous()`` and ``clone()``, no ``flags``."""

    def __init__(self, nbytes: int, contiguous: bool = True) -> None:
        self.nbytes, self.contiguous, self.clones = nbytes, contiguous, 0

    def is_contiguous(self) -> bool:
        return self.contiguous

    def clone(self) -> "TensorLike":
        self.clones += 1
        return TensorLike(self.nbytes)


def test_short_calls_on_tensors_rotate_clones_of_the_tensors() -> None:
    from gpuperf.measure.rotation import rotatable
    from gpuperf.measure.timing import CupyBackend

    tensor = TensorLike(2**20)
    backend = CupyBackend.__new__(CupyBackend)  # its copy needs no CuPy for a tensor
    copy = backend.copy(tensor)
    assert isinstance(copy, TensorLike) and tensor.clones == 1
    assert rotatable([tensor]) and not rotatable([TensorLike(2**20, contiguous=False)])
    assert not rotatable([object()])


def test_relocated_copies_what_it_knows_and_leaves_the_rest() -> None:
    """``rotation.relocated`` (the A/B rounds' fresh placements): a PyTorch tensor is cloned, a non-contiguous
    array or a host object stays as it is (a copy of a padded view would lose its padding)."""
    from gpuperf.measure.rotation import relocated

    class Tensor:
        __module__ = "torch"

        def __init__(self) -> None:
            self.cloned = False

        def is_contiguous(self) -> bool:
            return True

        def clone(self) -> Tensor:
            copy = Tensor()
            copy.cloned = True
            return copy

    class Strided:
        class flags:  # noqa: N801 — NumPy's attribute name
            c_contiguous = f_contiguous = False

    tensor, strided, scalar = Tensor(), Strided(), 3
    moved = relocated((tensor, strided, scalar))
    assert isinstance(moved[0], Tensor) and moved[0].cloned and moved[0] is not tensor
    assert moved[1] is strided and moved[2] == 3
    import numpy

    host = numpy.ones(4)
    assert relocated((host,))[0] is host  # a NumPy array is no device memory: passed as it is


def test_a_call_that_compiles_while_it_is_timed_is_refused() -> None:
    """Compilation and autotuning belong to the warm-up: a kernel compiled during the timed phase (an autotuner still
    choosing, another specialisation) would mix other code into the samples, so the call is refused with the fix."""
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    counts = iter([3, 4])  # the launchers' compile count after the warm-up, then after the samples: one more
    timer.compiled = lambda: next(counts)
    with pytest.raises(UnmeasurableCall, match=r"fn compiled 1 kernel\(s\) while it was being timed, after \d+ "
                                               r"warm-up calls.*warm it up at this size"):
        timer.measure(launched(device, 1e-4, 0.0), WORK, operands=(SimArray(2**30),))
    timer.compiled = lambda: 3  # the control: everything compiled in the warm-up
    settled = timer.measure(launched(device, 1e-4, 0.0), WORK, operands=(SimArray(2**30),))
    assert settled.median_s == pytest.approx(1e-4)
