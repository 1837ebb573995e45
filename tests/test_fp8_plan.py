"""CPU tests of the FP8 planning (``kernels.fp8_plan``) and of its accuracy bound (``gpuperf.suite.accuracy``):
recipes cuBLASLt refuses are refused by name, the row-major plan is the "TN" call Hopper needs, every layout rule
names itself, the scale layouts put each factor on its block, and the bound holds for an emulation of the tensor
cores' arithmetic while catching a factor on the wrong block."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuperf.suite.accuracy import FP8_OUTPUT_ROUNDING, assert_fp8_gemm_close, fp8_tolerance
from kernels import blas_args, fp8_plan
from kernels.fp8_plan import Fp8LayoutError, Fp8Recipe, Fp8RecipeError, plan, scale_layout


@pytest.fixture(scope="module")
def ml_dtypes() -> Any:
    """FP8 and BF16 values on the CPU, for the tests of the bound (a 0.6 s import the plan's tests need not pay)."""
    return pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed: pip install -e '.[test]'")


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"a": "fp8_e5m2", "w": "fp8_e5m2"}, "E5M2 × E5M2"),
    ({"scaling": "block", "fast_accum": True}, "block scaling with fast accumulation"),
    ({"scaling": "outer", "out": "fp8_e4m3"}, "outer scaling with an FP8 output"),
    ({"scaling": "block", "out": "fp8_e5m2"}, "block scaling with an FP8 output"),
    ({"a": "int8"}, "activations format 'int8' is not an FP8 format"),
    ({"out": "fp64"}, "output 'fp64' is not one cuBLASLt writes"),
    ({"scaling": "row"}, "scaling 'row'"),
])
def test_recipes_cublaslt_refuses_are_refused_by_name(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(Fp8RecipeError, match=words):
        Fp8Recipe(**kwargs)  # type: ignore[arg-type]


def test_a_recipe_labels_itself() -> None:
    assert Fp8Recipe().label == "e4m3xe4m3-bf16-tensor"
    assert Fp8Recipe(a="fp8_e5m2", out="fp8_e5m2", fast_accum=True).label == "e5m2xe4m3-e5m2-tensor-fast"


def test_a_linear_layer_is_planned_as_cublaslt_tn_call() -> None:
    call = plan(17, 48, 64, Fp8Recipe())
    assert call == blas_args.GemmCall("T", "N", 48, 17, 64, lda=64, ldb=64, ldc=48, swapped=True)


@pytest.mark.parametrize(("a", "w"), [
    (blas_args.Operand("A", 16, 64, "col"), None),
    (None, blas_args.Operand("W", 48, 64, "col")),
])
def test_operands_that_are_not_k_contiguous_are_refused(a: blas_args.Operand | None,
                                                        w: blas_args.Operand | None) -> None:
    with pytest.raises(Fp8LayoutError, match="reads both operands K-contiguous"):
        plan(16, 48, 64, Fp8Recipe(), a=a, w=w)


@pytest.mark.parametrize(("shape", "recipe", "words"), [
    ((64, 64, 65), Fp8Recipe(), r"K = 65 is not a multiple of 16.*pad K with zeros to 80"),
    ((16, 33, 64), Fp8Recipe(), r"bf16 output n \(the output features\) must be a multiple of 8.*pad n to 40"),
    ((16, 40, 64), Fp8Recipe(out="fp8_e4m3"), r"must be a multiple of 16.*pad n to 48"),
    ((16, 18, 64), Fp8Recipe(out="fp32"), r"must be a multiple of 4.*pad n to 20"),
    ((17, 48, 64), Fp8Recipe(scaling="block"), r"block scaling needs m \(the tokens\) to be a multiple of 4.*20"),
])
def test_each_layout_rule_names_itself_and_the_fix(shape: tuple[int, int, int], recipe: Fp8Recipe,
                                                   words: str) -> None:
    with pytest.raises(Fp8LayoutError, match=words):
        plan(*shape, recipe)


def test_a_padded_leading_dimension_must_stay_aligned() -> None:
    with pytest.raises(Fp8LayoutError, match="A's rows are 72 bytes apart"):
        plan(16, 48, 64, Fp8Recipe(), a=blas_args.Operand("A", 16, 64, "row", ld=72))
    assert plan(16, 48, 64, Fp8Recipe(), a=blas_args.Operand("A", 16, 64, "row", ld=80)).ldb == 80


def test_irregular_token_counts_are_planned() -> None:
    for m in (1, 5, 17, 129):
        assert plan(m, 16, 16, Fp8Recipe()).n == m


def _blocks(layout: fp8_plan.ScaleLayout, rows: int, cols: int) -> np.ndarray:
    """Each buffer element's own index as its factor: which factor each element of the operand reads."""
    return layout.expand(np.arange(layout.count, dtype=np.float64), rows, cols)


def test_tensor_and_outer_factors() -> None:
    assert np.all(_blocks(scale_layout("tensor", "a", 5, 32), 5, 32) == 0)
    outer = _blocks(scale_layout("outer", "w", 6, 32), 6, 32)
    assert np.array_equal(outer, np.repeat(np.arange(6.0)[:, None], 32, axis=1))


def test_activation_block_factors_are_outer_contiguous_per_128_of_k() -> None:
    rows, cols = 8, 300  # three K-blocks, the last partial
    factors = _blocks(scale_layout("block", "a", rows, cols), rows, cols)
    for row in range(rows):
        for col in (0, 127, 128, 255, 256, 299):
            assert factors[row, col] == row + (col // 128) * rows


def test_weight_block_factors_are_k_contiguous_padded_to_four() -> None:
    rows, cols = 272, 1040  # three row blocks (the last partial), nine K-blocks → rows of 12 factors
    layout = scale_layout("block", "w", rows, cols)
    assert layout.count == 2 * 12 + 9
    factors = _blocks(layout, rows, cols)
    for row in (0, 127, 128, 271):
        for col in (0, 128, 1039):
            assert factors[row, col] == (row // 128) * 12 + col // 128


def test_factors_of_some_rows_match_the_whole() -> None:
    layout = scale_layout("block", "w", 300, 256)
    flat = np.random.default_rng(1).uniform(0.5, 2, layout.count)
    rows = np.array([0, 129, 299])
    assert np.array_equal(layout.factors(flat, rows, 256), layout.expand(flat, 300, 256)[rows])


def _fp8(rng: np.random.Generator, shape: tuple[int, int], fmt: object) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(fmt).astype(np.float64)  # type: ignore[call-overload]


def _emulated(a: np.ndarray, w: np.ndarray, *, fast: bool) -> np.ndarray:
    """The tensor cores' arithmetic, coarsely: chunks of 32 products summed exactly, then either added in FP32
    (promoted) or into an accumulator kept at 14 significant bits (fast), as the bound assumes."""
    acc = np.zeros((a.shape[0], w.shape[0]), dtype=np.float64)
    for start in range(0, a.shape[1], 32):
        chunk = a[:, start:start + 32] @ w[:, start:start + 32].T
        if fast:
            total = acc + chunk
            exponent = np.floor(np.log2(np.maximum(np.abs(total), 1e-300)))
            acc = np.trunc(total / 2.0 ** (exponent - 13)) * 2.0 ** (exponent - 13)
        else:
            acc = (acc.astype(np.float32) + chunk.astype(np.float32)).astype(np.float64)
    return acc


@pytest.mark.long
@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("out", ["bf16", "fp32", "fp8_e4m3"])
def test_the_bound_holds_for_an_emulation_of_the_hardware(fast: bool, out: str, ml_dtypes: Any) -> None:
    rng = np.random.default_rng(3)
    a, w = _fp8(rng, (9, 1040), ml_dtypes.float8_e4m3fn), _fp8(rng, (24, 1040), ml_dtypes.float8_e4m3fn)
    exact = _emulated(a, w, fast=fast)
    d_scale = 1.0 if out != "fp8_e4m3" else float(np.float32(224 / np.abs(exact).max()))
    kinds = {"bf16": ml_dtypes.bfloat16, "fp32": np.float32, "fp8_e4m3": ml_dtypes.float8_e4m3fn}
    written = (exact * d_scale).astype(kinds[out]).astype(np.float64)
    assert_fp8_gemm_close(written, a, w, out_type=out, fast_accum=fast, d_scale=d_scale,
                          amax=float(np.abs(exact).max()))


def test_a_factor_on_the_wrong_block_is_caught(ml_dtypes: Any) -> None:
    rng = np.random.default_rng(4)
    a, w = _fp8(rng, (16, 256), ml_dtypes.float8_e4m3fn), _fp8(rng, (32, 256), ml_dtypes.float8_e4m3fn)
    right = np.r_[np.full(128, 1.5), np.full(128, 0.75)]
    wrong = right[::-1]
    written = ((a * wrong) @ w.T).astype(ml_dtypes.bfloat16).astype(np.float64)
    with pytest.raises(AssertionError, match="elements outside the bound"):
        assert_fp8_gemm_close(written, a * right, w, out_type="bf16", fast_accum=False)


def test_a_wrong_amax_is_caught(ml_dtypes: Any) -> None:
    rng = np.random.default_rng(5)
    a, w = _fp8(rng, (8, 64), ml_dtypes.float8_e4m3fn), _fp8(rng, (16, 64), ml_dtypes.float8_e4m3fn)
    exact = a @ w.T
    with pytest.raises(AssertionError, match="amax"):
        assert_fp8_gemm_close(exact.astype(np.float32), a, w, out_type="fp32", fast_accum=False,
                              amax=float(np.abs(exact).max()) * 1.05)


def test_the_tolerance_grows_with_k_only_with_fast_accumulation() -> None:
    assert fp8_tolerance(8192, "bf16", False) - fp8_tolerance(128, "bf16", False) < 2 * 8192 * 2.0**-24
    assert fp8_tolerance(8192, "bf16", True) > 10 * fp8_tolerance(128, "bf16", True) / 2
    assert set(FP8_OUTPUT_ROUNDING) == set(fp8_plan.OUTPUT_TYPES)
    with pytest.raises(ValueError, match="no FP8 output 'fp64'"):
        fp8_tolerance(64, "fp64", False)
