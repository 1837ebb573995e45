"""``gpuperf.store.records``: ``Record`` and ``RunInfo`` travel as plain dicts (xdist, results files) and back."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, fields

import pytest

from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Status

FULL = Record(
    case_id="perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]",
    nodeid="perf_tests/test_gemm.py::test_gemm_perf[gpu1-fp32-4096x4096x4096-cold]",
    family="gemm", params={"dtype": "fp32", "shape": "4096x4096x4096"}, metric="TFLOPS", value=51.2,
    unit="TFLOPS", status=Status.REGRESSED, note="5.0 % below baseline", pct_of_peak=76.5, peak=66.9,
    flops=1.37e11, bytes=2.01e8, arithmetic_intensity=682.7, tflops=51.2, gbps=75.0, median_s=2.68e-3,
    min_s=2.66e-3, p10_s=2.67e-3, p90_s=2.70e-3, rel_iqr=0.004, rel_stdev=0.005, samples=75, calls_per_sample=1,
    method="cold-flush", flush="cold", sm_clock_mhz=(1980, 1755), clock_events=("sw_power_cap",), reliable=True,
    baseline=53.9, delta_pct=-5.0, tolerance=0.03, gpu="nvidia-h200", gpu_index=1,
    extra={"stop_reason": "converged", "precision": "fp32"},
)
RUN = RunInfo(gpu_name="NVIDIA H200", gpu_slug="nvidia-h200", compute_capability="9.0", driver="580.159.04",
              cuda_runtime="13.0", cublas="13.1.0", cupy="14.0.0", sm_clock_max_mhz=1980, mem_clock_mhz=3201,
              flush_modes=("cold", "hot"), started="2025-01-01T00:00:00+00:00",
              extra={"peaks": {"memory_gbps": 4814.3}})


def test_record_round_trips_through_json() -> None:
    data = json.loads(json.dumps(FULL.to_dict()))  # tuples become lists on the way
    assert data["sm_clock_mhz"] == [1980, 1755]
    assert data["clock_events"] == ["sw_power_cap"]
    back = Record.from_dict(data)
    assert back == FULL
    assert isinstance(back.sm_clock_mhz, tuple) and isinstance(back.clock_events, tuple)


def test_record_to_dict_has_every_field() -> None:
    assert set(FULL.to_dict()) == {f.name for f in fields(Record)}


def test_minimal_record_round_trip_and_defaults() -> None:
    r = Record(case_id="c", nodeid="c", family="other", params={}, metric="GB/s", value=1.0, unit="GB/s",
               status=Status.PASS)
    data = json.loads(json.dumps(r.to_dict()))
    assert data["sm_clock_mhz"] is None
    assert data["clock_events"] == []
    assert Record.from_dict(data) == r
    assert r.reliable is True and r.note == "" and r.extra == {}


def test_from_dict_ignores_unknown_keys_from_newer_files() -> None:
    data = {**FULL.to_dict(), "added_in_a_later_version": 1}
    assert Record.from_dict(data) == FULL


def test_from_dict_tolerates_missing_clock_events() -> None:
    data = FULL.to_dict()
    del data["clock_events"]
    assert Record.from_dict(data).clock_events == ()


@pytest.mark.parametrize(("status", "failed"), [
    (Status.REGRESSED, True), (Status.ANOMALY, True), (Status.PASS, False), (Status.IMPROVED, False),
    (Status.NO_BASELINE, False), (Status.UNRELIABLE, False), (Status.UPDATED, False),
])
def test_only_regressions_and_anomalies_fail(status: str, failed: bool) -> None:
    r = Record(case_id="c", nodeid="c", family="gemm", params={}, metric="TFLOPS", value=1.0, unit="TFLOPS",
               status=status)
    assert r.failed is failed


def test_records_are_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        FULL.value = 1.0  # type: ignore[misc]


def test_run_info_round_trips_through_json() -> None:
    data = json.loads(json.dumps(RUN.to_dict()))
    assert data["flush_modes"] == ["cold", "hot"]
    back = RunInfo.from_dict(data)
    assert back == RUN
    assert isinstance(back.flush_modes, tuple)


def test_run_info_from_dict_ignores_unknown_and_defaults_flush_modes() -> None:
    data = {**RUN.to_dict(), "unknown": "x"}
    del data["flush_modes"]
    back = RunInfo.from_dict(data)
    assert back.flush_modes == ()
    assert back.gpu_slug == "nvidia-h200"
