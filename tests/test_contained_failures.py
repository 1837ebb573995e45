"""Nothing a test measures can crash the session (gpuperf/wiring/containment.py), end to end through pytester.

Each stage between a measurement and the written files is made to fail for one case: its function monkeypatched to
raise (the in-process sessions use this process's modules), or the case fed what the code did not foresee (a kernel
record with an empty name, a NaN figure, a note that is no text, an attached object that is no data). Each time the
session ends with exit 1 (not 3: no INTERNALERROR), the failing case is an ``ERROR`` row with one line naming the
stage and the cause, and every other case is still measured, judged and written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
import yaml

import gpuperf.history.rows
import gpuperf.output.report
import gpuperf.output.results
import gpuperf.verdict.check
import gpuperf.wiring.fixtures
import gpuperf.wiring.lifecycle
import gpuperf.wiring.plugin
import gpuperf.wiring.session
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status
from gpuperf.wiring.containment import DEFECT, Stage
from test_plugin import GEMM_ID, GEMM_S, GEMV_ID, GEMV_S, TESTS, fake_project

pytest_plugins = ["pytester"]

#: One test per injected fault, beside the two healthy cases of test_plugin's project.
FAULTS = '''
from dataclasses import replace

import pytest

from gpuperf.measure.kernel_records import Kernel
from gpuperf.measure.metrics import gemv_work


@pytest.mark.gemv
@pytest.mark.perf
@pytest.mark.parametrize("fault", FAULTS)
def test_fault(fault, measure, perf):
    measured = measure(lambda: "nan" if fault == "nan" else "gemv", gemv_work(16384, 16384, "fp32"))
    if fault == "kernel":  # the H200's layer_norm: a kernel of an anonymous namespace, its short name empty
        measured = replace(measured, kernels=(Kernel(name="", grid=(16384, 1, 1), block=(32, 4, 1)),))
    perf.check(measured)
    if fault == "note":
        perf.note(42)
    if fault == "attach":
        perf.attach(handle=object())
'''


def faults_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *faults: str) -> pytest.Pytester:
    project = fake_project(pytester, monkeypatch, {"test_perf": TESTS, "test_faults": f"FAULTS = {list(faults)!r}\n"
                                                   + FAULTS}, gemv=GEMV_S, gemm=GEMM_S, nan=math.nan)
    return project


def fault_id(fault: str) -> str:
    return f"test_faults.py::test_fault[{fault}-cold]"


def raising_for(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, fault: str,
                concerns: Callable[..., bool]) -> None:
    """``owner.name`` made to raise where ``concerns(*args)`` says its call is about the case of ``fault``."""
    original = getattr(owner, name)

    def injected(*args: Any, **kwargs: Any) -> Any:
        if concerns(*args):
            raise RuntimeError(f"injected into {name}")
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, injected)


def about(fault: str) -> Callable[..., bool]:
    """Whether a call's arguments hold a record of ``fault``'s case that is not already its ERROR row."""
    def concerns(*args: Any) -> bool:
        records = [a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else [arg])]
        return any(isinstance(r, Record) and r.case_id == fault_id(fault) and r.status != Status.ERROR
                   for r in records)
    return concerns


def exporter(measurement: Any, record: Record) -> None:
    """pytest-benchmark's exporter (``output/benchmark_export.py``), failing for the case of the fault ``export``."""
    if record.case_id == fault_id("export"):
        raise RuntimeError("injected into exporter")


def session(project: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Record]]:
    """A run of the project and its results.json's records by case id."""
    result = project.runpytest("-p", "no:cacheprovider", "--missing-baseline=pass", "--results-dir", "out", *args)
    runs = list((project.path / "out").iterdir()) if (project.path / "out").exists() else []
    assert len(runs) == 1, result.stdout.str()
    data = json.loads((runs[0] / "results.json").read_text())
    return result, {r["case_id"]: Record.from_dict(r) for r in data["records"]}


def assert_contained(result: pytest.RunResult, records: dict[str, Record], lines: dict[str, str]) -> None:
    """Exit 1 without an INTERNALERROR; each faulty case (id → the start of its note) is an ERROR row whose line the
    output shows; the healthy cases were judged as usual."""
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert "INTERNALERROR" not in output and "Traceback" not in output
    for case, start in lines.items():
        record = records[case]
        assert record.status == Status.ERROR and record.note.startswith(start), (case, record.note)
        assert "\n" not in record.note and record.value is None  # results.json writes no figure as null
        assert f"ERROR {case}: no figure; {record.note}" in output
    for case in (GEMV_ID, GEMM_ID):
        assert records[case].status == Status.NO_BASELINE and records[case].value > 0


def test_a_failure_at_each_stage_of_a_case_is_its_error_row_and_the_session_goes_on(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    faults = ("check", "nan", "export", "note", "verdict", "attach", "kernel", "collect", "table", "results")
    project = faults_project(pytester, monkeypatch, *faults)
    raising_for(monkeypatch, gpuperf.wiring.fixtures, "case_record", "check",
                lambda case, *_: case.case_id == fault_id("check"))
    raising_for(monkeypatch, gpuperf.wiring.fixtures, "outcome", "verdict", about("verdict"))
    raising_for(monkeypatch, gpuperf.wiring.session.SessionState, "add", "collect", about("collect"))
    monkeypatch.setattr(gpuperf.wiring.plugin, "_benchmark_exporter", lambda request: exporter)  # --benchmark-json's
    raising_for(monkeypatch, gpuperf.output.report, "format_table", "table", about("table"))
    raising_for(monkeypatch, gpuperf.output.results, "summary_markdown", "results", about("results"))
    result, records = session(project)
    result.assert_outcomes(passed=2, failed=len(faults), deselected=1)
    assert_contained(result, records, {
        fault_id("check"): f"{Stage.CHECK}: RuntimeError: injected into case_record; {DEFECT}",
        fault_id("nan"): f"{Stage.CHECK}: sample times must be positive and finite; {DEFECT}",
        fault_id("export"): f"{Stage.EXPORT}: RuntimeError: injected into exporter; {DEFECT}",
        fault_id("note"): f"{Stage.NOTE}: TypeError: ",
        fault_id("verdict"): f"{Stage.VERDICT}: RuntimeError: injected into outcome; {DEFECT}",
        fault_id("attach"): f"{Stage.CARRY}: record['extra']['handle'] is a object, which is not JSON data: pass "
                            "perf.attach only JSON data",
        fault_id("kernel"): f"{Stage.READ_BACK}: a kernel needs a non-empty name, got {{'name': '', 'grid': [16384",
        fault_id("collect"): f"{Stage.COLLECT}: RuntimeError: injected into add; {DEFECT}",
        fault_id("table"): f"{Stage.TABLE}: RuntimeError: injected into format_table; {DEFECT}",
        fault_id("results"): f"{Stage.RESULTS}: RuntimeError: injected into summary_markdown; {DEFECT}",
    })
    assert records[fault_id("attach")].case_id == fault_id("attach") and records[fault_id("attach")].gpu == "fake-gpu"


def test_a_record_the_baseline_cannot_hold_is_not_recorded_and_the_others_are(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = faults_project(pytester, monkeypatch, "entry")
    original = gpuperf.verdict.check.entry_from_record

    def nan_entry(record: Record) -> Any:  # the entry of one record holds a figure no baseline may hold
        entry = original(record)
        return entry if record.case_id != fault_id("entry") else type(entry)(**{**vars(entry), "value": math.nan})

    monkeypatch.setattr(gpuperf.verdict.check, "entry_from_record", nan_entry)
    result, records = session(project, "--update-baselines")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and "INTERNALERROR" not in output
    assert records[fault_id("entry")].status == Status.ERROR
    assert records[fault_id("entry")].note.startswith(f"{Stage.BASELINE}: ")
    assert {records[case].status for case in (GEMV_ID, GEMM_ID)} == {Status.UPDATED}
    written = yaml.safe_load((project.path / "baselines" / "fake-gpu.yaml").read_text())
    assert set(written["entries"]) == {GEMV_ID, GEMM_ID}


def test_a_record_the_history_cannot_take_is_that_case_s_error_and_the_run_is_appended(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project = faults_project(pytester, monkeypatch, "history")

    def about_rows(columns: Any) -> bool:
        return any(r.get("case_id") == fault_id("history") and r.get("status") != Status.ERROR for r in columns)

    raising_for(monkeypatch, gpuperf.history.rows, "records_columns", "history", about_rows)
    result, records = session(project, "--history", "history.sqlite")
    assert_contained(result, records, {
        fault_id("history"): f"{Stage.HISTORY}: RuntimeError: injected into records_columns; {DEFECT}"})
    result.stdout.fnmatch_lines(["*history*history.sqlite*: 3 records appended*"])


def test_the_run_s_end_contains_what_no_earlier_stage_caught(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure the per-record checks did not see (they are switched off here) is still that case's ERROR row at
    the run's end: the results files and the table are made again without it."""
    project = faults_project(pytester, monkeypatch, "late")
    monkeypatch.setattr(gpuperf.wiring.lifecycle.SessionHooks, "_screened", lambda self, record, run: (record, ""))
    raising_for(monkeypatch, gpuperf.output.results, "summary_markdown", "late", about("late"))
    result, records = session(project)
    assert_contained(result, records, {
        fault_id("late"): f"{Stage.RESULTS}: RuntimeError: injected into summary_markdown; {DEFECT}"})


@pytest.mark.long
def test_records_from_xdist_workers_that_cannot_be_read_back_are_errors(pytester: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Across processes: the empty kernel name is caught in the worker, a record the controller cannot read in the
    controller (this process, whose ``Record.from_dict`` fails for one case)."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed: pip install -e '.[test]'")
    project = faults_project(pytester, monkeypatch, "kernel", "controller")
    original = Record.from_dict

    def failing(data: dict[str, Any]) -> Record:
        if data.get("case_id") == fault_id("controller") and data.get("status") != Status.ERROR:
            raise ValueError("injected into from_dict")
        return original(data)

    monkeypatch.setattr(Record, "from_dict", staticmethod(failing))
    result, records = session(project, "-n", "1")
    result.assert_outcomes(passed=2, failed=2)
    assert_contained(result, records, {
        fault_id("kernel"): f"{Stage.READ_BACK}: a kernel needs a non-empty name",
        fault_id("controller"): f"{Stage.READ_BACK}: injected into from_dict; {DEFECT}"})


ANONYMOUS = '''
from dataclasses import replace

import pytest

from gpuperf.measure.kernel_records import KernelActivity, call_kernels
from gpuperf.measure.metrics import reduction_work

LAYER_NORM = ("_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIN3c104HalfEfEEviT0_PKT_S8_S8_PS5_S9_PS6_")
SOFTMAX = ("_ZN2at6native12_GLOBAL__N_119cunn_SoftMaxForwardILi4EfffNS1_22SoftMaxForwardEpilogueEEEvPT2_PKT0_i")


@pytest.mark.perf
@pytest.mark.parametrize("symbol", [LAYER_NORM, SOFTMAX], ids=["layer_norm", "softmax"])
def test_anonymous(symbol, measure, perf):
    measured = measure(lambda: "gemv", reduction_work(16384, 8192, "fp16", outputs_per_row=8192))
    kernels = call_kernels([[KernelActivity(symbol, 0, 200_000, grid=(16384, 1, 1), block=(32, 4, 1))]])
    perf.check(replace(measured, kernels=kernels))
'''


def test_kernels_of_anonymous_namespaces_are_named_recorded_and_written(pytester: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The symbols of PyTorch's layer_norm and softmax kernels (``at::native::(anonymous namespace)::…``), which once
    ended the session with an INTERNALERROR, go through the plugin like any other: named, judged, written."""
    project = fake_project(pytester, monkeypatch, {"test_anonymous": ANONYMOUS}, gemv=GEMV_S, gemm=GEMM_S)
    result, records = session(project)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK and "INTERNALERROR" not in output, output
    names = {case.rsplit("[", 1)[1]: [k.name for k in record.kernels] for case, record in records.items()}
    assert names == {"layer_norm-cold]": ["vectorized_layer_norm_kernel"], "softmax-cold]": ["cunn_SoftMaxForward"]}
    assert all(record.status == Status.NO_BASELINE and record.value for record in records.values())
