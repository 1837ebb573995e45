"""The results reader's quick proof of a sound file (``store.results.check_results``, column by column) accepts
only what the record-by-record reader accepts, refuses with its very message, and is the path real files take."""

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

from fuzzing import FLEET_RUNS, JSON_VALUES, REPO, _structural_mutation
from gpuperf.measure.kernel_records import Kernel, kernels_sound
from gpuperf.history import schema as history_schema
from gpuperf.store import reading
from gpuperf.store import results as results_format
from gpuperf.store.field_checks import columns_sound, field_table
from gpuperf.store.records import Record, RunInfo
from gpuperf.store.results import ResultsError, check_results, check_run

HERE = Path("results.json")
SEEDS = [REPO / "docs" / "h200" / "results.json", *FLEET_RUNS[:3]]
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


def _judged_alike(data: Any) -> None:
    """The quick proof never accepts what the full reader refuses, and refusals carry the full reader's words."""
    slow = _outcome(lambda: check_run(HERE, copy.deepcopy(data)))
    if results_format._sound(data):
        assert slow == "accepted"
    assert _outcome(lambda: check_results(HERE, data)) == slow


@pytest.mark.parametrize("seed", SEEDS, ids=lambda path: path.name)
def test_real_files_are_proved_sound_column_by_column(seed: Path) -> None:
    data = json.loads(seed.read_text())
    assert results_format._sound(data), "a committed results file must take the quick path"
    check_results(seed, data)


@settings(deadline=None)
@given(st.data())
def test_a_mutated_document_is_judged_as_the_full_reader_judges_it(data: st.DataObject) -> None:
    document = _document(data.draw(st.sampled_from(SEEDS)))
    _judged_alike(_structural_mutation(document, data.draw))


@settings(deadline=None)
@given(st.data())
def test_a_field_given_a_hostile_value_is_judged_alike(data: st.DataObject) -> None:
    document = _document(data.draw(st.sampled_from(SEEDS)))
    records = document["records"]
    where = data.draw(st.sampled_from(["record", "kernel", "run", "case"]))
    if where == "run":
        target = document["run"]
        name = data.draw(st.sampled_from([name for name, _, _ in field_table(RunInfo)]))
    elif where == "kernel" and any(record.get("kernels") for record in records):
        target = data.draw(st.sampled_from([kernel for record in records for kernel in record.get("kernels") or []]))
        name = data.draw(st.sampled_from(["name", "grid", "block", "cluster", "registers", "shared_memory",
                                          "median_us", "code"]))
    elif where == "case":
        index = data.draw(st.integers(1, len(records) - 1))
        records[index]["case_id"] = records[0]["case_id"]
        records[index]["gpu_index"] = records[0].get("gpu_index")
        _judged_alike(document)
        return
    else:
        target = data.draw(st.sampled_from(records))
        name = data.draw(st.sampled_from([name for name, _, _ in field_table(Record)]))
    if data.draw(st.booleans()) and name in target:
        del target[name]
    else:
        target[name] = data.draw(HOSTILE | JSON_VALUES)
    _judged_alike(document)


def test_each_fault_the_full_reader_names_is_left_to_it() -> None:
    """One file per kind of fault: the quick proof declines each, and the refusal is the full reader's."""
    base = _document(SEEDS[0])
    faults = [
        lambda d: d["records"][3].update(status="SORT_OF"),
        lambda d: d["records"][3].update(value=None, status="PASS"),
        lambda d: d["records"][3].update(reason="because"),
        lambda d: d["records"][3].update(samples=True),
        lambda d: d["records"][3].update(sm_clock_mhz=[1980]),
        lambda d: d["records"][3].update(params={"m": [1]}),
        lambda d: d["records"][3].update(kernels=[{"name": ""}]),
        lambda d: d["records"][3].update(kernels=[{"name": "k", "grid": [1, -1, 1]}]),
        lambda d: d["records"][3].update(kernels=[{"name": "k", "code": "XYZ"}]),
        lambda d: d["records"][3].pop("case_id"),
        lambda d: d["records"].append(copy.deepcopy(d["records"][0])),
        lambda d: d["run"].update(sm_clock_max_mhz="fast"),
        lambda d: d.update(schema=2),
    ]
    for fault in faults:
        document = copy.deepcopy(base)
        fault(document)
        assert not results_format._sound(document)
        assert _outcome(lambda: check_results(HERE, document)).startswith("refused: ")
        _judged_alike(document)


def test_columns_stand_for_absent_fields_and_decline_a_missing_required_one() -> None:
    rows = [{"case_id": "a"}, {"case_id": "b", "note": "n"}]
    assert columns_sound(Record, rows) is None  # required fields missing
    run = json.loads(SEEDS[0].read_text())["run"]
    columns = columns_sound(RunInfo, [run, {k: v for k, v in run.items() if k != "extra"}])
    assert columns is not None and columns["gpu_slug"] == [run["gpu_slug"]] * 2


KERNEL_VALUES = st.sampled_from([None, True, 0, 1, -1, 7, 2.5, -0.5, float("nan"), float("inf"), "", "k", "0123456789ab",
                                 "0123456789AB", [1, 1, 1], [0, 2, 3], [1, 1], [1, True, 1], [1, -1, 1], [1.0, 1, 1]])
KERNEL_KEYS = st.sampled_from(["name", "grid", "block", "cluster", "registers", "shared_memory", "median_us", "code"])


@settings(deadline=None)
@given(st.lists(st.dictionaries(KERNEL_KEYS, KERNEL_VALUES, max_size=8) | st.just({"name": "k"}), min_size=1,
                max_size=4))
def test_kernels_proved_sound_are_kernels_from_dict_accepts(kernels: list[dict[str, Any]]) -> None:
    if kernels_sound(kernels):
        for kernel in kernels:
            Kernel.from_dict(kernel)


def test_kernels_as_written_are_proved_sound() -> None:
    rng = np.random.default_rng()
    kernels = [Kernel(name=f"k{index}", grid=tuple(int(v) for v in rng.integers(1, 1000, 3)),  # type: ignore[arg-type]
                      block=(128, 1, 1), registers=int(rng.integers(0, 255)), shared_memory=int(rng.integers(0, 1 << 16)),
                      median_us=float(rng.uniform(0.1, 1e4)), code="0123456789ab" if index % 2 else "")
               for index in range(20)]
    assert kernels_sound([json.loads(json.dumps(kernel.to_dict())) for kernel in kernels])


def test_the_written_text_is_read_by_its_canonical_form() -> None:
    """The suite writes orjson's indented form (with a closing newline); NaN and infinities are null, NumPy
    figures plain numbers."""
    rng = np.random.default_rng()
    run = RunInfo(gpu_name="G", gpu_slug="g", compute_capability="9.0", driver="1", cuda_runtime="13", cublas="13",
                  cupy="14", sm_clock_max_mhz=1980, mem_clock_mhz=3201, flush_modes=("cold",), started="2027-01-01",
                  extra={"noise": np.float64(rng.normal()), "array": rng.normal(size=3), "µ": "±"})
    record = Record(case_id="c", nodeid="c", family="gemm", params={"m": "8"}, metric="TFLOPS",
                    value=float(rng.uniform(1, 100)), unit="TFLOPS", status="PASS", note="", median_s=math.nan)
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
    text = (REPO / "docs" / "h200" / "results.json").read_text()
    body = history_schema.encode_document(text)
    assert history_schema.decode_document(body) == text and zlib.decompress(body).decode() == text
    assert history_schema.encode_document(text.encode()) == body


def test_a_kernel_median_too_large_for_a_float_is_refused_by_name() -> None:
    """A whole number beyond any float (a document built in memory: the JSON reader refuses such text first) is a
    refusal naming the field, never an OverflowError, and the quick proof leaves it to the full reader; a count
    that large stays a whole number, which both accept."""
    data = _document(SEEDS[0])
    data["records"][0]["kernels"] = [{"name": "k", "median_us": 10**400}]
    assert not results_format._sound(data)
    with pytest.raises(ResultsError, match="median_us must be a non-negative number"):
        check_run(HERE, data)
    data["records"][0]["kernels"] = [{"name": "k", "median_us": 5, "registers": 10**400}]
    assert results_format._sound(data) and check_run(HERE, data)[1][0].kernels[0].registers == 10**400
