"""``gpuperf.suite.cases``: shape ids (they are what ``-k`` matches), parsing, and case-table loading and checking."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuperf.suite.case_schema import TABLES
from gpuperf.suite.cases import (BatchedShape, CaseTableError, GemmShape, GemvShape, SizedCase, cases_dir, load_cases,
                                  parse_shape)
from gpuperf.vocabulary import Precision

pytest_plugins = ["pytester"]


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
    assert Precision.ALL == ("fp32", "tf32", "fp16", "bf16", "fp64", "fp8", "int8")
    assert set(Precision.ELEMENT_BYTES) == set(Precision.ALL) | set(Precision.FP8_FORMATS)
    assert {Precision.of(name) for name in Precision.FP8_FORMATS} == {"fp8"}
    assert Precision.ELEMENT_BYTES["tf32"] == Precision.ELEMENT_BYTES["fp32"] == 4  # TF32 is stored as FP32


def test_load_cases_turns_shape_strings_into_the_kind_its_schema_names(tmp_path: Path) -> None:
    (tmp_path / "batched.yaml").write_text(
        "correctness: {batches: [1, 3], shapes: [7x5x3], methods: [strided-fp32]}\n"
        "gemv_correctness: {batches: [3], shapes: [33x65], methods: [shared-fp32]}\n"
        "perf: {shapes: [1024x256x256x256], methods: [strided-fp16]}\n"
        "gemv_perf: {shared: [1024x1024x1x1024]}\n"
        "streams: {count: 4, shapes: ['100000X8X8X8']}\n"
        "loop: {default: [], slow: [64x8x8x8]}\n"
        "gemv_perf_slow: {shared: [64x1024x1x1024]}\n"
        "variable_size: {perf: [{name: mixed, groups: [2x8x8x8, 1x16x16x16]}]}\n"
    )
    cases = load_cases("batched", directory=tmp_path)
    assert cases["correctness"] == {"batches": [1, 3], "shapes": [GemmShape(7, 5, 3)], "methods": ["strided-fp32"]}
    assert cases["gemv_correctness"]["shapes"] == [GemvShape(33, 65)]
    assert cases["perf"] == {"shapes": [BatchedShape(1024, 256, 256, 256)], "methods": ["strided-fp16"]}
    assert cases["gemv_perf"] == {"shared": [BatchedShape(1024, 1024, 1, 1024)]}
    assert cases["streams"] == {"count": 4, "shapes": [BatchedShape(100000, 8, 8, 8)]}


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


def test_a_table_of_any_name_loads_its_named_sizes(tmp_path: Path) -> None:
    (tmp_path / "attention.yaml").write_text(
        "sizes: [batch, heads, seq, dim]\nparams: [causal]\n"
        "perf:\n  - {batch: 8, heads: 32, seq: 4096, dim: 128}\n  - {batch: 8, heads: 32, seq: 4096, dim: 128, "
        "causal: true}\ncorrectness: [{batch: 1, heads: 2, seq: 33, dim: 64, causal: false}]\n")
    cases = load_cases("attention", directory=tmp_path)
    assert set(cases) == {"perf", "correctness"}
    first, causal = cases["perf"]
    assert isinstance(first, SizedCase) and str(first) == "batch8-heads32-seq4096-dim128"
    assert str(causal) == "batch8-heads32-seq4096-dim128-causal" and causal["causal"] is True
    assert str(cases["correctness"][0]) == "batch1-heads2-seq33-dim64-no_causal"
    assert first["seq"] == 4096 and dict(first) == {"batch": 8, "heads": 32, "seq": 4096, "dim": 128}
    assert first.sizes == (("batch", 8), ("heads", 32), ("seq", 4096), ("dim", 128))
    with pytest.raises(KeyError, match="this case has batch, heads, seq, dim"):
        first["sequence"]


def test_params_of_plain_text_and_numbers_load(tmp_path: Path) -> None:
    (tmp_path / "attention.yaml").write_text("sizes: [batch]\nparams: [mode, scale]\n"
                                             "perf: [{batch: 2, mode: causal-mask_v2.1+x, scale: -0.5}]\n")
    assert str(load_cases("attention", directory=tmp_path)["perf"][0]) == "batch2-modecausal-mask_v2.1+x-scale-0.5"


def test_a_table_of_any_name_may_list_shape_strings(tmp_path: Path) -> None:
    (tmp_path / "my_gemm.yaml").write_text("perf: [4096x4096x4096, 64x65536]\n")
    assert load_cases("my_gemm", directory=tmp_path)["perf"] == [GemmShape(4096, 4096, 4096), GemvShape(64, 65536)]


@pytest.mark.parametrize(("text", "message"), [
    ("sizes: [batch, seq]\nperf: [{batch: 1, sqe: 4}]",
     "perf[0].sqe: unknown key 'sqe' (did you mean 'seq'?); the keys allowed here are batch, seq"),
    ("sizes: [batch, seq]\nperf: [{batch: 1}]", "perf[0]: lacks the size(s) seq; every case of this table names batch, seq"),
    ("sizes: [batch]\nperf: [{batch: 0}]", "perf[0].batch: 0 is not a size"),
    ("sizes: [batch]\nperf: [{batch: -3}]", "perf[0].batch: -3 is not a size"),
    ("sizes: [batch]\nperf: [{batch: 2.5}]", "perf[0].batch: 2.5 is not a size"),
    ("sizes: [batch]\nperf: [{batch: true}]", "perf[0].batch: True is not a size"),
    ("sizes: [batch]\nperf: [{batch: 281474976710657}]", "is not a size: every size is a whole number from 1 to 2**48"),
    ("sizes: [batch]\nperf: [{batch: 2}, {batch: 4}, {batch: 2}]", "perf[2]: batch2 is already listed at perf[0]"),
    ("sizes: [batch]\nperf: []", "the table(s) perf are empty"),
    ("sizes: [batch]\nperf: {batch: 2}", "perf: expected a list of cases"),
    ("sizes: [Batch]\nperf: [{Batch: 2}]", "sizes[0]: 'Batch' is not a name"),
    ("sizes: [batch, batch]\nperf: [{batch: 2}]", "sizes[1]: 'batch' is listed twice"),
    ("sizes: []\nperf: [{batch: 2}]", "sizes: expected a non-empty list of names"),
    ("sizes: [batch]\nparams: [batch]\nperf: [{batch: 2}]", "params: batch is also a size"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: [1]}]", "perf[0].mode: expected a plain value"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: \"x'; touch pwned; echo '\"}]",
     "perf[0].mode: \"x'; touch pwned; echo '\" is not a value a test id can carry"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: 'a::b'}]", "perf[0].mode: 'a::b' is not a value"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: 'x[1]'}]", "perf[0].mode: 'x[1]' is not a value"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: ''}]", "perf[0].mode: '' is not a value"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: 1}, {batch: 2, mode: '1'}]",
     "perf[1]: test id batch2-mode1 (its values differ from the other's only in type) is already listed at perf[0]"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: 1.5}, {batch: 2, mode: '1.5'}]",
     "perf[1]: test id batch2-mode1.5"),
    ("perf: [{batch: 2}]", "perf[0]: a case of named sizes needs the table to declare them first ('sizes: [batch]')"),
    ("sizes: [batch]", "no list of cases"),
])
def test_a_table_of_any_name_is_checked_as_strictly_as_the_built_in_ones(tables: Path, text: str,
                                                                        message: str) -> None:
    error = _load_error(tables, "attention", text)
    assert error.startswith("perf_tests/cases/attention.yaml: ") and message in error


# --- the real tables ------------------------------------------------------------------------------------

def _by_size_count(value: Any) -> Any:
    """The loading rule before schemas: any ``NxM``-like string became a shape by its number of sizes."""
    if isinstance(value, dict):
        return {key: _by_size_count(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_by_size_count(item) for item in value]
    if isinstance(value, str) and "x" in value and value.replace("x", "").isdigit():
        return parse_shape(value)
    return value


def test_every_table_file_has_a_schema_and_every_schema_a_file() -> None:
    assert set(TABLES) == {path.stem for path in cases_dir().glob("*.yaml")}


@pytest.mark.parametrize("family", sorted(TABLES))
def test_real_tables_load_the_same_shapes_as_before_schemas(family: str) -> None:
    """Same objects (dataclass equality also compares the class), hence the same test ids."""
    raw = yaml.safe_load((cases_dir() / f"{family}.yaml").read_text())
    assert load_cases(family) == _by_size_count(raw)


def test_batched_gemv_cases_are_batched_shapes_with_n_1() -> None:
    cases = load_cases("batched")
    shapes = [shape for table in ("gemv_perf", "gemv_perf_slow") for kind in cases[table].values() for shape in kind]
    assert shapes and all(isinstance(shape, BatchedShape) and shape.n == 1 for shape in shapes)


def test_loading_the_tables_imports_no_cupy() -> None:
    """Case tables are checked on machines without a GPU: the loader must not need CuPy or ``kernels``."""
    code = ("import sys; from gpuperf.suite.cases import load_cases; from gpuperf.suite.case_schema import TABLES; "
            "[load_cases(family) for family in TABLES]; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'kernels')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- malformed tables -----------------------------------------------------------------------------------

FIX_GEMM = "; write a GEMM shape as MxNxK with positive whole sizes, e.g. '4096x4096x4096'"


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ``perf_tests/cases`` under the working directory, so errors name ``perf_tests/cases/<family>.yaml``."""
    monkeypatch.chdir(tmp_path)
    directory = tmp_path / "perf_tests" / "cases"
    directory.mkdir(parents=True)
    return directory


def _load_error(tables: Path, family: str, text: str) -> str:
    (tables / f"{family}.yaml").write_text(text)
    with pytest.raises(CaseTableError) as info:
        load_cases(family, directory=tables)
    return str(info.value)


#: The rest of a gemm table: every table its test module reads must be there.
GEMM_REST = ("paths:\n  fp32: {dtype: fp32, work: fp32}\ncorrectness: {paths: [fp32], shapes: [7x5x3]}\n"
             "slow:\n  - paths: [fp32]\n    trans: [nn]\n    shapes: [8192x8192x8192]\n")


def _gemm_perf(shapes: str) -> str:
    return f"{GEMM_REST}perf:\n  - paths: [fp32]\n    trans: [nn]\n    shapes: [{shapes}]\n"


@pytest.mark.parametrize(("shapes", "expected"), [
    ("512x512x512, 1024x1024x1024, 2048x2048x2048, 7x5",
     "perf[0].shapes[3]: '7x5' is a GEMV shape (MxN) where a GEMM shape MxNxK is expected"),
    ("-1x2x3", "perf[0].shapes[0]: '-1x2x3' has the size -1, but every size must be at least 1"),
    ("1x1x1, 7x5x3.5", "perf[0].shapes[1]: '7x5x3.5' has the size '3.5', which is not a whole number"),
    ("0x4x4", "perf[0].shapes[0]: '0x4x4' has the size 0, but every size must be at least 1"),
    ("7x5x3x", "perf[0].shapes[0]: '7x5x3x' has an empty size (a stray 'x')"),
    ("1x2x3x4x5", "perf[0].shapes[0]: '1x2x3x4x5' has 5 sizes where a GEMM shape MxNxK is expected"),
    ("64x64x64x64", "perf[0].shapes[0]: '64x64x64x64' is a batched shape (BxMxNxK) where a GEMM shape MxNxK is "
                    "expected"),
])
def test_a_bad_gemm_shape_names_table_entry_and_fix(tables: Path, shapes: str, expected: str) -> None:
    assert _load_error(tables, "gemm", _gemm_perf(shapes)) == f"perf_tests/cases/gemm.yaml: {expected}{FIX_GEMM}"


def test_an_unknown_key_names_the_allowed_ones(tables: Path) -> None:
    text = GEMM_REST + "perf:\n  - paths: [fp32]\n    trans: [nn]\n    shapez: [4096x4096x4096]\n"
    assert _load_error(tables, "gemm", text) == (
        "perf_tests/cases/gemm.yaml: perf[0].shapez: unknown key 'shapez' (did you mean 'shapes'?); "
        "the keys allowed here are paths, trans, shapes")


@pytest.mark.parametrize(("family", "text", "expected"), [
    ("batched", "correctness: {batches: [3], shapes: [7x5x3], methds: [strided-fp32]}\n",
     "batched.yaml: correctness.methds: unknown key 'methds' (did you mean 'methods'?); the keys allowed here are "
     "batches, shapes, methods, scalars, transposes"),
    ("gemv", "perff: []\n", "gemv.yaml: perff: unknown key 'perff' (did you mean 'perf'?); the keys allowed here are "
                            "correctness, perf, acceptance"),
    ("gemm", "paths:\n  fp32: {dtpye: fp32}\n", "gemm.yaml: paths.fp32.dtpye: unknown key 'dtpye' (did you mean "
                                                "'dtype'?)"),
    ("custom", "kernels:\n  naive: {planner: naive, colour: blue}\n",
     "custom.yaml: kernels.naive.colour: unknown key 'colour'; the keys allowed here are planner, tile, dtype"),
    ("batched", "gemv_perf: {strided: [256x1024x2x1024]}\n",
     "batched.yaml: gemv_perf.strided[0]: '256x1024x2x1024' has N = 2, but a batched GEMV shape Bx<m>x1x<n> has "
     "N = 1; write a batched GEMV shape as Bx<m>x1x<n> with positive whole sizes, e.g. '256x1024x1x1024'"),
    ("batched", "gemv_perf_slow: {shared: [4096x4096x4096]}\n",
     "batched.yaml: gemv_perf_slow.shared[0]: '4096x4096x4096' is a GEMM shape (MxNxK) where a batched GEMV shape"),
    ("batched", "variable_size:\n  perf:\n    - {name: spread, groups: [4096x32x32x32, 64x256x256]}\n",
     "batched.yaml: variable_size.perf[0].groups[1]: '64x256x256' is a GEMM shape (MxNxK) where a batched shape "
     "BxMxNxK is expected; write a batched shape as BxMxNxK"),
    ("gemv", "perf:\n  - {dtypes: [fp32], ops: [N], shapes: [4096x1024x1]}\n",
     "gemv.yaml: perf[0].shapes[0]: '4096x1024x1' is a GEMM shape (MxNxK) where a GEMV shape MxN is expected; "
     "write a GEMV shape as MxN with positive whole sizes, e.g. '64x65536'"),
    ("custom", "batched_perf: 100000x8x8x8\n",
     "custom.yaml: batched_perf: expected a list (in [ ]) whose items are each a batched shape BxMxNxK, "
     "got '100000x8x8x8'"),
    ("gemm", "correctness:\n  transposes: {trans: nt, shapes: [7x5x3]}\n",
     "gemm.yaml: correctness.transposes.trans: expected a list (in [ ]), got 'nt'"),
    ("gemv", "acceptance: 60\n",
     "gemv.yaml: acceptance: expected a mapping with the keys min_pct_of_peak, large_l2_factor, got 60"),
    ("cublaslt", "perf:\n  - {dtype: fp16, shape: 4096}\n",
     "cublaslt.yaml: perf[0].shape: 4096 is a YAML int, not a shape string; write a GEMM shape as MxNxK"),
])
def test_malformed_tables_name_table_entry_and_fix(tables: Path, family: str, text: str, expected: str) -> None:
    assert _load_error(tables, family, text).startswith(f"perf_tests/cases/{expected}")


# --- end to end: a malformed table is a collection error ------------------------------------------------

TABLE_USER = '''
from pathlib import Path

import pytest

from gpuperf.suite.cases import load_cases
from gpuperf.vocabulary import Precision

CASES = load_cases("gemm", directory=Path(__file__).parent / "cases")


@pytest.mark.parametrize("shape", CASES["perf"][0]["shapes"], ids=str)
def test_shape(shape):
    assert shape.k > 0
'''


def test_a_malformed_table_is_a_collection_error_naming_table_and_entry(pytester: pytest.Pytester) -> None:
    """As in ``perf_tests``: the test module loads its table at import, here in a run where CuPy is unimportable."""
    pytester.makeconftest('import sys\nsys.modules["cupy"] = None\n')
    pytester.makepyfile(test_table=TABLE_USER)
    table = pytester.mkdir("cases") / "gemm.yaml"
    table.write_text(_gemm_perf("4096x4096x4096, 7x5"))

    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_table.py*", "*Interrupted: 1 error during collection*"])
    expected = ("E   gpuperf.suite.cases.CaseTableError: cases/gemm.yaml: perf[0].shapes[1]: '7x5' is a GEMV shape (MxN) "
                f"where a GEMM shape MxNxK is expected{FIX_GEMM}")
    assert expected in result.stdout.lines

    table.write_text(_gemm_perf("4096x4096x4096, 7x5x3"))
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_shape?4096x4096x4096? PASSED*", "*test_shape?7x5x3? PASSED*"])
