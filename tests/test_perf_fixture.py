"""The object behind the ``perf`` fixture (``gpuperf.wiring.fixtures.Perf``), ``case_id_of``, and the run-wide
``gpuperf.wiring.session`` state it reads baselines from.

``Perf`` only needs something that can measure again; a scripted fake stands in for the GPU timer, so the
confirm-before-reporting logic and every policy are checked without CuPy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes import PEAKS

from gpuperf.store.baseline import BaselineError, Entry, dump_baseline
from gpuperf.verdict.gate import GateConfig
from gpuperf.verdict.check import CaseIdentity
from gpuperf.wiring.fixtures import Perf, case_id_of
from gpuperf.measure.measurement import Measurement, Method
from gpuperf.measure.metrics import Work, gemm_work
from gpuperf.store.records import Record, RunInfo
from gpuperf.verdict.check import baseline_header
from gpuperf.wiring.session import SessionState
from gpuperf.wiring.session_options import Options
from gpuperf.vocabulary import Metric, Status

# -- case_id_of ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("nodeid", "case_id"), [
    ("perf_tests/test_gemm.py::test_gemm_perf[gpu0-fp32-4096x4096x4096-cold]",
     "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"),
    ("perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-gpu1-cold]",
     "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"),
    ("perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold-gpu12]",
     "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"),
    ("perf_tests/test_x.py::test_x[gpu3]", "perf_tests/test_x.py::test_x"),
    ("perf_tests/test_gemv.py::test_gemv_perf[fp32-64x65536-hot]",
     "perf_tests/test_gemv.py::test_gemv_perf[fp32-64x65536-hot]"),
    ("perf_tests/test_x.py::test_x", "perf_tests/test_x.py::test_x"),
    ("perf_tests/test_x.py::TestY::test_x[gpu0-fp16]", "perf_tests/test_x.py::TestY::test_x[fp16]"),
])
def test_case_id_of_removes_only_the_gpu_segment(nodeid: str, case_id: str) -> None:
    assert case_id_of(nodeid) == case_id


def test_case_id_of_keeps_gpu_like_text_that_is_not_a_segment() -> None:
    nodeid = "perf_tests/test_x.py::test_x[mygpu0-gpu0x-fp32]"
    assert case_id_of(nodeid) == nodeid


def test_every_gpu_of_a_model_shares_one_case_id() -> None:
    ids = {case_id_of(f"perf_tests/test_gemm.py::test_gemm_perf[gpu{i}-fp32-7x5x3-cold]") for i in range(8)}
    assert len(ids) == 1


# -- a scripted measurement source -----------------------------------------------------------------------


SLUG = "nvidia-h200"
NODE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"
CASE = CaseIdentity(case_id=NODE, nodeid=NODE, family="gemm", params={"dtype": "fp32"}, gpu=SLUG, gpu_index=0)
SGEMM = gemm_work(4096, 4096, 4096, "fp32")
HEADER = {"gpu": "NVIDIA H200", "slug": SLUG, "driver": "580.159.04", "cuda_runtime": "13.0", "cublas": "13.1.0"}
RUN = RunInfo(gpu_name="NVIDIA H200", gpu_slug=SLUG, compute_capability="9.0", driver="580.159.04",
              cuda_runtime="13.0", cublas="13.1.0", cupy="14.0.0", sm_clock_max_mhz=1980, mem_clock_mhz=3201,
              flush_modes=("cold",), started="2025-01-01T00:00:00+00:00")


def at(tflops: float, work: Work = SGEMM, **kw: Any) -> Measurement:
    """A measurement of ``work`` whose median is exactly ``tflops``."""
    seconds = work.flops / (tflops * 1e12)
    return Measurement(samples_s=(seconds,) * 12, work=work, flush="cold", method=Method.COLD_FLUSH, **kw)


class ScriptedSource:
    """``measure`` for tests: ``again`` hands out the next scripted re-measurement and counts the calls."""

    def __init__(self, *again: Measurement) -> None:
        self.queue = list(again)
        self.asked: list[Measurement] = []
        self.relocated: list[bool] = []

    def __call__(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str | None = None,
                 label: str = "") -> Measurement:
        raise AssertionError("Perf must not take new measurements of its own")

    def again(self, measurement: Measurement, relocate: bool = False) -> Measurement:
        self.asked.append(measurement)
        self.relocated.append(relocate)
        if not self.queue:
            raise AssertionError("re-measured more often than scripted")
        return self.queue.pop(0)


def make_perf(tmp_path: Path, entries: dict[str, Entry] | None, source: ScriptedSource | None = None,
              **options: Any) -> Perf:
    """A ``Perf`` over a real baseline file in ``tmp_path`` (none when ``entries`` is None)."""
    if entries is not None:
        (tmp_path / f"{SLUG}.yaml").write_text(dump_baseline(HEADER, entries))
    state = SessionState(Options(baseline_dir=tmp_path, results_dir=None, **options))
    return Perf(state=state, case=CASE, peaks=PEAKS, measure=source or ScriptedSource(), run=RUN)


def tflops_entry(value: float, **kw: Any) -> Entry:
    return Entry(metric=Metric.TFLOPS, value=value, unit=Metric.TFLOPS, **kw)


BASE = {NODE: tflops_entry(50.0)}
#: The entries of a test that checks three figures: each check keyed by its own identity (``<case id>@2``, …).
THREE = {NODE: tflops_entry(50.0), f"{NODE}@2": tflops_entry(50.0), f"{NODE}@3": tflops_entry(50.0)}


# -- regressions are confirmed by one re-measurement ------------------------------------------------------


def test_confirmed_regression_is_reported_and_fails(tmp_path: Path) -> None:
    source = ScriptedSource(at(41.0))
    perf = make_perf(tmp_path, BASE, source)
    first = at(40.0)
    record = perf.check(first)
    assert source.asked == [first]  # re-measured exactly once, the same measurement
    assert source.relocated == [True]  # a gate's confirmation moves the operands to fresh memory
    assert record.status == Status.REGRESSED
    assert record.value == pytest.approx(41.0)  # the better of the two is what is reported
    assert "re-measured: first 40 TFLOPS (REGRESSED), second 41 (REGRESSED)" in record.note
    verdict, message = perf.outcome()
    assert verdict == "fail"
    assert message.startswith(f"REGRESSED {NODE}: 41 TFLOPS vs baseline 50 (-18.0 %, tolerance 4.0 %)")
    assert "re-measured" in message


def test_transient_regression_that_passes_on_re_measure_passes(tmp_path: Path) -> None:
    source = ScriptedSource(at(49.5))
    perf = make_perf(tmp_path, BASE, source)
    record = perf.check(at(40.0))
    assert len(source.asked) == 1
    assert record.status == Status.PASS
    assert record.value == pytest.approx(49.5)
    assert "re-measured: first 40 TFLOPS (REGRESSED), second 49.5 (PASS)" in record.note  # the blip stays visible
    assert perf.outcome() == ("pass", "")


def test_worse_re_measurement_keeps_the_first(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, BASE, ScriptedSource(at(30.0)))
    record = perf.check(at(40.0))
    assert record.status == Status.REGRESSED
    assert record.value == pytest.approx(40.0)
    assert "second 30" in record.note


def test_within_tolerance_is_not_re_measured(tmp_path: Path) -> None:
    source = ScriptedSource()
    perf = make_perf(tmp_path, BASE, source)
    record = perf.check(at(48.8))
    assert source.asked == []
    assert record.status == Status.PASS
    assert record.delta_pct == pytest.approx(-2.4)
    assert perf.outcome() == ("pass", "")


# -- improvements ----------------------------------------------------------------------------------------


def test_improvement_is_noted_and_passes(tmp_path: Path) -> None:
    source = ScriptedSource()
    perf = make_perf(tmp_path, BASE, source)
    record = perf.check(at(60.0))
    assert source.asked == []
    assert record.status == Status.IMPROVED
    assert "improved 20.0 % — update the baseline" in record.note
    assert perf.outcome() == ("pass", "")


def test_improvement_fails_under_strict(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, BASE, gate=GateConfig(strict=True))
    perf.check(at(60.0))
    verdict, message = perf.outcome()
    assert verdict == "fail"
    assert message.startswith(f"--strict-baselines: {NODE}: improved 20.0 %")
    assert "--update-baselines" in message


# -- missing baselines -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "verdict"), [("skip", "skip"), ("fail", "fail"), ("pass", "pass")])
def test_no_baseline_file_follows_the_policy(tmp_path: Path, policy: str, verdict: str) -> None:
    perf = make_perf(tmp_path, None, missing=policy)
    record = perf.check(at(50.0))
    assert record.status == Status.NO_BASELINE
    assert "--update-baselines" in record.note
    got, message = perf.outcome()
    assert got == verdict
    if verdict != "pass":
        assert NODE in message
        assert "pytest perf_tests/test_gemm.py --update-baselines -k 'test_gemm_perf[" in message
    else:
        assert message == ""


def test_no_entry_for_this_case_in_an_existing_file(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, {"perf_tests/test_other.py::test_other": tflops_entry(1.0)}, missing="fail")
    assert perf.check(at(50.0)).status == Status.NO_BASELINE
    assert perf.outcome()[0] == "fail"


def test_default_missing_policy_is_skip(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, None)
    perf.check(at(50.0))
    assert perf.outcome()[0] == "skip"


# -- unreliable measurements -----------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "verdict"), [("skip", "skip"), ("fail", "fail"), ("pass", "pass")])
def test_unreliable_follows_its_policy_and_is_not_re_measured(tmp_path: Path, policy: str, verdict: str) -> None:
    source = ScriptedSource()
    perf = make_perf(tmp_path, BASE, source, on_unreliable=policy)
    record = perf.check(at(30.0, unreliable_reason="hw_thermal_slowdown"))  # slow, but throttled
    assert source.asked == []
    assert record.status == Status.UNRELIABLE
    got, message = perf.outcome()
    assert got == verdict
    if verdict != "pass":
        assert "hw_thermal_slowdown" in message


def test_a_regression_fails_even_next_to_an_unreliable_case(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, THREE, ScriptedSource(at(40.0)), on_unreliable="skip")
    perf.check(at(30.0, unreliable_reason="hw_slowdown"))
    perf.check(at(40.0))
    verdict, message = perf.outcome()
    assert verdict == "fail"
    assert "REGRESSED" in message


# -- anomalies, several checks, update mode --------------------------------------------------------------


def test_above_peak_fails_without_re_measuring(tmp_path: Path) -> None:
    source = ScriptedSource()
    perf = make_perf(tmp_path, BASE, source)
    record = perf.check(at(80.0))  # FP32 peak is 66.9
    assert source.asked == []
    assert record.status == Status.ANOMALY
    verdict, message = perf.outcome()
    assert verdict == "fail"
    assert message.startswith(f"ANOMALY {NODE}: 80 TFLOPS; above-compute-peak")


def test_every_failing_check_of_a_test_is_reported(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, THREE, ScriptedSource(at(40.0)))
    perf.check(at(80.0))
    perf.check(at(40.0))
    perf.check(at(50.0))
    verdict, message = perf.outcome()
    assert verdict == "fail"
    assert [line.split()[:2] for line in message.splitlines()] == [["ANOMALY", f"{NODE}:"], ["REGRESSED", f"{NODE}@2:"]]
    assert [record.case_id for record in perf.records] == [NODE, f"{NODE}@2", f"{NODE}@3"]


def test_each_check_is_judged_against_its_own_entry_never_another_checks(tmp_path: Path) -> None:
    """A large and a small GEMM in one test: the second figure (25) is judged against its own entry (50), not the
    first's (10), so it regresses instead of reading as an improvement; a check with no entry of its own has no
    baseline, whatever the first check's entry."""
    entries = {NODE: tflops_entry(10.0), f"{NODE}@2": tflops_entry(50.0)}
    perf = make_perf(tmp_path, entries, ScriptedSource(at(25.0)))
    first, second, third = perf.check(at(10.0)), perf.check(at(25.0)), perf.check(at(10.0))
    assert (first.status, second.status, third.status) == (Status.PASS, Status.REGRESSED, Status.NO_BASELINE)
    assert second.case_id == f"{NODE}@2" and second.delta_pct == pytest.approx(-50.0)


def test_update_mode_records_and_is_collected(tmp_path: Path) -> None:
    source = ScriptedSource()
    perf = make_perf(tmp_path, BASE, source, update=True)
    record = perf.check(at(40.0))
    assert source.asked == []
    assert record.status == Status.UPDATED
    assert perf.outcome() == ("pass", "")
    perf.state.add(record, RUN)
    updates = perf.state.updates()
    assert list(updates) == [SLUG]
    assert updates[SLUG][NODE].value == pytest.approx(40.0)


# -- notes -----------------------------------------------------------------------------------------------


def test_notes_are_appended_to_rows_before_and_after(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, THREE)
    perf.check(at(50.0))
    perf.note("split-k 4")
    perf.check(at(49.0))
    assert [r.note for r in perf.records] == ["split-k 4", "split-k 4"]
    perf.note("algo 7")
    assert [r.note for r in perf.records] == ["split-k 4; algo 7", "split-k 4; algo 7"]


def test_notes_follow_the_verdict_note(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, BASE)
    perf.note("heuristic default")
    record = perf.check(at(60.0))
    assert record.note.startswith("improved 20.0 %")
    assert record.note.endswith("; heuristic default")


def test_a_note_that_is_part_of_an_earlier_note_is_still_added(tmp_path: Path) -> None:
    """cuBLASLt algorithms 12 and 1 are different algorithms; the second note must not vanish because its
    text happens to occur inside the first."""
    perf = make_perf(tmp_path, BASE)
    perf.check(at(50.0))
    perf.note("algo 12")
    perf.note("algo 1")
    assert perf.records[0].note == "algo 12; algo 1"


def test_a_note_that_occurs_in_the_verdict_note_is_still_added(tmp_path: Path) -> None:
    """The NO_BASELINE / IMPROVED note quotes the test id (dtype, shape, flush); a note such as "fp32" must
    still appear on that row."""
    perf = make_perf(tmp_path, None)
    perf.note("fp32")
    record = perf.check(at(50.0))
    assert record.status == Status.NO_BASELINE
    assert record.note.endswith("; fp32")


# -- ratios ----------------------------------------------------------------------------------------------


def test_check_ratio_uses_the_hash_entry(tmp_path: Path) -> None:
    entries = {NODE: tflops_entry(50.0), f"{NODE}#vs_cublas": Entry(metric=Metric.RATIO, value=0.6, unit="×")}
    perf = make_perf(tmp_path, entries)
    record = perf.check_ratio(at(30.0), at(50.0))
    assert record.case_id == f"{NODE}#vs_cublas"
    assert record.metric == Metric.RATIO
    assert record.value == pytest.approx(0.6)
    assert record.baseline == 0.6
    assert record.status == Status.PASS


def test_check_ratio_with_its_own_name_and_regression(tmp_path: Path) -> None:
    entries = {f"{NODE}#vs_tiled": Entry(metric=Metric.RATIO, value=2.0, unit="×")}
    source = ScriptedSource(at(31.0), at(20.0))
    perf = make_perf(tmp_path, entries, source)
    numerator, denominator = at(30.0), at(20.0)
    record = perf.check_ratio(numerator, denominator, name="vs_tiled")  # 1.5× against a 2.0× baseline
    assert source.asked == [numerator, denominator]  # confirmed like check: both sides measured again
    assert record.case_id == f"{NODE}#vs_tiled"
    assert record.status == Status.REGRESSED
    assert record.value == pytest.approx(1.55)  # the better of the two tries
    assert "re-measured: first 1.5 × (REGRESSED), second 1.55 (REGRESSED)" in record.note
    assert perf.outcome()[0] == "fail"


def test_a_transient_ratio_drop_passes_on_re_measurement(tmp_path: Path) -> None:
    entries = {f"{NODE}#vs_cublas": Entry(metric=Metric.RATIO, value=2.0, unit="×")}
    perf = make_perf(tmp_path, entries, ScriptedSource(at(40.0), at(20.0)))
    record = perf.check_ratio(at(30.0), at(20.0))
    assert record.status == Status.PASS
    assert record.value == pytest.approx(2.0)


def noisy(tflops: float, spread: float) -> Measurement:
    """Forty samples whose median gives ``tflops`` and whose relative IQR is about ``spread``."""
    seconds = SGEMM.flops / (tflops * 1e12)
    steps = [i / 39 - 0.5 for i in range(40)]
    return Measurement(samples_s=tuple(seconds * (1 + 2 * spread * x) for x in steps), work=SGEMM, flush="cold",
                       method=Method.COLD_FLUSH)


def test_a_measurement_too_noisy_for_its_entry_is_re_measured_then_unreliable(tmp_path: Path) -> None:
    source = ScriptedSource(noisy(50.0, 0.05))
    perf = make_perf(tmp_path, BASE, source)
    record = perf.check(noisy(50.0, 0.06))
    assert len(source.asked) == 1
    assert record.status == Status.UNRELIABLE and record.note.startswith("noisy")
    assert perf.outcome()[0] == "skip"
    quiet_second = make_perf(tmp_path, BASE, ScriptedSource(at(49.0)))
    assert quiet_second.check(noisy(50.0, 0.06)).status == Status.PASS  # a clean second try stands


def test_check_ratio_without_entry_is_no_baseline(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, BASE, missing="fail")
    assert perf.check_ratio(at(30.0), at(50.0)).status == Status.NO_BASELINE
    assert perf.outcome()[0] == "fail"


# -- session state ---------------------------------------------------------------------------------------


def test_baseline_is_loaded_once_per_gpu(tmp_path: Path) -> None:
    perf = make_perf(tmp_path, BASE)
    state = perf.state
    assert state.entry(SLUG, NODE) == BASE[NODE]
    (tmp_path / f"{SLUG}.yaml").write_text("not: [valid")  # later edits do not change a running session
    assert state.entry(SLUG, NODE) == BASE[NODE]
    assert state.entry(SLUG, "unknown-case") is None
    assert state.entry("nvidia-b200", NODE) is None  # no file for that GPU


def test_session_refuses_a_baseline_of_another_gpu(tmp_path: Path) -> None:
    (tmp_path / f"{SLUG}.yaml").write_text(dump_baseline({**HEADER, "slug": "nvidia-a100"}, BASE))
    state = SessionState(Options(baseline_dir=tmp_path))
    with pytest.raises(BaselineError, match="nvidia-a100"):
        state.baseline_for(SLUG)


def test_session_reports_a_broken_baseline_naming_the_entry(tmp_path: Path) -> None:
    (tmp_path / f"{SLUG}.yaml").write_text(dump_baseline(HEADER, BASE).replace("value: 50.0", "value: -1"))
    state = SessionState(Options(baseline_dir=tmp_path))
    with pytest.raises(BaselineError) as info:
        state.entry(SLUG, NODE)
    assert NODE in str(info.value) and str(tmp_path / f"{SLUG}.yaml") in str(info.value)


def _record(case_id: str, status: str, gpu: str = SLUG, clocks: tuple[int, int] | None = None) -> Record:
    return Record(case_id=case_id, nodeid=case_id, family="gemm", params={}, metric=Metric.TFLOPS, value=10.0,
                  unit=Metric.TFLOPS, status=status, gpu=gpu, sm_clock_mhz=clocks, samples=20, rel_iqr=0.01,
                  flush="cold", method=Method.COLD_FLUSH, kernel="cuBLAS fp32 nn", precision="fp32",
                  shape={"batch": 1, "m": 64, "n": 64, "k": 64}, flops=5.2e5, bytes=4.9e4)


def test_updates_are_only_updated_records_grouped_by_gpu() -> None:
    state = SessionState(Options())
    state.add(_record("a", Status.UPDATED), RUN)
    state.add(_record("b", Status.ANOMALY), RUN)
    state.add(_record("c", Status.UNRELIABLE), RUN)
    state.add(_record("d", Status.UPDATED, gpu="nvidia-a100"), None)
    updates = state.updates()
    assert {slug: sorted(entries) for slug, entries in updates.items()} == {SLUG: ["a"], "nvidia-a100": ["d"]}
    assert updates[SLUG]["a"] == Entry(metric=Metric.TFLOPS, value=10.0, unit=Metric.TFLOPS, spread=0.01, samples=20,
                                       flush="cold", method=Method.COLD_FLUSH, family="gemm",
                                       kernel="cuBLAS fp32 nn", precision="fp32",
                                       shape=(("batch", 1), ("m", 64), ("n", 64), ("k", 64)), flops=5.2e5,
                                       bytes=4.9e4)  # what the case is travels into the baseline as data
    assert list(state.run_infos) == [SLUG]
    assert len(state.records) == 4


def test_baseline_header_records_identity_versions_and_clocks_seen() -> None:
    run = RunInfo(**{**RUN.to_dict(), "flush_modes": ("cold",), "extra": {"peaks": {"memory_gbps": 4814.3}}})
    records = [_record("a", Status.UPDATED, clocks=(1980, 1755)), _record("b", Status.UPDATED, clocks=(1830, 1980)),
               _record("c", Status.UPDATED, gpu="nvidia-a100", clocks=(1410, 900)), _record("d", Status.UPDATED)]
    header = baseline_header(run, records, "2025-06-01T00:00:00+00:00")
    assert header["gpu"] == "NVIDIA H200" and header["slug"] == SLUG
    assert (header["driver"], header["cuda_runtime"], header["cublas"], header["cupy"]) == \
        ("580.159.04", "13.0", "13.1.0", "14.0.0")
    assert header["compute_capability"] == "9.0"
    assert header["recorded"] == "2025-06-01T00:00:00+00:00"
    assert header["clocks"] == {"sm_max_mhz": 1980, "mem_mhz": 3201, "sm_seen_mhz": [1755, 1980]}
    assert header["peaks"] == {"memory_gbps": 4814.3}
    assert baseline_header(RUN, [], "now")["clocks"] == {"sm_max_mhz": 1980, "mem_mhz": 3201}
    assert "peaks" not in baseline_header(RUN, [], "now")


@pytest.mark.parametrize("bad", [{"tolerance": 1.5}, {"noise_k": -1.0}])
def test_options_validate_the_gate(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Options(gate=GateConfig(**bad))


class _ScriptedTurns:
    """An A/B side's turns: asks for ``rounds`` more figures of every checked case, each a round (relocated)."""

    round_band = 0.02

    def __init__(self, rounds: int) -> None:
        self.more = rounds

    def settle(self, test: str, first: Any, again: Callable[[bool], Any]) -> Any:
        for _ in range(self.more):
            again(True)
        return first


def test_an_ab_round_measures_on_relocated_operands(tmp_path: Path) -> None:
    """Each A/B round re-measures on operands in fresh memory (``rotation.relocated``): a process keeps a buffer's
    placement for good, and placement moves a memory-bound call by a few per cent, which pairing cannot cancel."""
    source = ScriptedSource(at(50.0), at(50.0))
    perf = make_perf(tmp_path, BASE, source)
    perf.state.turns = _ScriptedTurns(2)
    perf.check(at(50.0))
    assert source.relocated == [True, True]


class _RecordingTimer:
    """Answers every measurement with ``at(50.0)`` and keeps how it was asked for."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def measure(self, fn: Any, work: Work, operands: Sequence[Any] = (), flush: str = "cold", label: str = "",
                prefer_method: str = "", band: Any = None, repeat: bool = False) -> Measurement:
        self.asked.append({"band": band, "repeat": repeat})
        return at(50.0)


@pytest.mark.parametrize("rounds", [False, True])
def test_a_measurement_again_is_sampled_to_its_band_and_is_a_repeat_only_as_an_ab_round(rounds: bool) -> None:
    """A gate's confirmation and an A/B round are sampled to the same band as the first measurement; only an A/B
    round (``rounds``) is a ``repeat``: warmed by count, no second cross-check."""
    from gpuperf.measure.stats import Band
    from gpuperf.wiring.fixtures import Measurer

    timer = _RecordingTimer()
    measurer = Measurer(timer, "cold", band_for=lambda work: Band(time=0.02), rounds=rounds)
    first = measurer(lambda: None, SGEMM)
    measurer.again(first, relocate=True)
    measurer.again(first)
    assert [a["band"] for a in timer.asked] == [Band(time=0.02)] * 3
    assert [a["repeat"] for a in timer.asked] == [False, rounds, False]
