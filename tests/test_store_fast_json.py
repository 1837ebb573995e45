"""The JSON reader's fast path (orjson) gives what the strict reader gives, or leaves the text to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuperf.store import reading
from gpuperf.store.reading import MAX_DEPTH, InputError, load_json, load_json_strictly

HERE = Path("x.json")
KEYS = st.sampled_from(["a", "b", "value", '":', 'q":x', "\\", ""]) | st.text(max_size=4)
LEAVES = (st.none() | st.booleans() | st.integers(-10**25, 10**25) | st.floats(allow_nan=False, allow_infinity=False)
          | st.text(max_size=6) | st.sampled_from(['":', '"', "\\\":", "a\": 1"]))
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
                      max_leaves=30)


def _outcome(load: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", load(HERE, text, "fix it")
    except InputError as exc:
        return "refused", str(exc)


def _same(text: str) -> None:
    fast, strict = _outcome(load_json, text), _outcome(load_json_strictly, text)
    assert fast == strict
    if fast[0] == "value":  # equal values of equal types: an integer stays an integer
        assert json.dumps(fast[1], sort_keys=True) == json.dumps(strict[1], sort_keys=True)


@settings(deadline=None)
@given(VALUES, st.sampled_from([None, 2]), st.sampled_from([(",", ":"), (", ", ": "), (",", " : ")]))
def test_the_fast_path_reads_what_the_strict_reader_reads(value: Any, indent: int | None,
                                                          separators: tuple[str, str]) -> None:
    _same(json.dumps(value, indent=indent, separators=separators))


@settings(deadline=None)
@given(VALUES, st.integers(0, 40), st.integers(0, 40))
def test_a_repeated_key_is_refused_on_both_paths(value: Any, at: int, length: int) -> None:
    text = json.dumps({"k": value, "other": [value]})
    doubled = text[:-1] + ', "k": 1}'
    _same(doubled)
    assert _outcome(load_json, doubled)[0] == "refused"
    _same(text[:at] + text[at + length:])  # cut texts: damaged, or still valid


@pytest.mark.parametrize("text", [
    '{"a": 1, "a": 2}', '{"a" : 1, "a": 2}', '{"a":{"b":1,"b":1}}', '[12345678901234567890123]',
    '[-9223372036854775809]', '[18446744073709551615]', '[18446744073709551616]', '[1e400]', '[NaN]',
    '[9.3e18]', '{"s": "\\":", "a": 1, "a": 2}', "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    "[" * MAX_DEPTH + "]" * MAX_DEPTH, '{"a": "\\ud800"}', '{"a": 1} x', '', '"x"',
])
def test_hostile_texts_read_alike(text: str) -> None:
    _same(text)


def test_a_results_file_takes_the_fast_path() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "h200" / "results.json").read_text()
    assert reading._fast_json(text) == load_json_strictly(HERE, text, "fix it")
    assert reading._fast_json(text.encode()) == load_json_strictly(HERE, text, "fix it")


def _indented(value: Any) -> str | None:
    """orjson's indented form, as gpuperf writes results files; ``None`` for an integer beyond 64 bits."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n"
    except TypeError:
        return None


@settings(deadline=None)
@given(VALUES)
def test_orjsons_indented_form_reads_as_the_strict_reader_reads_it(value: Any) -> None:
    text = _indented(value)
    if text is not None:
        _same(text)
        assert _outcome(load_json, text.encode()) == _outcome(load_json, text)


@settings(deadline=None)
@given(VALUES)
def test_a_repeated_key_in_the_indented_form_is_refused_on_both_paths(value: Any) -> None:
    text = _indented({"k": value, "other": [value]})
    if text is not None:
        doubled = text.rstrip()[:-1].rstrip() + ',\n  "k": 1\n}\n'
        _same(doubled)
        assert _outcome(load_json, doubled)[0] == "refused"
        assert _outcome(load_json, doubled.encode())[0] == "refused"


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1])
def test_deep_nesting_in_the_indented_form_reads_alike(depth: int) -> None:
    value: Any = [1]
    for _ in range(depth - 1):
        value = {"a": value}
    text = _indented(value)
    assert text is not None
    _same(text)
    assert _outcome(load_json, text)[0] == ("value" if depth <= MAX_DEPTH else "refused")


@pytest.mark.parametrize("raw", [
    b'\xef\xbb\xbf{"a": 1}', b'{"a": "\xff"}', b'{"a": "\xed\xa0\x80"}', '{"a": "µ"}'.encode(),
    b'\xff\xfe{\x00}\x00', b'{"a": 1, "a": 2}', b'{"a": 1}', b"",
])
def test_bytes_read_as_their_text_reads(raw: bytes) -> None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        assert _outcome(load_json, raw)[0] == "refused" and "not UTF-8" in _outcome(load_json, raw)[1] \
            or "UTF-16" in _outcome(load_json, raw)[1]
        return
    if text.startswith("\ufeff"):
        assert "byte-order mark" in _outcome(load_json, raw)[1]
        return
    assert _outcome(load_json, raw) == _outcome(load_json, text)
