"""``gpuperf.cases``: shape ids (they are what ``-k`` matches), parsing, and case-table loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuperf.cases import (
    DTYPES,
    ELEMENT_BYTES,
    BatchedShape,
    CaseTableError,
    GemmShape,
    GemvShape,
    load_cases,
    parse_shape,
)


def test_shape_ids() -> None:
    assert str(GemmShape(7, 5, 3)) == "7x5x3"
    assert str(GemvShape(64, 65536)) == "64x65536"
    assert str(BatchedShape(1024, 256, 256, 256)) == "1024x256x256x256"


def test_batched_shape_exposes_its_gemm() -> None:
    assert BatchedShape(8, 33, 17, 65).gemm == GemmShape(33, 17, 65)


def test_shapes_are_frozen_hashable_and_ordered() -> None:
    shape = GemmShape(1, 2, 3)
    with pytest.raises(AttributeError):
        shape.m = 4  # type: ignore[misc]
    assert len({GemmShape(1, 2, 3), GemmShape(1, 2, 3)}) == 1
    assert sorted([GemmShape(2, 1, 1), GemmShape(1, 9, 9)]) == [GemmShape(1, 9, 9), GemmShape(2, 1, 1)]


@pytest.mark.parametrize(("text", "expected"), [
    ("7x5x3", GemmShape(7, 5, 3)),
    ("4096X4096X4096", GemmShape(4096, 4096, 4096)),
    ("64x65536", GemvShape(64, 65536)),
    ("1024x256x256x256", BatchedShape(1024, 256, 256, 256)),
    ([33, 17, 65], GemmShape(33, 17, 65)),
])
def test_parse_shape(text: str | list[int], expected: object) -> None:
    shape = parse_shape(text)
    assert shape == expected
    if isinstance(text, str):
        assert str(shape) == text.lower()


@pytest.mark.parametrize("text", ["7x5xK", "7x5x", "x5", "7", "1x2x3x4x5", "0x5x3", "7x-5x3", "7.5x3"])
def test_parse_shape_errors_name_the_text(text: str) -> None:
    with pytest.raises(CaseTableError) as info:
        parse_shape(text)
    assert repr(text) in str(info.value)


def test_case_table_error_is_a_value_error() -> None:
    assert issubclass(CaseTableError, ValueError)


def test_dtypes_and_element_bytes_agree() -> None:
    assert DTYPES == ("fp32", "tf32", "fp16", "bf16", "fp64")
    assert set(ELEMENT_BYTES) == set(DTYPES)
    assert ELEMENT_BYTES["tf32"] == ELEMENT_BYTES["fp32"] == 4  # TF32 is stored as FP32


def test_load_cases_turns_shape_strings_into_shapes(tmp_path: Path) -> None:
    (tmp_path / "gemm.yaml").write_text(
        "correctness_shapes: [7x5x3, 1x1x1, 127x129x31]\n"
        "perf_shapes:\n  - 4096x4096x4096\n"
        "gemv: {tall: 65536x64, wide: '64x65536'}\n"
        "batched: [1024x256x256x256]\n"
        "dtypes: [fp32, tf32]\n"
        "repeat: 3\n"
    )
    cases = load_cases("gemm", directory=tmp_path)
    assert cases["correctness_shapes"] == [GemmShape(7, 5, 3), GemmShape(1, 1, 1), GemmShape(127, 129, 31)]
    assert cases["perf_shapes"] == [GemmShape(4096, 4096, 4096)]
    assert cases["gemv"] == {"tall": GemvShape(65536, 64), "wide": GemvShape(64, 65536)}
    assert cases["batched"] == [BatchedShape(1024, 256, 256, 256)]
    assert cases["dtypes"] == ["fp32", "tf32"]  # other strings are left alone
    assert cases["repeat"] == 3


def test_load_cases_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CaseTableError, match="not found") as info:
        load_cases("gemvv", directory=tmp_path)
    assert str(tmp_path / "gemvv.yaml") in str(info.value)
    assert "gemvv" in str(info.value)


def test_load_cases_malformed_yaml_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "gemm.yaml"
    path.write_text("perf_shapes: [4096x4096x4096\nother: 1\n")
    with pytest.raises(CaseTableError, match="not valid YAML") as info:
        load_cases("gemm", directory=tmp_path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text", ["- 7x5x3\n- 1x1x1\n", "", "just a string\n"])
def test_load_cases_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    path = tmp_path / "gemm.yaml"
    path.write_text(text)
    with pytest.raises(CaseTableError, match="expected a mapping") as info:
        load_cases("gemm", directory=tmp_path)
    assert str(path) in str(info.value)


def test_load_cases_bad_shape_string_raises(tmp_path: Path) -> None:
    (tmp_path / "gemm.yaml").write_text("perf_shapes: [0x4096x4096]\n")
    with pytest.raises(CaseTableError, match="0x4096x4096"):
        load_cases("gemm", directory=tmp_path)
