"""The typed proof of a results file (``store.results_typed.proved``, msgspec's decoder) accepts only what the
results format's strict reader accepts, reads the same values from it, and is the path real files take in a
backfill."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzing import FLEET_RUNS, HUGE, JSON_VALUES, REPO, _byte_mutation, _structural_mutation
from gpuperf.store import history_ingest, history_rows, results_typed
from gpuperf.store.field_checks import field_table
from gpuperf.store.reading import MAX_DEPTH, InputError, load_json_strictly
from gpuperf.store.records import Record, RunInfo
from gpuperf.store.results import check_run

HERE = Path("results.json")
COMMITTED = [REPO / "docs" / "h200" / "results.json", *FLEET_RUNS]
SEEDS = [REPO / "docs" / "h200" / "results.json", *FLEET_RUNS[:3]]
HOSTILE = st.sampled_from([True, False, None, "", 0, -1, 2.5, 2**63 - 1, 2**63, 2**64, 2**64 + 1, 10**30, -2**63,
                           -2**63 - 1, 9.3e18, 1e300, [], [1, 2], [1, 2, 3], [1, -1, 1], ["x"], {}, {"a": 1},
                           {"a": [1]}, {"a": None}, "PASS", "not-a-status", 'a "quoted" text', "a \\ slash",
                           "\u00d7 \u2265", "0123456789ab", "0123456789AB", "0123456789ab\n", "\n", "k\n",
                           " ", "x" * 300])
KERNEL_FIELDS = ["name", "grid", "block", "cluster", "registers", "shared_memory", "median_us", "code", "unknown"]
#: How a document is written: the suite's orjson form, Python's (non-ASCII as \\u escapes), compact.
_WRITERS = [
    lambda value: orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n",
    lambda value: json.dumps(value, indent=2).encode(),
    lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(),
]
WRITERS = st.sampled_from(_WRITERS)


def _strict(raw: bytes) -> Any:
    """The strict reader's document, or ``None`` when it refuses the file."""
    try:
        data = load_json_strictly(HERE, raw.decode("utf-8"), "fix it")
        check_run(HERE, copy.deepcopy(data))
    except (InputError, UnicodeDecodeError):
        return None
    return data


def _proved_alike(raw: bytes) -> bool:
    """The typed proof accepts only what the strict reader accepts, with the same values; whether it did."""
    proved = results_typed.proved(raw)
    if proved is None:
        return False
    strict = _strict(raw)
    assert strict is not None, "the typed proof accepted a file the strict reader refuses"
    run, records = proved
    assert run == strict["run"]
    assert json.loads(msgspec.json.encode(records)) == strict["records"]
    typed, reference = _typed_columns(records), history_rows.records_columns(strict["records"])
    assert [[type(value) for value in column] for column in typed] == \
        [[type(value) for value in column] for column in reference]
    assert typed == reference
    return True


def _typed_columns(records: Any) -> list[list[Any]]:
    keys = results_typed.columns_of(records, history_rows.RECORD_KEYS)
    return history_rows.columns_from_keys(keys, len(records), declared=True)


def _document(seed: Path, records: int = 12) -> dict[str, Any]:
    data = json.loads(seed.read_text())
    data["records"] = data["records"][:records]
    return data


#: The committed JSON files that are results files (not a bisect log or a clock check).
RESULTS_FILES = [path for path in COMMITTED if _strict(path.read_bytes()) is not None]


def test_the_committed_results_files_are_found() -> None:
    assert len(RESULTS_FILES) >= 60 and len(COMMITTED) - len(RESULTS_FILES) <= 2


@pytest.mark.parametrize("path", RESULTS_FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_every_committed_results_file_is_proved_and_read_alike(path: Path) -> None:
    assert _proved_alike(path.read_bytes()), "a results file the suite wrote must take the typed path"


def test_the_backfill_prepares_a_proved_file_as_the_strict_reader_would() -> None:
    """The rows, document and columns a backfill writes are the same by either path."""
    for path in SEEDS:
        raw = path.read_bytes()
        identity = history_rows.run_id(raw)
        strict = history_ingest.prepare(history_rows.parse_results_document(path, raw), str(path), raw, identity)
        typed = history_ingest._prepared_typed(raw, str(path), identity)
        assert typed is not None
        for row in (strict[0], typed[0]):
            row.pop("appended")
        assert typed == strict


@settings(deadline=None)
@given(st.data())
def test_a_mutated_document_is_proved_only_when_the_strict_reader_accepts_it(data: st.DataObject) -> None:
    document = _structural_mutation(_document(data.draw(st.sampled_from(SEEDS))), data.draw)
    _proved_alike(data.draw(WRITERS)(document) if _writable(document) else json.dumps(document).encode())


def _writable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


@settings(deadline=None)
@given(st.data())
def test_a_field_given_a_hostile_value_is_proved_only_when_the_strict_reader_accepts_it(data: st.DataObject) -> None:
    document = _document(data.draw(st.sampled_from(SEEDS)))
    records = document["records"]
    where = data.draw(st.sampled_from(["record", "kernel", "run", "extra"]))
    if where == "run":
        target, names = document["run"], [name for name, _, _ in field_table(RunInfo)] + ["unknown"]
    elif where == "kernel" and any(record.get("kernels") for record in records):
        target = data.draw(st.sampled_from([kernel for record in records for kernel in record.get("kernels") or []]))
        names = KERNEL_FIELDS
    elif where == "extra":
        target, names = data.draw(st.sampled_from(records)).setdefault("extra", {}), ["stop_reason", "new"]
    else:
        target, names = data.draw(st.sampled_from(records)), [name for name, _, _ in field_table(Record)] + ["new"]
    name = data.draw(st.sampled_from(names))
    if data.draw(st.booleans()) and name in target:
        del target[name]
    else:
        target[name] = data.draw(HOSTILE | JSON_VALUES)
    text = json.dumps(document, indent=data.draw(st.sampled_from([None, 2])))
    _proved_alike(text.encode("utf-8", "surrogatepass"))


def _repeated(raw: bytes, needle: bytes, value: bytes) -> bytes:
    """``raw`` with a second ``needle`` key (``"key": ``) of ``value`` written before the first."""
    at = raw.index(needle)
    return raw[:at] + needle + value + b", " + raw[at:]


@pytest.mark.parametrize("needle", [b'"value": ', b'"note": ', b'"params": ', b'"name": ', b'"stop_reason": ',
                                    b'"gpu_slug": ', b'"uuid": ', b'"records": ', b'"schema": ', b'"flush_mode": '])
@pytest.mark.parametrize("value", [b"1", b'"x"', b'"a \\" b"', b'"\\u0022"', b'"\\u0022\\u0022"', b"{}",
                                   b'{"a": "\\"\\""}', b"null", b"[]"])
def test_a_repeated_key_is_never_proved(needle: bytes, value: bytes) -> None:
    raw = json.dumps(_document(SEEDS[0]), indent=2).encode()
    repeated = _repeated(raw, needle, value)
    assert results_typed.proved(repeated) is None
    assert _strict(repeated) is None


def _with_extra(value: Any) -> bytes:
    document = _document(SEEDS[0])
    document["records"][1]["extra"] = {"deep": value}
    return json.dumps(document).encode()


@pytest.mark.parametrize("depth", [MAX_DEPTH - 5, MAX_DEPTH - 4, MAX_DEPTH - 3, MAX_DEPTH])
def test_plain_values_nesting_near_the_limit_are_judged_alike(depth: int) -> None:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    raw = _with_extra(value)
    assert (results_typed.proved(raw) is not None) == (_strict(raw) is not None)
    _proved_alike(raw)


@pytest.mark.parametrize("text", [*HUGE, "18446744073709551616", "18446744073709551617", "-18446744073709551617",
                                  "9223372036854775808", "123456789012345678901234567890", "1e308", "-0.0",
                                  "9007199254740992", "9007199254740993", "12345678901234567", "-12345678901234567",
                                  "1e15", "9.1e15"])
@pytest.mark.parametrize("field", ["value", "samples", "extra", "run"])
def test_numbers_at_and_beyond_the_bounds_are_judged_alike(text: str, field: str) -> None:
    raw = json.dumps(_document(SEEDS[0]), indent=2)
    key = {"value": '"value": ', "samples": '"samples": ', "extra": '"stop_reason": ', "run": '"sm_clock_max_mhz": '}
    at = raw.index(key[field]) + len(key[field])
    end = min(raw.index(",", at), raw.index("\n", at))
    _proved_alike((raw[:at] + text + raw[end:]).encode())


@settings(deadline=None)
@given(st.data())
def test_damaged_bytes_are_proved_only_when_the_strict_reader_accepts_them(data: st.DataObject) -> None:
    raw = orjson.dumps(_document(data.draw(st.sampled_from(SEEDS)), 4), option=orjson.OPT_INDENT_2)
    _proved_alike(_byte_mutation(raw, data.draw))


@pytest.mark.parametrize("raw", [b"\xef\xbb\xbf{}", b"[]", b"{}", b"null", b'{"schema": 1}', b"\xff", b""])
def test_texts_that_are_no_results_file_are_left_to_the_reader(raw: bytes) -> None:
    assert results_typed.proved(raw) is None


def test_a_file_the_proof_declines_is_still_read_by_the_strict_reader_in_a_backfill(tmp_path: Path) -> None:
    """A sound file that the proof leaves to the reader (an unknown key, a parameter that is a number) is
    ingested all the same, and a faulty one refused with the reader's words."""
    document = _document(SEEDS[0], 3)
    document["records"][0]["params"]["m"] = 8
    document["records"][1]["added_later"] = {"x": 1}
    sound = tmp_path / "sound.json"
    sound.write_bytes(json.dumps(document, indent=2).encode())
    assert results_typed.proved(sound.read_bytes()) is None
    path, prepared, why = history_ingest.read_and_prepare(str(sound), frozenset())
    assert prepared is not None and why == ""
    document["records"][2]["status"] = "SORT_OF"
    faulty = tmp_path / "faulty.json"
    faulty.write_bytes(json.dumps(document, indent=2).encode())
    path, prepared, why = history_ingest.read_and_prepare(str(faulty), frozenset())
    assert prepared is None and why is not None and "status 'SORT_OF' is not one of" in why


@pytest.mark.parametrize("writer", range(3), ids=["orjson-indented", "json-ascii", "json-compact"])
@pytest.mark.parametrize("seed", SEEDS, ids=lambda path: path.name)
def test_a_sound_file_is_proved_however_it_was_written(seed: Path, writer: int) -> None:
    assert _proved_alike(_WRITERS[writer](_document(seed)))


@pytest.mark.parametrize("code", ["0123456789ab", "", "0123456789ab\n", "\n", "0123456789ABC", "0123456789a"])
@pytest.mark.parametrize("name", ["k", "", "k\n"])
def test_a_kernels_code_and_name_are_judged_as_kernel_from_dict_judges_them(code: str, name: str) -> None:
    document = _document(SEEDS[0], 3)
    document["records"][1]["kernels"] = [{"name": name, "grid": [1, 1, 1], "block": [32, 1, 1], "code": code}]
    raw = json.dumps(document, indent=2).encode()
    accepted = _strict(raw) is not None
    assert _proved_alike(raw) == accepted
