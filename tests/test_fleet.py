"""``gpuperf.verdict.fleet`` and its commands: a baseline from several runs (median, run spread) and the
fleet's host-to-host and run-to-run spread, from results files like real runs write."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuperf.cli import main
from gpuperf.output.results import write_run
from gpuperf.store.baseline import Entry, load_baseline
from gpuperf.verdict.fleet import FleetError, Run, entries_from_runs, fleet_spread
from gpuperf.verdict.gate import GateConfig, effective_tolerance
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Status

CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-4096x4096x4096-cold]"
STREAMS = "perf_tests/test_batched.py::test_batched_streams_perf[fp32-4streams-10000x32x32x32-cold]"
INFO = RunInfo("NVIDIA H200", "nvidia-h200", "9.0", "580.159.04", "13.2", "13.1.0", "14.2.0", 1980, 3201,
               ("cold",), "2026-11-30T10:00:00+00:00", extra={"peaks": {"memory_gbps": 4814.3}})


def record(value: float, case: str = CASE, status: str = Status.PASS, method: str = "cold-flush",
           **kw: Any) -> Record:
    return Record(case_id=case, nodeid=case, family="gemm", params={}, metric="TFLOPS", value=value,
                  unit="TFLOPS", status=status, rel_iqr=0.004, samples=90, method=method, flush="cold",
                  **{"precision": "fp32", **kw})


def run(host: str, *records: Record, info: RunInfo = INFO) -> Run:
    return Run(host=host, info=info, records={r.case_id: r for r in records})


def test_an_entry_is_the_median_of_the_runs_with_their_range() -> None:
    runs = [run("a", record(50.0)), run("b", record(52.0)), run("c", record(51.0, kernel="cuBLAS fp32 nn",
                                                                           precision="fp32"))]
    [(case, entry)] = entries_from_runs(runs).items()
    assert case == CASE and entry.value == 51.0 and entry.runs == 3
    assert entry.run_spread == pytest.approx(2.0 / 51.0)
    assert (entry.kernel, entry.precision) == ("cuBLAS fp32 nn", "fp32")  # described by the run that says
    assert entry.spread == 0.004 and entry.samples == 90


def test_only_clean_figures_of_the_usual_method_count() -> None:
    runs = [run("a", record(50.0)), run("b", record(51.0)), run("c", record(40.0, status=Status.UNRELIABLE)),
            run("d", record(20.0, method="cold-flush-unheld")), run("e", record(49.0, reliable=False))]
    entry = entries_from_runs(runs)[CASE]
    assert entry.runs == 2 and entry.value == 50.5 and entry.method == "cold-flush"


def test_the_runs_range_widens_the_band_up_to_the_cap() -> None:
    config = GateConfig()
    assert effective_tolerance(Entry("TFLOPS", 11.2, "TFLOPS", runs=5, run_spread=0.048), config) == 0.048
    assert effective_tolerance(Entry("TFLOPS", 11.2, "TFLOPS", runs=5, run_spread=0.02), config) == 0.04
    assert effective_tolerance(Entry("TFLOPS", 11.2, "TFLOPS", runs=5, run_spread=0.3), config) == 0.08


def test_a_median_baseline_holds_where_a_single_run_one_raises_a_false_alarm() -> None:
    """The H200 figures of the 4-stream case over five runs on four hosts (issue 13)."""
    values = {"cce8": 11.22, "7b1b": 10.98, "28d6": 11.47, "dece-1": 10.94, "dece-2": 11.25}
    runs = [run(host.split("-")[0], record(value, case=STREAMS)) for host, value in values.items()]
    single = entries_from_runs([runs[2]])[STREAMS]  # recorded from the 11.47 run alone
    assert (10.94 - single.value) / single.value < -0.04  # the false alarm of device run 7
    for index, judged in enumerate(runs):
        median = entries_from_runs([r for i, r in enumerate(runs) if i != index])[STREAMS]
        delta = (judged.records[STREAMS].value - median.value) / median.value
        assert delta > -effective_tolerance(median, GateConfig())


def test_runs_of_another_model_or_software_are_refused() -> None:
    with pytest.raises(FleetError, match="a baseline is per GPU model"):
        entries_from_runs([run("a", record(1.0)), run("b", record(1.0), info=replace(INFO, gpu_slug="nvidia-h100"))])
    with pytest.raises(FleetError, match="one driver, CUDA and cuBLAS"):
        entries_from_runs([run("a", record(1.0)), run("b", record(1.0), info=replace(INFO, driver="570.86.15"))])
    with pytest.raises(FleetError, match="no runs given"):
        entries_from_runs([])


def test_host_to_host_and_run_to_run_spread_are_separated() -> None:
    runs = [run("a", record(50.0)), run("a", record(51.0)), run("b", record(54.0))]
    [spread] = fleet_spread(runs)
    assert (spread.hosts, spread.runs) == (2, 3)
    assert spread.host_spread == pytest.approx((54.0 - 50.5) / 52.25)
    assert spread.run_spread == pytest.approx(1.0 / 50.5)


def test_a_run_is_named_by_its_gpu_uuid_when_the_results_record_it() -> None:
    with_uuid = replace(INFO, extra={"uuid": "GPU-dece5dcc"})
    assert Run.of(with_uuid, [record(1.0)], "label").host == "GPU-dece5dcc"
    assert Run.of(INFO, [record(1.0)], "label").host == "label"
    with pytest.raises(FleetError, match="one results file per GPU"):
        Run.of(INFO, [record(1.0, gpu_index=0), record(1.0, case=STREAMS, gpu_index=1)], "x")


def results(tmp_path: Path, name: str, *records: Record) -> Path:
    return write_run(tmp_path / name, INFO, list(records)).directory


def test_baseline_from_runs_writes_a_sealed_median_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [results(tmp_path, f"r{i}", record(value)) for i, value in enumerate((50.0, 52.0, 51.0))]
    path = tmp_path / "baselines" / "nvidia-h200.yaml"
    assert main(["baseline", "from-runs", str(path), f"a={runs[0]}", f"b={runs[1]}", f"b={runs[2]}"]) == 0
    assert "1 entries from 3 runs on 2 GPUs" in capsys.readouterr().out
    assert main(["baseline", "check", str(path)]) == 0
    baseline = load_baseline(path)
    assert baseline is not None and baseline.header["driver"] == "580.159.04"
    entry = baseline.entries[CASE]
    assert (entry.value, entry.runs) == (51.0, 3) and entry.run_spread == pytest.approx(2.0 / 51.0, rel=1e-5)


def test_fleet_prints_the_spread_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [results(tmp_path, f"r{i}", record(value)) for i, value in enumerate((50.0, 52.0))]
    assert main(["fleet", f"a={runs[0]}", f"b={runs[1]}", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 runs on 2 NVIDIA H200 GPUs: a ×1, b ×1")
    assert "| `test_gemm_perf[fp32-nn-4096x4096x4096-cold]` | 2 | 2 | 51.00 | 3.9 | 0.0 |" in out


def test_from_runs_refuses_mixed_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = results(tmp_path, "one", record(1.0))
    other = write_run(tmp_path / "two", replace(INFO, gpu_slug="nvidia-h100"), [record(1.0)]).directory
    assert main(["baseline", "from-runs", str(tmp_path / "x.yaml"), str(one), str(other)]) == 1
    assert "a baseline is per GPU model" in capsys.readouterr().err


def test_a_new_case_or_gpu_can_be_recorded_from_runs() -> None:
    runs = [run("a", record(50.0, status=Status.NO_BASELINE)), run("b", record(51.0, status=Status.NO_BASELINE))]
    assert entries_from_runs(runs)[CASE].value == 50.5


def test_runs_too_far_apart_to_be_one_population_are_refused() -> None:
    with pytest.raises(FleetError, match="leave the outlier run out"):
        entries_from_runs([run("a", record(10.0)), run("b", record(10.0)), run("c", record(21.0))])


def test_runs_that_launched_other_kernels_are_left_out_and_the_kernels_recorded() -> None:
    """Another build of a custom kernel, or another cuBLAS choice, is another thing measured, not noise."""
    from gpuperf.measure.kernel_records import Kernel

    usual = (Kernel("nvjet_sm90_hsh_256x128", (132, 1, 1), (384, 1, 1), (2, 1, 1), 168, 200000, 180.0),)
    other = (Kernel("nvjet_sm90_hsh_128x128", (264, 1, 1), (384, 1, 1), (1, 1, 1), 168, 150000, 150.0),)
    runs = [run("a", record(750.0, kernels=usual)), run("b", record(900.0, kernels=other)),
            run("c", record(760.0, kernels=(replace(usual[0], median_us=178.0),)))]
    entry = entries_from_runs(runs)[CASE]
    assert entry.value == 755.0 and entry.runs == 2  # the 900 run launched another kernel: left out
    assert entry.kernels == (replace(usual[0], median_us=179.0),)  # with the median of the runs' durations
