"""The stopping rule that stops at the precision the verdict needs: the criterion (``stats.IntervalCriterion``,
nvbench's ``initialize`` / ``add`` / ``is_finished``) on synthetic sequences, the judged figure (``JudgedFigure``:
time or cycles), the gate's bands for it (``gate.stopping_band``), and the timing loop on the simulated device of
``test_timing.py`` with an injected clock: no GPU, fully deterministic."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from test_clock_measurement import ClockedDevice, stamping_timer
from test_plugin import FAKE_DEVICE
from test_timing import SimArray, SimDevice, WORK, launched, make_timer

from gpuperf.measure.measurement import Method
from gpuperf.measure.stats import (Band, IntervalCriterion, JudgedFigure, Sampling, Stop, StoppingRule, StopParams,
                                   batch_sizes, summarize)
from gpuperf.store.baseline import ClockFree, Entry
from gpuperf.verdict.gate import Basis, GateConfig, effective_tolerance, round_stopping_band, stopping_band
from gpuperf.vocabulary import Metric

BAND = 0.04  # the default tolerance: a target of ±1 % at the default fraction


def fed(params: StopParams, draw: Callable[[], float], gpu_per_sample: float = 1e-3,
        limit: int = 100_000) -> IntervalCriterion:
    """A criterion fed one sample at a time until it finishes."""
    criterion = IntervalCriterion()
    criterion.initialize(params)
    for _ in range(limit):
        criterion.add(draw(), gpu_per_sample)
        if criterion.is_finished():
            return criterion
    raise AssertionError(f"the criterion never finished after {limit} samples")


def lognormal(sigma: float, seed: int = 0) -> Callable[[], float]:
    rng = np.random.default_rng(seed)
    return lambda: float(1e-3 * rng.lognormal(0.0, sigma))


def with_outliers(share: float, factor: float, seed: int = 0) -> Callable[[], float]:
    """Quiet samples (0.1 %) of which ``share`` are preempted, ``factor`` times as long, evenly spread (every fifth
    for a share of 0.2)."""
    rng = np.random.default_rng(seed)
    drawn = [0]

    def draw() -> float:
        drawn[0] += 1
        outlier = math.floor(drawn[0] * share) > math.floor((drawn[0] - 1) * share)
        return float(1e-3 * (factor if outlier else 1.0) * (1 + 1e-3 * rng.standard_normal()))
    return draw


PARAMS = StoppingRule().params(BAND)


# -- the criterion on synthetic sequences ------------------------------------------------------------------


def test_the_default_target_is_a_quarter_of_the_band_with_no_floor_of_gpu_time() -> None:
    assert (PARAMS.target, PARAMS.min_samples, PARAMS.min_gpu_s, PARAMS.max_gpu_s) == (0.01, 6, 0.0, 0.5)
    without = StoppingRule().params()
    assert (without.target, without.min_gpu_s, without.max_gpu_s) == (0.005, 0.2, math.inf)


def test_a_quiet_case_stops_at_the_floor_of_samples() -> None:
    criterion = fed(PARAMS, lognormal(0.001))
    assert criterion.reason == Stop.CONVERGED and len(criterion.values) == PARAMS.min_samples
    assert criterion.interval is not None and criterion.interval <= PARAMS.target
    assert criterion.gpu_s == pytest.approx(PARAMS.min_samples * 1e-3)


def test_a_noisy_case_samples_more_and_converges_when_its_interval_is_within_the_target() -> None:
    criterion = fed(PARAMS, lognormal(0.05))
    assert criterion.reason == Stop.CONVERGED and len(criterion.values) > 3 * PARAMS.min_samples
    assert criterion.interval is not None and criterion.interval <= PARAMS.target
    assert summarize(criterion.values[:-1]).rel_median_ci > PARAMS.target  # the first sample that got there


def test_a_very_noisy_case_stops_at_the_cap_of_gpu_time() -> None:
    criterion = fed(PARAMS, lognormal(0.5), gpu_per_sample=2e-3)
    assert criterion.reason == Stop.CAP
    assert PARAMS.max_gpu_s <= criterion.gpu_s < PARAMS.max_gpu_s + 2e-3  # the first sample past the cap
    assert criterion.interval is not None and criterion.interval > PARAMS.target


def test_outliers_under_a_quarter_of_the_samples_move_neither_the_stop_nor_the_median() -> None:
    """One sample in five preempted (three times as long): the median's interval is the IQR's, which the outliers
    reach only beyond a quarter of the samples, so the case stops at its floor like a quiet one, at the quiet
    samples' median; with nearly half of them preempted no median is precise, and the cap ends it."""
    criterion = fed(PARAMS, with_outliers(0.2, 3.0))
    assert criterion.reason == Stop.CONVERGED and len(criterion.values) == PARAMS.min_samples
    assert max(criterion.values) > 2.5e-3  # outliers were there
    assert summarize(criterion.values).median == pytest.approx(1e-3, rel=PARAMS.target)
    heavy = fed(PARAMS, with_outliers(0.45, 3.0))
    assert heavy.reason == Stop.CAP and len(heavy.values) > 40 * PARAMS.min_samples


def test_a_narrower_band_asks_for_more_samples() -> None:
    rule = StoppingRule()
    wide, narrow = (fed(rule.params(band), lognormal(0.03, seed=7)) for band in (0.08, 0.02))
    assert len(narrow.values) > 3 * len(wide.values)
    assert narrow.interval is not None and narrow.interval <= 0.005


def test_a_sample_without_a_figure_is_spent_but_not_kept() -> None:
    criterion = IntervalCriterion()
    criterion.initialize(StopParams(target=0.01, min_samples=3))
    for value in (1e-3, math.nan, 1e-3, 0.0, 1e-3):
        criterion.add(value, 1e-3)
    assert len(criterion.values) == 3 and criterion.gpu_s == pytest.approx(5e-3) and criterion.is_finished()


def test_initialize_starts_afresh() -> None:
    criterion = fed(PARAMS, lognormal(0.001))
    criterion.initialize(PARAMS)
    assert criterion.values == [] and criterion.gpu_s == 0.0 and criterion.reason == "" and not criterion.is_finished()


@pytest.mark.parametrize("kwargs", [{"target": 0.0}, {"target": -0.01}, {"min_samples": 2}, {"min_gpu_s": -1.0},
                                    {"max_gpu_s": 0.0}])
def test_invalid_criterion_parameters_raise(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="a stopping criterion needs"):
        StopParams(**{"target": 0.01, "min_samples": 10, **kwargs})  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"band_fraction": 0.0}, {"band_fraction": 1.5}, {"max_gpu_s": 0.0}])
def test_invalid_rule_settings_raise(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="band_fraction in"):
        StoppingRule(**kwargs)  # type: ignore[arg-type]


# -- the judged figure: time or cycles ---------------------------------------------------------------------


def power_capped(n: int) -> tuple[list[float], list[float], list[float]]:
    """Calls of 6.2 M cycles at a clock that wanders 1300-1980 MHz: time scatters, cycles do not."""
    clocks = [1980.0 - 40.0 * (i % 18) for i in range(n)]
    return [6.2e6 / (mhz * 1e6) for mhz in clocks], [6.2e6] * n, clocks


def judged_after(band: Band, batches: int, cycles: bool = True) -> JudgedFigure:
    figure = JudgedFigure(StoppingRule(), band)
    for _ in range(batches):
        samples, counted, clocks = power_capped(18)
        figure.add(samples, counted if cycles else (), clocks if cycles else (), 0.06)
        if figure.stop(wall_s=0.0):
            break
    return figure


CYCLES_BAND = Band(time=0.04, cycles=0.03, on_cycles=lambda clock: clock is not None and clock < 1940)


def test_a_power_capped_case_judged_on_cycles_stops_once_its_cycles_are_known() -> None:
    figure = judged_after(CYCLES_BAND, 100)
    sampling = figure.sampling(figure.stop(0.0))
    assert sampling.reason == Stop.CONVERGED and sampling.basis == Basis.CYCLES and sampling.samples == 18
    assert sampling.band == 0.03 and sampling.target == pytest.approx(0.0075)
    assert sampling.interval is not None and sampling.interval < 1e-9
    assert summarize(power_capped(18)[0]).rel_median_ci > 0.01  # on time it would have gone on


def test_the_same_case_judged_on_time_samples_to_its_time_band() -> None:
    """Where the verdict reads time (its clock did not move, or it is memory-bound) cycles do not decide."""
    for band in (Band(time=0.04), Band(time=0.04, cycles=0.03, on_cycles=lambda clock: False)):
        figure = judged_after(band, 100)
        sampling = figure.sampling(figure.stop(0.0))
        assert sampling.basis == Basis.TIME and sampling.band == 0.04 and sampling.samples > 18


def test_cycles_decide_only_when_half_the_samples_have_them() -> None:
    figure = judged_after(CYCLES_BAND, 3, cycles=False)
    assert figure.judged()[1] == Basis.TIME


def test_the_wall_clock_timeout_needs_the_floor_of_samples() -> None:
    figure = JudgedFigure(StoppingRule(timeout_s=1.0), Band(time=0.04))
    figure.add([1e-3, 2e-3] * 2, (), (), 0.1)
    assert figure.stop(wall_s=5.0) == ""
    figure.add([1e-3, 2e-3] * 3, (), (), 0.1)
    assert figure.stop(wall_s=5.0) == Stop.TIMEOUT


def test_sampling_is_plain_data() -> None:
    done = Sampling(samples=10, gpu_s=0.02, basis=Basis.TIME, interval=0.004, target=0.01, reason=Stop.CONVERGED,
                    band=0.04)
    assert done.to_dict() == {"samples": 10, "gpu_s": 0.02, "basis": "time", "interval": 0.004, "target": 0.01,
                              "band": 0.04, "reason": "converged"}


# -- the bands the gate gives it ---------------------------------------------------------------------------


def entry(spread: float = 0.001, clock_mhz: float | None = None, cycles_spread: float = 0.001) -> Entry:
    free = ClockFree(value=60.0, spread=cycles_spread, clock_mhz=clock_mhz) if clock_mhz else None
    return Entry(metric=Metric.TFLOPS, value=50.0, unit=Metric.TFLOPS, spread=spread, samples=10, flush="cold",
                 at_max_clock=free)


def test_the_band_is_the_entrys_effective_tolerance_else_the_configured_one() -> None:
    config = GateConfig()
    assert stopping_band(None, config, True, 1980) == Band(time=config.tolerance)
    noisy = entry(spread=0.03)
    assert stopping_band(noisy, config, True, 1980).time == effective_tolerance(noisy, config) == 0.06


def test_cycles_are_judged_for_a_clock_bound_case_whose_clock_moved() -> None:
    config = GateConfig()
    capped = stopping_band(entry(clock_mhz=1450.0, cycles_spread=0.025), config, True, 1980)
    assert capped.cycles == pytest.approx(0.05)
    assert capped.on_cycles(1975.0)  # recorded at 1450 MHz: judged on cycles whatever the clock now
    steady = stopping_band(entry(clock_mhz=1975.0), config, True, 1980)
    assert steady.on_cycles(1800.0) and not steady.on_cycles(1975.0) and not steady.on_cycles(None)
    assert stopping_band(entry(clock_mhz=1450.0), config, False, 1980).cycles is None  # memory-bound: time
    assert stopping_band(entry(), config, True, 1980).cycles is None  # no figure at max clock


def test_an_ab_round_is_sampled_to_the_run_s_threshold_on_the_paired_rule_s_basis() -> None:
    """An A/B side reads no baseline: its rounds' band is the run's threshold, on cycles when a clock-bound case's
    calls ran more than 2 % below the maximum clock (``own_basis``), on time otherwise."""
    assert round_stopping_band(0.02, False, 1980) == Band(time=0.02)
    capped = round_stopping_band(0.02, True, 1980)
    assert (capped.time, capped.cycles) == (0.02, 0.02)
    assert capped.on_cycles(1800.0) and not capped.on_cycles(1975.0) and not capped.on_cycles(None)
    assert StoppingRule().params(capped.time).target == pytest.approx(StoppingRule.band_fraction * 0.02)


# -- the timing loop, with an injected clock ---------------------------------------------------------------


def test_a_quiet_traced_case_with_a_band_stops_at_the_floor_and_says_so() -> None:
    """1 ms calls, one per sample: with a band the floor of samples is enough; without one the phase still
    sampled its fixed 50 ms of GPU time."""
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True, min_sample_s=1e-3)
    banded = timer.measure(launched(device, 1e-3, 0.0), WORK, operands=(SimArray(2**30),), band=Band(time=BAND))
    assert banded.sampling is not None
    assert (banded.sampling.samples, banded.sampling.reason, banded.sampling.basis) == (10, "converged", "time")
    assert banded.sampling.band == BAND and banded.sampling.target == pytest.approx(0.01)
    assert banded.sampling.gpu_s == pytest.approx(10 * (1e-3 + 40e-6), rel=0.01)  # the first batch held 10 calls
    assert banded.stop_reason == Stop.CONVERGED and len(banded.samples_s) == 10
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True, min_sample_s=1e-3)
    fixed = timer.measure(launched(device, 1e-3, 0.0), WORK, operands=(SimArray(2**30),))
    assert fixed.sampling is not None and fixed.sampling.band is None and fixed.sampling.target == 0.005
    assert len(fixed.samples_s) >= 45 and fixed.sampling.gpu_s >= 0.05


class CountingTracer:
    """The simulated tracer, counting its read-backs: one a traced batch (and one for the probe call)."""

    def __init__(self, tracer: object) -> None:
        self.tracer, self.reads = tracer, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.tracer, name)

    def collect(self) -> object:
        self.reads += 1
        return self.tracer.collect()  # type: ignore[attr-defined]


def test_a_quiet_short_kernel_with_a_band_takes_its_floor_of_samples_in_one_traced_batch() -> None:
    """10 µs calls: a sample of 5 ms of kernel time would be the whole batch of 128 calls, one round trip per
    sample; with a band the first batch holds the floor (10 samples of 12 calls), and a quiet case stops there.
    Without a band (a tool, the fixed target) a sample still covers ``min_sample_s``."""
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    timer.tracer = counting = CountingTracer(timer.tracer)
    m = timer.measure(launched(device, 10e-6, 0.0), WORK, operands=(SimArray(2**30),), band=Band(time=BAND))
    assert m.sampling is not None and (m.sampling.samples, m.sampling.reason) == (10, "converged")
    assert m.calls_per_sample == 12 and counting.reads == 2  # the probe call, then one batch of 120 calls
    assert m.median_s == pytest.approx(10e-6)
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True)
    assert timer.measure(launched(device, 10e-6, 0.0), WORK, operands=(SimArray(2**30),)).calls_per_sample == 128


def test_a_repeat_is_warmed_by_count_and_carries_no_second_cross_check() -> None:
    """An A/B round after the first (``repeat``): the calls are loaded and warm, so three warm-up calls, not
    ``warmup_time_s`` of them; no event-timed phase, nor the rotated copies it would time (its traced figure is the
    same, its cross-check absent); and a floor of three samples, the paired rule judging the rounds' scatter."""
    device = SimDevice()
    timer, _, backend = make_timer(device, traced=True, warmup_calls=3, warmup_time_s=0.01)
    first = timer.measure(launched(device, 50e-6, 0.0), WORK, operands=(SimArray(2**20),), band=Band(time=BAND))
    started, copies = len(device.log), backend.copies
    again = timer.measure(launched(device, 50e-6, 0.0), WORK, operands=(SimArray(2**20),), band=Band(time=BAND),
                          repeat=True)
    assert first.warmup_calls > 3 and again.warmup_calls == 3
    assert first.event_median_s == pytest.approx(50e-6) and first.event_method == Method.COLD_ROTATE and copies
    assert again.event_median_s is None and again.event_method == "" and backend.copies == copies
    assert again.median_s == pytest.approx(first.median_s) and again.method == first.method
    assert first.sampling is not None and again.sampling is not None
    assert (first.sampling.samples, again.sampling.samples) == (10, 3)
    assert device.log[started:].count("event") < device.log[:started].count("event") / 2


def test_batches_start_at_the_floor_and_double_up_to_a_full_batch() -> None:
    sizes = batch_sizes(128, 4, 10)
    assert [next(sizes) for _ in range(4)] == [40, 80, 128, 128]
    assert next(batch_sizes(128, 4, None)) == 128
    assert next(batch_sizes(128, 128, 10)) == 128  # a sample of a full batch: one a batch


def alternating(device: SimDevice, *seconds: float) -> Callable[..., None]:
    lengths: Iterator[float] = iter(list(seconds) * 1_000_000)

    def call(*operands: object) -> None:
        device.advance(next(lengths), "call")
    return call


def test_a_noisy_traced_case_stops_at_the_cap_of_gpu_time() -> None:
    device = SimDevice()
    timer, _, _ = make_timer(device, traced=True, min_sample_s=1e-3)
    timer.config = timer.config.__class__(**{**timer.config.__dict__,
                                              "rule": StoppingRule(max_gpu_s=0.2, timeout_s=1e9)})
    m = timer.measure(alternating(device, 1e-3, 1.5e-3), WORK, operands=(SimArray(2**30),), band=Band(time=BAND))
    assert m.sampling is not None and m.sampling.reason == Stop.CAP == m.stop_reason
    assert 0.2 <= m.sampling.gpu_s < 0.2 + 0.06  # stopped after the batch that crossed the cap
    assert m.sampling.interval is not None and m.sampling.interval > m.sampling.target


def test_a_power_capped_case_stops_on_its_cycles_in_the_loop() -> None:
    device = ClockedDevice()
    clocks = [1980.0 - 40.0 * (i % 18) for i in range(18)]
    calls = [0]

    def capped(*operands: object) -> None:
        device.mhz = clocks[calls[0] % len(clocks)]
        calls[0] += 1
        device.advance(6.2e6 / (device.mhz * 1e6), "call")

    timer, _ = stamping_timer(device, rule=StoppingRule(timeout_s=1e9), min_sample_s=1e-5)
    on_time = timer.measure(capped, WORK, operands=(SimArray(2**30),), band=Band(time=BAND))
    timer, _ = stamping_timer(device, rule=StoppingRule(timeout_s=1e9), min_sample_s=1e-5)
    on_cycles = timer.measure(capped, WORK, operands=(SimArray(2**30),), band=CYCLES_BAND)
    assert on_time.sampling is not None and on_cycles.sampling is not None
    assert on_cycles.sampling.basis == Basis.CYCLES and on_cycles.sampling.reason == Stop.CONVERGED
    assert on_time.sampling.basis == Basis.TIME
    assert on_cycles.sampling.gpu_s < on_time.sampling.gpu_s / 2
    assert on_cycles.cycles_per_call == pytest.approx(6.2e6, rel=1e-4)


# -- end to end: the plugin's own measure fixture on a simulated GPU ---------------------------------------

pytest_plugins = ["pytester"]

SIM_CONFTEST = '''
import contextlib

import pytest

from gpuperf.wiring.fixtures import GpuPool
from test_clock_measurement import ClockedDevice, StampingFlush
from test_timing import SimBackend, SimNvml, SimTracer

pytest_plugins = ["gpuperf.wiring.plugin"]
''' + FAKE_DEVICE + '''
DEVICE = ClockedDevice(mhz=1980.0)
FLUSH, TRACER, BACKEND = StampingFlush(DEVICE), SimTracer(DEVICE), SimBackend(DEVICE)
GPU.nvml = SimNvml()


class FakePool(FakePool, GpuPool):
    """The fake GPU with the plugin's own measure fixture: the real timer on the simulated device."""

    def stream(self, ctx):
        return SimpleNamespace(synchronize=lambda: None)

    @contextlib.contextmanager
    def current(self, stream):
        yield

    def flush_buffer(self, ctx):
        return FLUSH

    def tracer(self):
        return TRACER

    def backend(self):
        return BACKEND


@pytest.fixture
def sim():
    """``sim(seconds, *more)``: a call of ``seconds`` of GPU time, then ``more`` in turn, call after call; at
    ``clock`` MHz (a list: call after call) with the cycles fixed, when ``cycles`` is given."""
    def call(*seconds, clocks=(), cycles=None):
        state = {"n": 0}

        def run(*operands):
            n = state["n"] = state["n"] + 1
            if cycles:
                DEVICE.mhz = clocks[n % len(clocks)]
                DEVICE.advance(cycles / (DEVICE.mhz * 1e6), "call")
            else:
                DEVICE.mhz = 1980.0
                DEVICE.advance(seconds[n % len(seconds)], "call")
        return run
    return call
'''

SIM_TESTS = '''
import pytest

from gpuperf.measure.metrics import gemm_work
from test_timing import SimArray

WORK = gemm_work(4096, 4096, 4096, "fp32")
CLOCKS = [1980.0 - 40.0 * (i % 18) for i in range(18)]


@pytest.mark.gemm
@pytest.mark.perf
def test_quiet(measure, perf, sim):
    perf.check(measure(sim(4e-3), WORK, operands=(SimArray(2**30),)))


@pytest.mark.gemm
@pytest.mark.perf
def test_noisy(measure, perf, sim):
    perf.check(measure(sim(4e-3, 6e-3, 5e-3), WORK, operands=(SimArray(2**30),)))


@pytest.mark.gemm
@pytest.mark.perf
def test_capped(measure, perf, sim):
    perf.check(measure(sim(clocks=CLOCKS, cycles=4e-3 * 1500e6), WORK, operands=(SimArray(2**30),)))
'''


def _sim_run(pytester: pytest.Pytester, *args: str) -> dict[str, dict[str, object]]:
    """The stopping rule's data of each case, from the run's results.json."""
    folder = pytester.path / "results"
    result = pytester.runpytest("-p", "no:cacheprovider", "--results-dir", str(folder), "--warmup-time", "0",
                                "--min-sample-time", "0.001", *args)
    assert result.ret in (0, 1), result.stdout.str()
    latest = max(folder.iterdir())
    records = json.loads((latest / "results.json").read_text())["records"]
    shutil.rmtree(folder)
    return {record["case_id"].split("::")[1].split("[")[0]: {**record["extra"]["sampling"], "status": record["status"]}
            for record in records}


@pytest.fixture
def sim_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("CI", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    pytester.makeconftest(SIM_CONFTEST)
    pytester.makepyfile(test_sim=SIM_TESTS)
    return pytester


@pytest.mark.long
def test_each_case_samples_to_its_band_and_its_results_say_what_the_rule_did(sim_project: pytest.Pytester) -> None:
    """No baseline: the band is --tolerance. The quiet case stops at the floor, the noisy one at --max-gpu-time,
    the power-capped one (time noisy, cycles fixed, no entry yet) on time, at the cap; --band-fraction sets the
    target. Then recorded, the power-capped case's entry holds its cycles at 1500 MHz, and the gate judges it on
    cycles: it stops at its floor."""
    first = _sim_run(sim_project, "--band-fraction", "0.5", "--max-gpu-time", "0.3")
    quiet, noisy, capped = first["test_quiet"], first["test_noisy"], first["test_capped"]
    assert (quiet["samples"], quiet["reason"], quiet["basis"], quiet["band"]) == (6, "converged", "time", 0.04)
    assert quiet["target"] == pytest.approx(0.02) and quiet["interval"] < 0.001
    assert noisy["reason"] == "cap" and 0.3 <= noisy["gpu_s"] < 0.45 and noisy["interval"] > 0.02
    assert capped["reason"] == "cap" and capped["basis"] == "time"
    recorded = sim_project.runpytest("-p", "no:cacheprovider", "--results-dir", "none", "--warmup-time", "0",
                                     "--min-sample-time", "0.001", "--max-gpu-time", "0.3", "--update-baselines",
                                     "-k", "capped")
    recorded.assert_outcomes(passed=1, deselected=2)
    gate = _sim_run(sim_project, "-k", "capped", "--max-gpu-time", "0.3")["test_capped"]
    assert gate["status"] == "PASS"
    assert (gate["basis"], gate["reason"], gate["samples"]) == ("cycles", "converged", 6)
    assert gate["target"] == pytest.approx(0.25 * gate["band"]) and gate["interval"] < 1e-6


def test_a_bad_band_fraction_is_a_usage_error(sim_project: pytest.Pytester) -> None:
    result = sim_project.runpytest("-p", "no:cacheprovider", "--band-fraction", "1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--band-fraction*not a fraction in (0, 1]*"])


AS_AB_SIDE = '''
import pytest

from gpuperf.wiring.stash import STATE


class RoundTurns:
    """An A/B side's turn protocol reduced to what the measurer reads: the run's threshold; no further round."""

    round_band = 0.03

    def settle(self, test, first, again):
        return first


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    session.config.stash[STATE].turns = RoundTurns()
'''


def test_an_ab_side_samples_each_round_to_the_run_s_threshold_not_to_a_baseline(sim_project: pytest.Pytester) -> None:
    """The plugin's own measure fixture on a side of an A/B run (its turn protocol's ``round_band`` set): the quiet
    case's band is the run's threshold, its target the rule's fraction of it, whatever the configured tolerance,
    and its recorded baseline entry is not read (no verdict but the paired one)."""
    recorded = sim_project.runpytest("-p", "no:cacheprovider", "--results-dir", "none", "--warmup-time", "0",
                                     "--min-sample-time", "0.001", "--update-baselines", "-k", "quiet")
    recorded.assert_outcomes(passed=1, deselected=2)
    alone = _sim_run(sim_project, "-k", "quiet", "--tolerance", "0.05")["test_quiet"]
    assert (alone["band"], alone["status"]) == (0.05, "PASS")
    sim_project.makepyfile(as_ab_side=AS_AB_SIDE)
    sim_project.syspathinsert()
    quiet = _sim_run(sim_project, "-p", "as_ab_side", "-k", "quiet", "--tolerance", "0.05")["test_quiet"]
    assert (quiet["band"], quiet["reason"], quiet["basis"]) == (0.03, "converged", "time")
    assert quiet["target"] == pytest.approx(0.25 * 0.03)
    assert quiet["status"] == "NO_BASELINE"  # the entry recorded above is not read on a side


ONE_ROUND = AS_AB_SIDE.replace("        return first", "        again(True)\n        return first")

KEPT_AFTER = """
from gpuperf.wiring.stash import PERF


def test_zz_after(request):
    kept = [item.stash[PERF].measure for item in request.session.items if PERF in item.stash]
    assert len(kept) == 1 and kept[0].rounds
    assert not kept[0]._recipes and not kept[0]._relocated, "a finished test's operands outlived it"
"""


def test_a_finished_test_s_operands_do_not_outlive_it(sim_project: pytest.Pytester) -> None:
    """The item keeps its ``perf`` (and so the measurer) to the session's end: the measure fixture's teardown drops
    what the measurer kept to measure again, the operands and an A/B round's relocated copies."""
    sim_project.makepyfile(as_ab_side=ONE_ROUND, test_zz_after=KEPT_AFTER)
    sim_project.syspathinsert()
    result = sim_project.runpytest("-p", "no:cacheprovider", "-p", "as_ab_side", "--results-dir", "none",
                                   "--warmup-time", "0", "--min-sample-time", "0.001", "-k", "quiet or after")
    result.assert_outcomes(skipped=1, passed=1, deselected=2)
