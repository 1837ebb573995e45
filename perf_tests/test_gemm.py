"""cuBLAS GEMM family: every GEMM path a cuBLAS user takes, correct on awkward shapes, gated on speed.

Correctness: fresh random operands per case, the output poisoned with NaN before every call (beta = 0
must still give finite results), a float64 reference from the *stored* operands and the per-path bound of
``gpuperf.suite.accuracy``. Performance: shapes and paths are data, ``perf_tests/cases/gemm.yaml``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from gpuperf.suite.accuracy import assert_gemm_close
from gpuperf.suite.cases import GemmShape, load_cases
from gpuperf.measure.metrics import gemm_work

CASES = load_cases("gemm")  # before the importorskip: a broken table fails collection with or without CuPy
cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
# kernels.* import CuPy: after the importorskip
from kernels import cublas
from kernels.blas_args import CUBLAS_MATH_VALUES, LeadingDimensionError
from kernels.operands import MemoryOrder, nan_operand, random_operand, to_host

pytestmark = [pytest.mark.gemm, pytest.mark.cublas]

PATHS: dict[str, dict[str, Any]] = CASES["paths"]
CHECKS: dict[str, Any] = CASES["correctness"]
MEMORY_ORDER: dict[str, MemoryOrder] = {"r": "C", "c": "F"}


def _scalar_id(values: list[float]) -> str:
    alpha, beta = values
    return f"alpha{alpha:g}_beta{beta:g}"


def _math_mode(handle: int, path: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
    mode = path.get("math_mode")
    return cublas.math_mode(handle, mode) if mode else contextlib.nullcontext()


def _operand_shapes(shape: GemmShape, trans: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The stored shapes of A and B: ``op(A)`` is m×k and ``op(B)`` k×n."""
    a = (shape.k, shape.m) if trans[0] == "t" else (shape.m, shape.k)
    b = (shape.n, shape.k) if trans[1] == "t" else (shape.k, shape.n)
    return a, b


def _logical(x: np.ndarray, transposed: bool) -> np.ndarray:
    return x.T if transposed else x


def _check_gemm(handle: int, rng: np.random.Generator, shape: GemmShape, path_id: str, *, trans: str = "nn",
                orders: str = "rrr", pad: int = 0, alpha: float = 1.0, beta: float = 0.0) -> None:
    """One ``cublas.gemm`` on fresh operands, checked elementwise against float64.

    C starts as NaN when beta = 0 (every element must be written) and random otherwise. With ``pad``
    every leading dimension is longer than needed and the padding holds NaN: a read of it poisons the
    result, a write into C's padding is caught by counting C's buffer's numbers.
    """
    path = PATHS[path_id]
    dtype = path["dtype"]
    a_shape, b_shape = _operand_shapes(shape, trans)
    order_a, order_b, order_c = (MEMORY_ORDER[o] for o in orders)
    a = random_operand(rng, a_shape, dtype, order=order_a, pad=pad)
    b = random_operand(rng, b_shape, dtype, order=order_b, pad=pad)
    if beta == 0.0:
        c, c0 = nan_operand((shape.m, shape.n), dtype, order=order_c, pad=pad), None
    else:
        c = random_operand(rng, (shape.m, shape.n), dtype, order=order_c, pad=pad)
        c0 = to_host(c, dtype)
    with _math_mode(handle, path):
        cublas.gemm(handle, a, b, c, dtype=dtype, alpha=alpha, beta=beta, trans_a=trans[0] == "t",
                    trans_b=trans[1] == "t")
    assert_gemm_close(to_host(c, dtype), _logical(to_host(a, dtype), trans[0] == "t"),
                      _logical(to_host(b, dtype), trans[1] == "t"), path=path["work"], alpha=alpha, beta=beta,
                      c0=c0)
    if pad:
        whole = to_host(c.base, dtype)
        numbers = whole.size - int(np.isnan(whole).sum())
        assert numbers == c.size, f"C's buffer holds {numbers} numbers but C has {c.size}: its padding was written"


# --- correctness ---------------------------------------------------------------------------------------

@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["shapes"], ids=str)
@pytest.mark.parametrize("path", CHECKS["paths"])
def test_gemm_correct(path: str, shape: GemmShape, cublas_handle: int, rng: np.random.Generator) -> None:
    _check_gemm(cublas_handle, rng, shape, path, trans="nn")


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["transposes"]["shapes"], ids=str)
@pytest.mark.parametrize("trans", CHECKS["transposes"]["trans"])
@pytest.mark.parametrize("path", CHECKS["paths"])
def test_gemm_transposes_correct(path: str, trans: str, shape: GemmShape, cublas_handle: int,
                                 rng: np.random.Generator) -> None:
    _check_gemm(cublas_handle, rng, shape, path, trans=trans)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["layouts"]["shapes"], ids=str)
@pytest.mark.parametrize("orders", CHECKS["layouts"]["orders"])
@pytest.mark.parametrize("trans", CHECKS["layouts"]["trans"])
@pytest.mark.parametrize("path", ["fp32"])
def test_gemm_layouts_correct(path: str, trans: str, orders: str, shape: GemmShape, cublas_handle: int,
                              rng: np.random.Generator) -> None:
    """Row-major operands go through the swap trick, column-major ones as they are, any mix works."""
    _check_gemm(cublas_handle, rng, shape, path, trans=trans, orders=orders)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["padded"]["shapes"], ids=str)
@pytest.mark.parametrize("orders", CHECKS["padded"]["orders"])
@pytest.mark.parametrize("trans", CHECKS["padded"]["trans"])
@pytest.mark.parametrize("path", CHECKS["paths"])
def test_gemm_padded_ld_correct(path: str, trans: str, orders: str, shape: GemmShape, cublas_handle: int,
                                rng: np.random.Generator) -> None:
    _check_gemm(cublas_handle, rng, shape, path, trans=trans, orders=orders, pad=CHECKS["padded"]["pad"])


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["scalars"]["shapes"], ids=str)
@pytest.mark.parametrize("scalars", CHECKS["scalars"]["values"], ids=_scalar_id)
@pytest.mark.parametrize("path", CHECKS["paths"])
def test_gemm_alpha_beta_correct(path: str, scalars: list[float], shape: GemmShape, cublas_handle: int,
                                 rng: np.random.Generator) -> None:
    alpha, beta = scalars
    _check_gemm(cublas_handle, rng, shape, path, alpha=alpha, beta=beta)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["compute"]["shapes"], ids=str)
@pytest.mark.parametrize("pair", CHECKS["compute"]["pairs"], ids="-".join)
def test_gemm_ex_compute_types_correct(pair: list[str], shape: GemmShape, cublas_handle: int,
                                       rng: np.random.Generator) -> None:
    """cublasGemmEx with each explicit compute type, checked at the bound that compute type implies."""
    storage, compute = pair
    a = random_operand(rng, (shape.m, shape.k), storage)
    b = random_operand(rng, (shape.k, shape.n), storage)
    c = nan_operand((shape.m, shape.n), storage)
    accuracy = cublas.gemm_ex(cublas_handle, a, b, c, compute=compute, alpha=-0.75)
    assert_gemm_close(to_host(c, storage), to_host(a, storage), to_host(b, storage), path=accuracy, alpha=-0.75)


@pytest.mark.correctness
def test_gemm_rejects_a_short_ld_before_cublas(cublas_handle: int, rng: np.random.Generator) -> None:
    """Rows 3 elements apart but 5 long overlap: cuBLAS would run and read the wrong elements."""
    flat = random_operand(rng, (64,), "fp32")
    a = cupy.lib.stride_tricks.as_strided(flat, shape=(7, 5), strides=(3 * flat.itemsize, flat.itemsize))
    b = random_operand(rng, (5, 2), "fp32")
    c = nan_operand((7, 2), "fp32")
    with pytest.raises(LeadingDimensionError, match=r"lda=3 is smaller than the minimum 5 for operand A"):
        cublas.gemm(cublas_handle, a, b, c)
    assert np.isnan(to_host(c, "fp32")).all(), "C was written although the call was rejected"


@pytest.mark.correctness
def test_gemm_rejects_arrays_of_another_dtype(cublas_handle: int, rng: np.random.Generator) -> None:
    a, b = random_operand(rng, (4, 3), "fp16"), random_operand(rng, (3, 2), "fp16")
    with pytest.raises(TypeError, match=r"A is float16, but dtype='tf32' takes float32 arrays"):
        cublas.gemm(cublas_handle, a, b, nan_operand((4, 2), "fp16"), dtype="tf32")


@pytest.mark.correctness
def test_math_mode_is_restored_after_an_error(cublas_handle: int) -> None:
    before = cublas.current_math_mode(cublas_handle)
    with pytest.raises(RuntimeError, match="inside the block"), cublas.math_mode(cublas_handle, "tf32"):
        assert cublas.current_math_mode(cublas_handle) == CUBLAS_MATH_VALUES["CUBLAS_TF32_TENSOR_OP_MATH"]
        raise RuntimeError("inside the block")
    assert cublas.current_math_mode(cublas_handle) == before


# --- performance ---------------------------------------------------------------------------------------

def _perf_params(table: str, slow: bool) -> Iterator[Any]:
    marks = [pytest.mark.slow] if slow else []
    for group in CASES[table]:
        for path, trans, shape in itertools.product(group["paths"], group["trans"], group["shapes"]):
            yield pytest.param(path, trans, shape, id=f"{path}-{trans}-{shape}", marks=marks)


@pytest.mark.perf
@pytest.mark.parametrize(("path_id", "trans", "shape"), [*_perf_params("perf", False), *_perf_params("slow", True)])
def test_gemm_perf(path_id: str, trans: str, shape: GemmShape, cublas_handle: int, rng: np.random.Generator,
                   measure: Any, perf: Any) -> None:
    path = PATHS[path_id]
    dtype = path["dtype"]
    a_shape, b_shape = _operand_shapes(shape, trans)
    a, b = random_operand(rng, a_shape, dtype), random_operand(rng, b_shape, dtype)
    c = nan_operand((shape.m, shape.n), dtype)
    trans_a, trans_b = trans[0] == "t", trans[1] == "t"

    def run(a: Any, b: Any, c: Any) -> None:
        cublas.gemm(cublas_handle, a, b, c, dtype=dtype, trans_a=trans_a, trans_b=trans_b)

    with _math_mode(cublas_handle, path):  # around check too: a suspected regression is re-measured there
        result = measure(run, gemm_work(shape.m, shape.n, shape.k, path["work"]), operands=(a, b, c),
                         label=f"cuBLAS {path_id} {trans}")
        perf.check(result)
