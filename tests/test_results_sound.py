"""The results reader's one statement of each field's rule (``store.field_checks``), applied to every field of every
record: a field given a value its type refuses is refused naming the file, the record and the field; committed
files are read; the written text is the reader's indented form."""

from __future__ import annotations

import copy
import json
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzing import FLEET_RUNS, JSON_VALUES, REPO
from gpuperf.history import schema as history_schema
from gpuperf.store import reading
from gpuperf.store import results as results_format
from gpuperf.store.field_checks import field_table
from gpuperf.store.records import Record, RunInfo
from gpuperf.store.results import ResultsError, check_run

HERE = Path("results.json")
SEEDS = [REPO / "evidence" / "h200" / "results.json", *FLEET_RUNS[:3]]
#: Values no sound file holds in most fields, beside JSON_VALUES' random ones.
HOSTILE = st.sampled_from([True, False, None, "", 0, -1, 2.5, float("inf"), float("nan"), 10**19, [], [1, 2],
                           [1, 2, 3], ["x"], {}, {"a": 1}, {"a": [1]}, {"a": None}, "PASS", "not-a-status"])


def _document(seed: Path, records: int = 12) -> dict[str, Any]:
    data = json.loads(seed.read_text())
    data["records"] = data["records"][:records]
    return data


def _outcome(call: Any) -> str:
    try:
        call()
    except ResultsError as exc:
        return f"refused: {exc}"
    return "accepted"


@pytest.mark.parametrize("seed", SEEDS, ids=lambda path: path.name)
def test_committed_files_are_read(seed: Path) -> None:
    run, records = check_run(seed, json.loads(seed.read_text()))
    assert run.gpu_slug and records and all(record.case_id for record in records)


@settings(deadline=None)
@given(st.data())
def test_a_field_its_type_refuses_is_refused_naming_file_record_and_field(data: st.DataObject) -> None:
    document = _document(data.draw(st.sampled_from(SEEDS)))
    value = data.draw(HOSTILE | JSON_VALUES)
    if data.draw(st.booleans()):
        name, required, checks = data.draw(st.sampled_from(field_table(RunInfo)))
        document["run"][name] = value
        where = f"{HERE}: run: field {name!r}"
    else:
        index = data.draw(st.integers(0, len(document["records"]) - 1))
        name, required, checks = data.draw(st.sampled_from(field_table(Record)))
        if name == "case_id":
            return  # the case id names the record in every refusal; its own rule is the next test's
        document["records"][index][name] = value
        where = f"{HERE}: records[{index}] ({document['records'][index]['case_id']}): field {name!r}"
    outcome = _outcome(lambda: check_run(HERE, document))
    if not checks.value(value):
        assert outcome.startswith(f"refused: {where} must be {checks.words}, got ")
        assert outcome.endswith("re-run the suite (pytest perf_tests) or restore the file")
    else:
        assert outcome == "accepted" or outcome.startswith(f"refused: {HERE}: ")


def test_each_fault_is_refused_naming_the_record_and_the_fix() -> None:
    """One file per kind of fault, each refused by the reader with the record it is in and the field at fault."""
    base = _document(SEEDS[0])
    case = base["records"][3]["case_id"]
    at = f"{HERE}: records[3] ({case}): "
    faults = [
        (lambda d: d["records"][3].update(status="SORT_OF"), f"{at}status 'SORT_OF' is not one of"),
        (lambda d: d["records"][3].update(value=None, status="PASS"), f"{at}status PASS but no figure"),
        (lambda d: d["records"][3].update(reason="because"), f"{at}reason 'because' is not one of"),
        (lambda d: d["records"][3].update(samples=True), f"{at}field 'samples' must be a whole number or null"),
        (lambda d: d["records"][3].update(value=float("inf")), f"{at}field 'value' must be a finite number"),
        (lambda d: d["records"][3].update(sm_clock_mhz=[1980]), f"{at}field 'sm_clock_mhz' must be two whole"),
        (lambda d: d["records"][3].update(params={"m": [1]}), f"{at}field 'params' must be a mapping of names"),
        (lambda d: d["records"][3].update(kernels=[{"name": ""}]), f"{at}a kernel needs a non-empty name"),
        (lambda d: d["records"][3].update(kernels=[{"name": "k", "grid": [1, -1, 1]}]), f"{at}kernel 'k': grid"),
        (lambda d: d["records"][3].update(kernels=[{"name": "k", "code": "XYZ"}]), f"{at}kernel 'k': code must be"),
        (lambda d: d["records"][3].pop("case_id"), f"{HERE}: records[3]: lacks the field(s) case_id"),
        (lambda d: d["records"].append(copy.deepcopy(d["records"][0])),
         f"{HERE}: case {base['records'][0]['case_id']!r} on GPU 0 is recorded twice, at records[0] and records[12]"),
        (lambda d: d["run"].update(sm_clock_max_mhz="fast"), f"{HERE}: run: field 'sm_clock_max_mhz' must be"),
        (lambda d: d.update(schema=2), f"{HERE}: results schema 2 is not 1"),
    ]
    for fault, words in faults:
        document = copy.deepcopy(base)
        fault(document)
        assert _outcome(lambda: check_run(HERE, document)).startswith(f"refused: {words}")


def test_the_written_text_is_read_by_its_canonical_form() -> None:
    """The suite writes orjson's indented form (with a closing newline); NaN and infinities are null, NumPy
    figures plain numbers."""
    rng = np.random.default_rng()
    run = RunInfo(gpu_name="G", gpu_slug="g", compute_capability="9.0", driver="1", cuda_runtime="13", cublas="13",
                  cupy="14", sm_clock_max_mhz=1980, mem_clock_mhz=3201, flush_modes=("cold",), started="2027-01-01",
                  extra={"noise": np.float64(rng.normal()), "array": rng.normal(size=3), "µ": "±"})
    record = Record(case_id="c", nodeid="c", family="gemm", params={"m": "8"}, metric="TFLOPS",
                    value=float(rng.uniform(1, 100)), unit="TFLOPS", status="PASS", note="", median_s=math.nan,
                    precision="fp32")
    text = results_format.results_json_text(run, [record])
    data = orjson.loads(text)
    assert text.encode() == orjson.dumps(data, option=reading.INDENTED) + b"\n"
    assert data["records"][0]["median_s"] is None and data["records"][0]["value"] == record.value
    assert data["run"]["extra"]["noise"] == float(run.extra["noise"]) and len(data["run"]["extra"]["array"]) == 3
    loaded_run, loaded = results_format.parse_run(HERE, text)
    assert loaded[0].value == record.value and loaded_run.extra["µ"] == "±"


def test_an_integer_beyond_64_bits_is_still_written_and_its_reader_names_it() -> None:
    """orjson writes integers of up to 64 bits; a larger one (no figure or count is) takes Python's writer, so
    the session's files are written whatever its extras hold, and the reader refuses the file, naming why."""
    run = RunInfo(gpu_name="G", gpu_slug="g", compute_capability="9.0", driver="1", cuda_runtime="13", cublas="13",
                  cupy="14", sm_clock_max_mhz=None, mem_clock_mhz=None, flush_modes=(), started="2027-01-01",
                  extra={"big": 2**64 - 1})
    assert results_format.parse_run(HERE, results_format.results_json_text(run, []))[0].extra["big"] == 2**64 - 1
    text = results_format.results_json_text(RunInfo(**{**run.__dict__, "extra": {"big": 2**70}}), [])
    assert json.loads(text)["run"]["extra"]["big"] == 2**70
    with pytest.raises(ResultsError, match="an integer of 22 digits, larger than any figure or count"):
        results_format.parse_run(HERE, text)


def test_documents_compressed_read_back() -> None:
    text = (REPO / "evidence" / "h200" / "results.json").read_text()
    body = history_schema.encode_document(text)
    assert history_schema.decode_document(body) == text and zlib.decompress(body).decode() == text
    assert history_schema.encode_document(text.encode()) == body


def test_a_kernel_median_too_large_for_a_float_is_refused_by_name() -> None:
    """A whole number beyond any float (a document built in memory: the JSON reader refuses such text first) is a
    refusal naming the field, never an OverflowError; a count that large stays a whole number, which the reader
    accepts."""
    data = _document(SEEDS[0])
    data["records"][0]["kernels"] = [{"name": "k", "median_us": 10**400}]
    with pytest.raises(ResultsError, match="median_us must be a non-negative number"):
        check_run(HERE, data)
    data["records"][0]["kernels"] = [{"name": "k", "median_us": 5, "registers": 10**400}]
    assert check_run(HERE, data)[1][0].kernels[0].registers == 10**400
