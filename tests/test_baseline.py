"""``gpuperf.store.baseline``: the per-GPU YAML store (SPEC "Baselines", "Bad input and reliability").

Schema errors must name the file and the entry; damage (truncation, duplicate keys, non-UTF-8 bytes, an edited
figure, a unit that does not match its metric) must be refused naming the fix; updates must touch only the given cases, stay ordered and deterministic, seal
the file, survive a crash mid-write with the old file byte-identical, and lose nothing under concurrent
writers.
"""

from __future__ import annotations

import multiprocessing
import re
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuperf.store.baseline import (
    HEADER_KEYS,
    BaselineError,
    BaselineFile,
    Entry,
    baseline_path,
    check_gpu,
    dump_baseline,
    entries_digest,
    load_baseline,
    parse_baseline,
    update_baseline,
    version_changes,
)
from gpuperf.store.baseline_maintenance import seal_baseline

HEADER: dict[str, Any] = {
    "gpu": "NVIDIA H200", "slug": "nvidia-h200", "compute_capability": "9.0", "driver": "580.159.04",
    "cuda_runtime": "13.0", "cublas": "13.1.0", "cupy": "14.0.0", "recorded": "2025-01-01T00:00:00+00:00",
    "clocks": {"sm_max_mhz": 1980, "mem_mhz": 3201},
}
GEMM = "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"
GEMV = "perf_tests/test_gemv.py::test_gemv_perf[fp32-16384x16384-cold]"
RATIO = "perf_tests/test_custom.py::test_tiled[fp32-4096x4096x4096-cold]#vs_cublas"


def entry(value: float, metric: str = "TFLOPS", **kw: Any) -> Entry:
    unit = {"TFLOPS": "TFLOPS", "GB/s": "GB/s", "ratio": "×"}[metric]
    return Entry(metric=metric, value=value, unit=unit, **{"spread": 0.002, "samples": 50, "flush": "cold",
                                                           "method": "cold-flush", **kw})


ENTRIES = {GEMM: entry(51.2345), GEMV: entry(4012.5, "GB/s", spread=0.004), RATIO: entry(0.61, "ratio")}


def write(path: Path, header: dict[str, Any] = HEADER, entries: dict[str, Entry] = ENTRIES) -> Path:
    path.write_text(dump_baseline(header, entries))
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = tmp_path / "nvidia-h200.yaml"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    message = str(info.value)
    assert str(path) in message, f"the message does not name the file: {message}"
    return message


def valid_text(entry_yaml: str, integrity: str = "") -> str:
    return f"schema: 1\nheader:\n  slug: nvidia-h200\n{integrity}entries:\n  {GEMM}:\n{entry_yaml}"


def integrity_line(entries: dict[str, Entry]) -> str:
    """The header line a hand-written test file needs to pass the integrity check."""
    return f"  integrity: {{entries: {len(entries)}, sha256: {entries_digest(entries)}}}\n"


def assert_names_the_fix(message: str, path: Path) -> None:
    """Damage is repaired from version control, then re-recorded (the update refuses a damaged file)."""
    assert f"restore it from version control (git checkout -- {path}), then re-record with " \
           "pytest perf_tests --update-baselines" in message, message


# -- round trip ------------------------------------------------------------------------------------------


def test_dump_parse_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    entries = {**ENTRIES, GEMM: entry(51.2345, tolerance=0.08)}
    write(path, entries=entries)
    loaded = load_baseline(path)
    assert loaded is not None
    assert loaded.path == path
    assert loaded.header == HEADER
    assert loaded.entries == entries


@pytest.mark.long
def test_the_committed_baseline_is_written_back_byte_for_byte_by_either_emitter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``dump_baseline`` takes libyaml's emitter where PyYAML has it, the pure-Python one otherwise: a machine with
    either writes the committed H200 baseline as it is in git, so a re-recording's diff shows only what changed."""
    import gpuperf.store.baseline as store

    committed = Path(__file__).resolve().parents[1] / "baselines" / "nvidia-h200.yaml"
    loaded = load_baseline(committed)
    assert loaded is not None
    for dumper in {store.SAFE_DUMPER, yaml.SafeDumper}:
        monkeypatch.setattr(store, "SAFE_DUMPER", dumper)
        assert dump_baseline(loaded.header, loaded.entries) == committed.read_text(encoding="utf-8"), dumper


def test_values_are_rounded_to_six_significant_digits() -> None:
    text = dump_baseline(HEADER, {GEMM: entry(51.234567891, spread=0.00123456789)})
    data = yaml.safe_load(text)
    assert data["entries"][GEMM]["value"] == 51.2346
    assert data["entries"][GEMM]["spread"] == 0.00123457


def test_load_missing_file_is_none(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "nvidia-b200.yaml") is None


def test_baseline_path_is_the_slug() -> None:
    assert baseline_path(Path("baselines"), "nvidia-h200") == Path("baselines/nvidia-h200.yaml")


def test_entry_defaults_for_optional_fields(tmp_path: Path) -> None:
    integrity = integrity_line({GEMM: Entry(metric="GB/s", value=10.0, unit="GB/s")})
    loaded = parse_baseline(tmp_path / "x.yaml", valid_text("    metric: GB/s\n    value: 10\n    unit: GB/s\n",
                                                            integrity))
    e = loaded.entries[GEMM]
    assert (e.value, e.spread, e.samples, e.flush, e.method, e.tolerance) == (10.0, 0.0, 0, "", "", None)
    assert isinstance(e.value, float)


def test_empty_entries_is_allowed(tmp_path: Path) -> None:
    text = f"schema: 1\nheader:\n  slug: nvidia-h200\n{integrity_line({})}entries:\n"
    loaded = parse_baseline(tmp_path / "x.yaml", text)
    assert loaded.entries == {}


# -- schema errors name the file and the entry -----------------------------------------------------------


def test_unknown_entry_key_names_file_entry_and_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, valid_text("    metric: TFLOPS\n    value: 50\n    unit: TFLOPS\n"
                                            "    tolerence: 0.05\n"))
    assert GEMM in message
    assert "tolerence" in message
    assert "unknown key" in message


def test_missing_value_names_file_entry_and_the_fix(tmp_path: Path) -> None:
    message = error_of(tmp_path, valid_text("    metric: TFLOPS\n    unit: TFLOPS\n"))
    assert GEMM in message
    assert "value" in message
    assert "--update-baselines" in message


@pytest.mark.parametrize("tolerance", ["-0.05", "1.5", "'5%'", "true"])
def test_bad_tolerance_names_file_and_entry(tmp_path: Path, tolerance: str) -> None:
    message = error_of(tmp_path, valid_text(f"    metric: TFLOPS\n    value: 50\n    unit: TFLOPS\n"
                                            f"    tolerance: {tolerance}\n"))
    assert GEMM in message
    assert "tolerance" in message


@pytest.mark.parametrize("value", ["fast", "'50'", "-3", "0", ".nan", ".inf", "true", "[50]"])
def test_non_numeric_or_non_positive_value_names_file_and_entry(tmp_path: Path, value: str) -> None:
    message = error_of(tmp_path, valid_text(f"    metric: TFLOPS\n    value: {value}\n    unit: TFLOPS\n"))
    assert GEMM in message
    assert "value must be a positive finite number" in message


@pytest.mark.parametrize(("key", "bad"), [("spread", "-0.1"), ("spread", "wide"), ("samples", "-1"),
                                          ("samples", "2.5")])
def test_bad_optional_numbers_name_file_and_entry(tmp_path: Path, key: str, bad: str) -> None:
    message = error_of(tmp_path, valid_text(f"    metric: TFLOPS\n    value: 50\n    unit: TFLOPS\n"
                                            f"    {key}: {bad}\n"))
    assert GEMM in message
    assert key in message


def test_entry_that_is_not_a_mapping_names_file_and_entry(tmp_path: Path) -> None:
    message = error_of(tmp_path, f"schema: 1\nheader: {{slug: nvidia-h200}}\nentries:\n  {GEMM}: 51.2\n")
    assert GEMM in message
    assert "mapping" in message


def test_error_names_the_broken_entry_among_good_ones(tmp_path: Path) -> None:
    text = dump_baseline(HEADER, ENTRIES).replace("value: 4012.5", "value: lots")
    message = error_of(tmp_path, text)
    assert GEMV in message
    assert GEMM not in message


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "", "42\n"])
def test_bad_top_level_names_the_file(tmp_path: Path, text: str) -> None:
    message = error_of(tmp_path, text)
    assert "expected a mapping" in message


def test_unknown_top_level_key_names_it(tmp_path: Path) -> None:
    message = error_of(tmp_path, "schema: 1\nheader: {slug: nvidia-h200}\nentries: {}\nentires: {}\n")
    assert "entires" in message


@pytest.mark.parametrize("schema", ["", "schema: 2\n", "schema: '1'\n"])
def test_wrong_or_missing_schema_names_the_file(tmp_path: Path, schema: str) -> None:
    message = error_of(tmp_path, f"{schema}header: {{slug: nvidia-h200}}\nentries: {{}}\n")
    assert "schema" in message
    assert "--update-baselines" in message


@pytest.mark.parametrize("header", ["header: [1, 2]\n", "header: {gpu: NVIDIA H200}\n", ""])
def test_header_without_slug_names_the_file(tmp_path: Path, header: str) -> None:
    message = error_of(tmp_path, f"schema: 1\n{header}entries: {{}}\n")
    assert "slug" in message


def test_unknown_header_key_names_it(tmp_path: Path) -> None:
    message = error_of(tmp_path, "schema: 1\nheader: {slug: nvidia-h200, drvier: '580'}\nentries: {}\n")
    assert "drvier" in message


def test_entries_not_a_mapping_names_the_file(tmp_path: Path) -> None:
    message = error_of(tmp_path, "schema: 1\nheader: {slug: nvidia-h200}\nentries: [a, b]\n")
    assert "entries" in message


@pytest.mark.parametrize("text", [
    "schema: 1\nheader: {slug: nvidia-h200\nentries: {}\n",              # unclosed flow mapping
    "schema: 1\nentries:\n  a:\n\tmetric: TFLOPS\n",                     # a tab in the indentation
    "schema: 1\nheader:\n  slug: x\n entries: {}\n",                      # a hand edit broke the indentation
    "<<<<<<< HEAD\nschema: 1\n=======\nschema: 1\n>>>>>>> branch\n",      # merge conflict markers
])
def test_malformed_yaml_names_the_file_and_the_fix(tmp_path: Path, text: str) -> None:
    message = error_of(tmp_path, text)
    assert "not valid YAML" in message
    assert "git checkout" in message
    assert "line" in message  # the parser's position, so the person finds the break


def test_unsafe_yaml_tags_are_refused(tmp_path: Path) -> None:
    message = error_of(tmp_path, "!!python/object/apply:os.system ['echo pwned']\n")
    assert "not valid YAML" in message


def test_baseline_error_is_a_value_error() -> None:
    assert issubclass(BaselineError, ValueError)


# -- damage: truncation, duplicates, encoding, out-of-range figures, units, the integrity field -------------


def sealed_text() -> str:
    return dump_baseline(HEADER, ENTRIES)  # entries sorted by case id: RATIO, GEMM, GEMV


def refusal(tmp_path: Path, text: str | bytes) -> str:
    """The message ``load_baseline`` refuses ``text`` with; it must name the file and the real fix."""
    path = tmp_path / "nvidia-h200.yaml"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    message = str(info.value)
    assert_names_the_fix(message, path)
    return message


def test_a_sealed_file_loads(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    loaded = load_baseline(path)
    assert loaded is not None and loaded.entries == ENTRIES
    assert "integrity" not in loaded.header  # it describes the file, not the recording


def test_truncated_at_an_entry_boundary_is_refused(tmp_path: Path) -> None:
    text = sealed_text()
    cut = text[:text.index(f"  {GEMV}:")]
    yaml.safe_load(cut)  # still valid YAML: only the count tells
    message = refusal(tmp_path, cut)
    assert "2 entries listed, header says 3: the file was truncated or edited" in message


def test_truncated_before_the_entries_is_refused(tmp_path: Path) -> None:
    text = sealed_text()
    message = refusal(tmp_path, text[:text.index("entries:\n")])
    assert "0 entries listed, header says 3" in message


def test_a_duplicate_entry_is_refused_with_its_lines(tmp_path: Path) -> None:
    text = sealed_text()
    gemv = text.index(f"  {GEMV}:")
    doubled = text + text[gemv:].replace("value: 4012.5", "value: 3900.0")
    message = refusal(tmp_path, doubled)
    first = text[:gemv].count("\n") + 1
    second = text.count("\n") + 1
    assert f"entry {GEMV!r} appears twice, at line {second} (first at line {first})" in message
    assert "merge conflict" in message


def test_a_duplicate_field_inside_an_entry_is_refused(tmp_path: Path) -> None:
    text = sealed_text().replace("    value: 51.2345\n", "    value: 51.2345\n    value: 60.0\n")
    message = refusal(tmp_path, text)
    assert f"entry {GEMM!r}: field 'value' appears twice" in message
    line = text.index("    value: 60.0")
    assert f"at line {text[:line].count(chr(10)) + 1}" in message


@pytest.mark.parametrize(("where", "text", "expected"), [
    ("header", "schema: 1\nheader:\n  slug: nvidia-h200\n  slug: nvidia-a100\nentries: {}\n",
     "header: key 'slug' appears twice, at line 4 (first at line 3)"),
    ("nested header", "schema: 1\nheader:\n  slug: x\n  clocks: {sm_max_mhz: 1, sm_max_mhz: 2}\nentries: {}\n",
     "header.clocks: key 'sm_max_mhz' appears twice"),
    ("top level", "schema: 1\nschema: 1\nheader: {slug: x}\nentries: {}\n",
     "top-level key 'schema' appears twice, at line 2 (first at line 1)"),
])
def test_duplicate_keys_are_refused_at_any_level(tmp_path: Path, where: str, text: str, expected: str) -> None:
    assert expected in refusal(tmp_path, text), where


def test_non_utf8_bytes_are_refused_naming_the_offset(tmp_path: Path) -> None:
    data = sealed_text().encode("utf-8")
    offset = data.index(b"NVIDIA H200") + len("NVIDIA ")
    damaged = data[:offset] + b"\xff" + data[offset + 1:]
    message = refusal(tmp_path, damaged)
    assert f"not UTF-8 text: byte 0xff at offset {offset} (line 3)" in message


def test_latin1_text_is_refused_not_misread(tmp_path: Path) -> None:
    """The "×" of a ratio entry re-saved as Latin-1 is one byte 0xd7 that UTF-8 cannot decode."""
    message = refusal(tmp_path, sealed_text().encode("latin-1"))
    assert "byte 0xd7" in message


@pytest.mark.parametrize(("field", "bad", "expected"), [
    ("spread", ".inf", "spread must be a finite fraction in [0, 1)"),
    ("spread", "1.5", "spread must be a finite fraction in [0, 1)"),
    ("spread", ".nan", "spread must be a finite fraction in [0, 1)"),
    ("value", ".nan", "value must be a positive finite number"),
    ("value", "-.inf", "value must be a positive finite number"),
    ("samples", "-3", "samples must be a non-negative integer"),
    ("unit", "TFL", "unit 'TFL' does not match metric 'TFLOPS', whose unit is 'TFLOPS'"),
    ("unit", "GB/s", "unit 'GB/s' does not match metric 'TFLOPS'"),
    ("metric", "TFLOP/s", "unknown metric 'TFLOP/s'; a baseline metric is one of TFLOPS, GB/s, ratio"),
])
def test_out_of_range_or_inconsistent_fields_are_refused(tmp_path: Path, field: str, bad: str,
                                                          expected: str) -> None:
    text = sealed_text()
    start = text.index(f"  {GEMM}:")
    line = text.index(f"    {field}: ", start)
    damaged = text[:line] + f"    {field}: {bad}" + text[text.index("\n", line):]
    message = refusal(tmp_path, damaged)
    assert f"entry {GEMM!r}: {expected}" in message


def test_a_ratio_entry_needs_the_times_sign() -> None:
    text = sealed_text().replace("unit: ×", "unit: ratio")
    with pytest.raises(BaselineError, match="unit 'ratio' does not match metric 'ratio', whose unit is '×'"):
        parse_baseline(Path("nvidia-h200.yaml"), text)


def test_a_file_without_the_integrity_field_is_refused(tmp_path: Path) -> None:
    legacy = "".join(line for line in sealed_text().splitlines(keepends=True)
                     if not line.startswith(("  integrity:", "    entries:", "    sha256:")))
    path = tmp_path / "nvidia-h200.yaml"
    message = refusal(tmp_path, legacy)
    assert "the header has no integrity field" in message
    assert f"python -m gpuperf baseline seal {path}" in message


def test_an_edited_value_breaks_the_digest(tmp_path: Path) -> None:
    message = refusal(tmp_path, sealed_text().replace("value: 51.2345", "value: 55.0"))
    assert "a measured figure was edited" in message
    assert "3 entries" not in message  # the count still matches: the digest tells


@pytest.mark.parametrize(("old", "new"), [("flush: cold", "flush: hot"), ("samples: 50", "samples: 51"),
                                          (f"  {GEMM}:", f"  {GEMM.replace('4096x', '4000x', 1)}:")])
def test_any_measured_field_or_case_id_edit_breaks_the_digest(tmp_path: Path, old: str, new: str) -> None:
    assert "a measured figure was edited" in refusal(tmp_path, sealed_text().replace(old, new, 1))


def test_a_hand_set_tolerance_does_not_break_the_digest(tmp_path: Path) -> None:
    """``tolerance`` is the one field a person may set: adding, changing or removing it keeps the seal."""
    text = sealed_text()
    gemm = text.index(f"  {GEMM}:")
    added = text[:gemm] + text[gemm:].replace("    method: cold-flush\n",
                                               "    method: cold-flush\n    tolerance: 0.08\n", 1)
    loaded = parse_baseline(tmp_path / "x.yaml", added)
    assert loaded.entries[GEMM].tolerance == 0.08
    with_tolerance = dump_baseline(HEADER, {**ENTRIES, GEMM: entry(51.2345, tolerance=0.08)})
    edited = with_tolerance.replace("tolerance: 0.08", "tolerance: 0.12")
    assert parse_baseline(tmp_path / "x.yaml", edited).entries[GEMM].tolerance == 0.12
    removed = with_tolerance.replace("    tolerance: 0.08\n", "")
    assert parse_baseline(tmp_path / "x.yaml", removed).entries == ENTRIES


@pytest.mark.parametrize("integrity", ["integrity: 3", "integrity: {entries: 3}",
                                       "integrity: {entries: -1, sha256: " + "0" * 64 + "}",
                                       "integrity: {entries: 3, sha256: abc}",
                                       "integrity: {entries: true, sha256: " + "a" * 64 + "}"])
def test_a_malformed_integrity_field_is_refused(tmp_path: Path, integrity: str) -> None:
    text = f"schema: 1\nheader:\n  slug: nvidia-h200\n  {integrity}\nentries: {{}}\n"
    assert "the header's integrity must be {entries: <count>, sha256: <64 hex digits>}" in refusal(tmp_path, text)


def test_the_digest_covers_measured_fields_only() -> None:
    assert entries_digest(ENTRIES) == entries_digest(dict(reversed(list(ENTRIES.items()))))
    assert entries_digest({GEMM: entry(51.0, tolerance=0.1)}) == entries_digest({GEMM: entry(51.0)})
    assert entries_digest({GEMM: entry(51)}) == entries_digest({GEMM: entry(51.0)})
    assert entries_digest({GEMM: entry(51.0)}) != entries_digest({GEMM: entry(51.0, method="cold-rotate")})
    assert len(entries_digest({})) == 64


# -- another GPU, version changes ------------------------------------------------------------------------


def test_check_gpu_refuses_another_gpu_naming_both(tmp_path: Path) -> None:
    a100 = BaselineFile(path=tmp_path / "nvidia-h200.yaml",
                        header={**HEADER, "gpu": "NVIDIA A100-SXM4-80GB", "slug": "nvidia-a100-sxm4-80gb"})
    with pytest.raises(BaselineError) as info:
        check_gpu(a100, "nvidia-h200")
    message = str(info.value)
    assert "NVIDIA A100-SXM4-80GB" in message
    assert "nvidia-h200" in message
    assert str(a100.path) in message
    assert "baselines/nvidia-h200.yaml" in message


def test_check_gpu_accepts_the_same_gpu(tmp_path: Path) -> None:
    check_gpu(BaselineFile(path=tmp_path / "nvidia-h200.yaml", header=HEADER), "nvidia-h200")


def test_version_changes_names_old_and_new() -> None:
    current = {**HEADER, "driver": "590.10", "cublas": "13.2.0"}
    assert version_changes(HEADER, current) == ["driver 580.159.04 → 590.10", "cublas 13.1.0 → 13.2.0"]
    assert version_changes(HEADER, dict(HEADER)) == []


def test_version_changes_ignores_fields_not_in_both_and_other_keys() -> None:
    assert version_changes({"driver": "1"}, {"cuda_runtime": "2"}) == []
    assert version_changes(HEADER, {**HEADER, "cupy": "99", "recorded": "later"}) == []
    assert version_changes({"cuda_runtime": 13.0}, {"cuda_runtime": "13.0"}) == []  # compared as text


# -- update_baseline -------------------------------------------------------------------------------------


def test_update_creates_the_file_and_directory(tmp_path: Path) -> None:
    path = tmp_path / "baselines" / "nvidia-h200.yaml"
    changes = update_baseline(path, HEADER, {GEMM: entry(50.0)})
    assert [(c.case_id, c.old, c.new.value) for c in changes] == [(GEMM, None, 50.0)]
    loaded = load_baseline(path)
    assert loaded is not None and loaded.entries == {GEMM: entry(50.0)}


def test_update_touches_only_the_given_cases(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    changes = update_baseline(path, HEADER, {GEMV: entry(4100.0, "GB/s", spread=0.003)})
    assert [(c.case_id, c.old, c.new) for c in changes] == [(GEMV, ENTRIES[GEMV], entry(4100.0, "GB/s", spread=0.003))]
    loaded = load_baseline(path)
    assert loaded is not None
    assert loaded.entries[GEMV].value == 4100.0
    assert loaded.entries[GEMM] == ENTRIES[GEMM]
    assert loaded.entries[RATIO] == ENTRIES[RATIO]
    # the other entries' YAML text is unchanged, line for line
    old_text = dump_baseline(HEADER, ENTRIES)
    new_text = path.read_text()
    changed = [line for line in new_text.splitlines() if line not in old_text.splitlines()]
    assert changed == [f"    sha256: {entries_digest(loaded.entries)}", "    value: 4100.0", "    spread: 0.003"]


def test_update_preserves_a_hand_set_per_entry_tolerance(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml", entries={**ENTRIES, GEMM: entry(51.0, tolerance=0.08)})
    changes = update_baseline(path, HEADER, {GEMM: entry(53.0)})
    assert changes[0].new.tolerance == 0.08
    loaded = load_baseline(path)
    assert loaded is not None
    assert loaded.entries[GEMM].value == 53.0
    assert loaded.entries[GEMM].tolerance == 0.08


def test_update_with_an_explicit_tolerance_replaces_the_old_one(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml", entries={GEMM: entry(51.0, tolerance=0.08)})
    update_baseline(path, HEADER, {GEMM: entry(53.0, tolerance=0.02)})
    loaded = load_baseline(path)
    assert loaded is not None and loaded.entries[GEMM].tolerance == 0.02


def test_update_output_is_sorted_and_deterministic(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "nvidia-h200.yaml", tmp_path / "b" / "nvidia-h200.yaml"
    cases = {f"perf_tests/test_x.py::test_x[{name}]": entry(float(i + 1)) for i, name in
             enumerate(["zeta", "alpha", "mu", "beta", "omega"])}
    shuffled_header = {key: HEADER[key] for key in reversed(list(HEADER))}
    update_baseline(one, HEADER, cases)
    update_baseline(two, shuffled_header, dict(reversed(list(cases.items()))))
    assert one.read_bytes() == two.read_bytes()
    data = yaml.safe_load(one.read_text())
    assert list(data) == ["schema", "header", "entries"]
    assert list(data["entries"]) == sorted(cases)
    assert list(data["header"]) == [key for key in HEADER_KEYS if key in HEADER] + ["integrity"]
    # writing the same content again changes no byte
    before = one.read_bytes()
    update_baseline(one, HEADER, {})
    assert one.read_bytes() == before


def test_update_changes_are_reported_in_case_order(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    changes = update_baseline(path, HEADER, {RATIO: entry(0.7, "ratio"), GEMV: entry(4000.0, "GB/s"),
                                             GEMM: entry(52.0)})
    assert [c.case_id for c in changes] == sorted([RATIO, GEMV, GEMM])
    assert {c.case_id: c.old for c in changes} == ENTRIES


def test_update_refuses_another_gpus_file_and_leaves_it(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml", header={**HEADER, "gpu": "NVIDIA A100", "slug": "nvidia-a100"})
    before = path.read_bytes()
    with pytest.raises(BaselineError, match="nvidia-a100"):
        update_baseline(path, HEADER, {GEMM: entry(1.0)})
    assert path.read_bytes() == before


def test_update_writes_a_digest_that_loading_accepts(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    update_baseline(path, HEADER, {GEMM: entry(51.23456789, spread=0.00123456789)})
    update_baseline(path, HEADER, {GEMV: entry(4012.5, "GB/s")})
    data = yaml.safe_load(path.read_text())
    loaded = load_baseline(path)
    assert loaded is not None
    assert data["header"]["integrity"] == {"entries": 2, "sha256": entries_digest(loaded.entries)}


def test_dump_load_dump_is_stable(tmp_path: Path) -> None:
    """Same entries, same text: re-dumping what was loaded changes no byte (rounding included)."""
    path = tmp_path / "nvidia-h200.yaml"
    first = dump_baseline(HEADER, {**ENTRIES, GEMM: entry(51.23456789, spread=0.00123456789, tolerance=0.05)})
    path.write_text(first)
    loaded = load_baseline(path)
    assert loaded is not None
    assert dump_baseline(loaded.header, loaded.entries) == first
    assert dump_baseline({**loaded.header, "integrity": {"entries": 99, "sha256": "0" * 64}}, loaded.entries) == first


def test_update_refuses_a_truncated_file_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    text = sealed_text()
    truncated = text[:text.index(f"  {GEMV}:")]
    path.write_text(truncated)
    with pytest.raises(BaselineError, match="truncated"):
        update_baseline(path, HEADER, {GEMM: entry(1.0)})
    assert path.read_text() == truncated


def test_seal_adds_only_the_integrity_field_once(tmp_path: Path) -> None:
    sealed = sealed_text()
    path = tmp_path / "nvidia-h200.yaml"
    path.write_text("".join(line for line in sealed.splitlines(keepends=True)
                            if not line.startswith(("  integrity:", "    entries:", "    sha256:"))))
    assert seal_baseline(path) is True
    assert path.read_text() == sealed
    assert seal_baseline(path) is False
    assert path.read_text() == sealed


def test_seal_refuses_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    path.write_text(sealed_text().replace("value: 51.2345", "value: 55.0"))
    with pytest.raises(BaselineError, match="a measured figure was edited"):
        seal_baseline(path)
    with pytest.raises(BaselineError, match="no such baseline file"):
        seal_baseline(tmp_path / "nvidia-b200.yaml")


def test_update_refuses_a_broken_file_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    path.write_text("schema: 1\nheader: {slug: nvidia-h200\n")
    with pytest.raises(BaselineError, match="not valid YAML"):
        update_baseline(path, HEADER, {GEMM: entry(1.0)})
    assert path.read_text() == "schema: 1\nheader: {slug: nvidia-h200\n"


# -- interrupted writes -----------------------------------------------------------------------------------


def _leftovers(directory: Path, name: str = "nvidia-h200.yaml") -> list[str]:
    """Everything beside the baseline other than the file itself and its (git-ignored) lock file."""
    return sorted(p.name for p in directory.iterdir() if p.name not in (name, name + ".lock"))


def _crash(*args: Any, **kwargs: Any) -> Any:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("target", ["baseline.yaml.dump", "atomic.os.replace", "atomic.os.fsync"])
def test_crash_mid_update_leaves_the_old_file_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             target: str) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    before = path.read_bytes()
    monkeypatch.setattr(f"gpuperf.store.{target}", _crash)
    with pytest.raises(OSError, match="No space"):
        update_baseline(path, HEADER, {GEMM: entry(1.0), "new-case": entry(2.0)})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_crash_half_way_through_writing_the_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file receives part of the text, then the disk fills: the original is untouched."""
    path = write(tmp_path / "nvidia-h200.yaml")
    before = path.read_bytes()
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> HalfWriter:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def write(self, text: str) -> int:
            self.handle.write(text[: len(text) // 2])
            self.handle.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr("gpuperf.store.atomic.os.fdopen", lambda fd, mode="r": HalfWriter(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="No space"):
        update_baseline(path, HEADER, {GEMM: entry(1.0)})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_interrupt_mid_write_cleans_up_and_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (or a CI job cancelled) during the write: KeyboardInterrupt is not swallowed, nothing is lost."""
    path = write(tmp_path / "nvidia-h200.yaml")
    before = path.read_bytes()

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("gpuperf.store.atomic.os.fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        update_baseline(path, HEADER, {GEMM: entry(1.0)})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_a_new_file_is_not_created_by_a_failed_first_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpuperf.store.atomic.os.replace", _crash)
    with pytest.raises(OSError):
        update_baseline(tmp_path / "nvidia-h200.yaml", HEADER, {GEMM: entry(1.0)})
    monkeypatch.undo()
    assert not (tmp_path / "nvidia-h200.yaml").exists()
    assert _leftovers(tmp_path) == []


def test_update_keeps_the_files_permissions(tmp_path: Path) -> None:
    """The rename must not turn a world-readable baseline into an owner-only one (``mkstemp`` creates 0600):
    CI runners and containers often read the checkout as another user."""
    path = write(tmp_path / "nvidia-h200.yaml")
    os.chmod(path, 0o644)
    update_baseline(path, HEADER, {GEMM: entry(52.0)})
    assert oct(stat.S_IMODE(path.stat().st_mode)) == oct(0o644)
    # a new file gets what open() would give it: 0666 less the umask
    umask = os.umask(0)
    os.umask(umask)
    fresh = tmp_path / "new" / "nvidia-h200.yaml"
    update_baseline(fresh, HEADER, {GEMM: entry(52.0)})
    assert oct(stat.S_IMODE(fresh.stat().st_mode)) == oct(0o666 & ~umask)


# -- concurrent writers ----------------------------------------------------------------------------------


def _writer(directory: str, worker: int, count: int) -> None:
    path = Path(directory) / "nvidia-h200.yaml"
    for i in range(count):
        update_baseline(path, HEADER, {f"perf_tests/test_w.py::test_w[w{worker}-c{i}]": entry(float(worker * 100 + i + 1))})


def _expected(workers: int, count: int) -> dict[str, float]:
    return {f"perf_tests/test_w.py::test_w[w{w}-c{i}]": float(w * 100 + i + 1) for w in range(workers)
            for i in range(count)}


def test_concurrent_threads_both_land_their_entries(tmp_path: Path) -> None:
    write(tmp_path / "nvidia-h200.yaml", entries={GEMM: ENTRIES[GEMM]})
    barrier = threading.Barrier(4)
    errors: list[Exception] = []

    def run(worker: int) -> None:
        try:
            barrier.wait()
            _writer(str(tmp_path), worker, 10)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    loaded = load_baseline(tmp_path / "nvidia-h200.yaml")
    assert loaded is not None
    assert {case: e.value for case, e in loaded.entries.items()} == {GEMM: ENTRIES[GEMM].value, **_expected(4, 10)}
    assert _leftovers(tmp_path) == []


def test_concurrent_processes_both_land_their_entries(tmp_path: Path) -> None:
    """Like pytest-xdist workers of one run (or two CI jobs on one checkout), serialised by the fcntl lock."""
    write(tmp_path / "nvidia-h200.yaml", entries={GEMM: ENTRIES[GEMM]})
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_writer, args=(str(tmp_path), w, 15)) for w in range(2)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=60)
    assert [p.exitcode for p in processes] == [0, 0]
    loaded = load_baseline(tmp_path / "nvidia-h200.yaml")
    assert loaded is not None
    assert {case: e.value for case, e in loaded.entries.items()} == {GEMM: ENTRIES[GEMM].value, **_expected(2, 15)}
    assert _leftovers(tmp_path) == []


# -- what a case is, as data ------------------------------------------------------------------------------


DESCRIBED = Entry(metric="TFLOPS", value=51.2, unit="TFLOPS", spread=0.002, samples=90, flush="cold",
                  method="cold-flush", family="custom", kernel="custom wmma", precision="fp16",
                  shape=(("batch", 1), ("m", 4096), ("n", 4096), ("k", 4096)), flops=1.374e11, bytes=1.0e8)


def test_descriptive_fields_round_trip_and_are_sealed(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    update_baseline(path, HEADER, {GEMM: DESCRIBED, GEMV: entry(4012.5, "GB/s")})
    loaded = load_baseline(path)
    assert loaded is not None and loaded.entries[GEMM] == DESCRIBED
    assert loaded.entries[GEMV].family == "" and loaded.entries[GEMV].shape == ()
    edited = path.read_text().replace("precision: fp16", "precision: fp32")
    assert "a measured figure was edited" in refusal(tmp_path, edited)  # the description is sealed too


@pytest.mark.parametrize(("field", "bad", "message"), [
    ("precision", "fp4", "precision 'fp4' is not one of fp32, tf32, fp16, bf16, fp64, fp8, int8"),
    ("shape", {"m": 0}, "shape must map at most 16 size names"),
    ("shape", {"Rows!": 4}, "shape must map at most 16 size names"),
    ("shape", {f"d{i}": 4 for i in range(17)}, "shape must map at most 16 size names"),
    ("flops", -1.0, "flops must be a positive finite number"),
    ("kernel", 7, "kernel must be text"),
])
def test_bad_descriptive_fields_are_refused(tmp_path: Path, field: str, bad: Any, message: str) -> None:
    data = yaml.safe_load(dump_baseline(HEADER, {GEMM: DESCRIBED}))
    data["entries"][GEMM][field] = bad
    with pytest.raises(BaselineError, match=re.escape(message)):
        parse_baseline(tmp_path / "x.yaml", yaml.safe_dump(data))


def test_an_entry_of_several_runs_round_trips_and_is_sealed(tmp_path: Path) -> None:
    fleet = Entry(metric="TFLOPS", value=11.22, unit="TFLOPS", spread=0.007, samples=100, runs=5,
                  run_spread=0.0476)
    path = tmp_path / "nvidia-h200.yaml"
    update_baseline(path, HEADER, {GEMM: fleet, GEMV: entry(4012.5, "GB/s")})
    loaded = load_baseline(path)
    assert loaded is not None and loaded.entries[GEMM] == fleet and loaded.entries[GEMV].runs == 0
    assert "runs:" in path.read_text() and path.read_text().count("runs:") == 1  # single-run entries say nothing
    edited = path.read_text().replace("run_spread: 0.0476", "run_spread: 0.2")
    assert "a measured figure was edited" in refusal(tmp_path, edited)


@pytest.mark.parametrize("fields", [{"runs": 1, "run_spread": 0.0}, {"runs": 3}, {"runs": 3, "run_spread": 1.5},
                                    {"runs": True, "run_spread": 0.1}])
def test_bad_run_fields_are_refused(tmp_path: Path, fields: dict[str, Any]) -> None:
    data = yaml.safe_load(dump_baseline(HEADER, {GEMM: entry(50.0)}))
    data["entries"][GEMM].update(fields)
    with pytest.raises(BaselineError, match="runs must be an integer above 1 with run_spread a fraction"):
        parse_baseline(tmp_path / "x.yaml", yaml.safe_dump(data))
