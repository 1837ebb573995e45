"""Why a case is UNRELIABLE travels as data (``Record.reason``, ``Record.unreliable_reason``): the gate writes it,
results.json and results.csv carry it, and every reader (confirmation, ``compare``, the false-alarm count) reads
the field, never the note. A results file written before the field existed reads as ``unknown``, which never
passes."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuperf.cli import main
from gpuperf.output import diff, results
from gpuperf.store import results as results_format
from gpuperf.store.records import Reason, Record
from gpuperf.verdict.check import entry_from_record
from gpuperf.verdict.gate import Context, GateConfig, decide, is_noisy, needs_confirmation
from gpuperf.vocabulary import Status
from test_results import make_record, make_run

CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-1024x1024x1024-cold]"


def measured(value: float, spread: float = 0.01, **kw: object) -> Record:
    return replace(make_record("test_gemm_perf[fp32-nn-1024x1024x1024-cold]", value=value, baseline=None,
                               delta_pct=None, rel_iqr=spread), **kw)  # type: ignore[arg-type]


def test_the_gate_writes_the_reason_as_data() -> None:
    entry = entry_from_record(measured(10.0))
    noisy = decide(measured(10.0, spread=0.05), entry, GateConfig(), Context())  # 2 × 5 % > the 8 % cap
    throttled = decide(measured(10.0), entry, GateConfig(), Context(), unreliable_reason="thermal slowdown")
    clean = decide(measured(10.0), entry, GateConfig(), Context())
    assert (noisy.status, noisy.reason, noisy.unreliable_reason) == (Status.UNRELIABLE, Reason.NOISY, "")
    assert (throttled.status, throttled.reason, throttled.unreliable_reason) == (
        Status.UNRELIABLE, Reason.THROTTLED, "thermal slowdown")
    assert (clean.status, clean.reason) == (Status.PASS, Reason.NONE)


def test_noise_is_read_from_the_reason_not_from_the_note() -> None:
    noisy = measured(10.0, status=Status.UNRELIABLE, reason=Reason.NOISY, note="spread 9 % (reworded)")
    throttled = measured(10.0, status=Status.UNRELIABLE, reason=Reason.THROTTLED, note="noisy fan, throttled")
    assert is_noisy(noisy) and needs_confirmation(noisy)
    assert not is_noisy(throttled) and not needs_confirmation(throttled)


def test_compare_keeps_bs_throttling_from_the_field() -> None:
    a = entry_from_record(measured(10.0))
    b = measured(10.0, status=Status.UNRELIABLE, reliable=False, reason=Reason.THROTTLED,
                 unreliable_reason="HW slowdown", note="a reworded note that says nothing of it")
    [row] = diff.compare_runs({CASE: a}, {CASE: replace(b, case_id=CASE)}, GateConfig())
    assert (row.status, row.note) == (Status.UNRELIABLE, "unreliable: HW slowdown")
    noisy_b = measured(10.0, status=Status.UNRELIABLE, reason=Reason.NOISY, note="noisy: spread 5 %")
    [fresh] = diff.compare_runs({CASE: a}, {CASE: replace(noisy_b, case_id=CASE)}, GateConfig())
    assert fresh.status == Status.PASS  # noise is judged afresh: B's spread of 1 % fits


def _write(directory: Path, records: list[Record]) -> Path:
    return results.write_run(directory, make_run(), records).results_json


def test_results_files_carry_the_reason(tmp_path: Path) -> None:
    record = make_record("test_gemm_perf[fp32-nn-1024x1024x1024-cold]", status=Status.UNRELIABLE,
                         reason=Reason.THROTTLED, unreliable_reason="thermal slowdown", note="unreliable: x")
    path = _write(tmp_path / "run", [record])
    _, [loaded] = results_format.load_run(path)
    assert (loaded.reason, loaded.unreliable_reason) == (Reason.THROTTLED, "thermal slowdown")
    assert Record.from_dict(record.to_dict()) == record
    [row] = csv.DictReader(io.StringIO((path.parent / results_format.RESULTS_CSV).read_text()))
    assert (row["reason"], row["unreliable_reason"]) == (Reason.THROTTLED, "thermal slowdown")


def test_an_older_file_without_reasons_reads_as_unknown_and_never_passes(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a", [make_record("test_gemm_perf[fp32-nn-1024x1024x1024-cold]", value=10.0)])
    b = _write(tmp_path / "b", [make_record("test_gemm_perf[fp32-nn-1024x1024x1024-cold]", value=10.0,
                                            status=Status.UNRELIABLE, reliable=False,
                                            note="unreliable: power cap")])
    data = json.loads(b.read_text())
    for record in data["records"]:
        del record["reason"], record["unreliable_reason"]  # as gpuperf wrote it before the fields existed
    b.write_text(json.dumps(data))
    _, [old] = results_format.load_run(b)
    assert old.reason == Reason.UNKNOWN
    _, [clean] = results_format.load_run(a)
    assert clean.reason == Reason.NONE
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "UNRELIABLE" in out and "stored no reason" in out and "power cap" in out


def test_a_reason_that_is_not_one_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "run", [make_record("test_gemm_perf[fp32-nn-1024x1024x1024-cold]")])
    data = json.loads(path.read_text())
    data["records"][0]["reason"] = "cosmic rays"
    path.write_text(json.dumps(data))
    assert main(["compare", str(path), str(path)]) == 1
    err = capsys.readouterr().err
    assert "reason 'cosmic rays' is not one of" in err and len(err.strip().splitlines()) == 1

