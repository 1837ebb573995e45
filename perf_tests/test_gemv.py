"""cuBLAS GEMV family: SGEMV with OP_N and OP_T on square, tall and wide shapes.

GEMV is a bandwidth problem (≈ 0.5 FLOP/byte): the metric is GB/s and % of the memory peak. In the
performance cases A is column-major, so ``opN``/``opT`` in an id is the op cuBLAS receives. FP16/BF16
(and TF32) go through GEMM with n = 1. Cases are data: ``perf_tests/cases/gemv.yaml``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from gpuperf.suite.accuracy import assert_gemm_close
from gpuperf.suite.cases import GemvShape, load_cases
from gpuperf.measure.metrics import gemv_work
from gpuperf.vocabulary import Precision

CASES = load_cases("gemv")  # before the importorskip: a broken table fails collection with or without CuPy
cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
# kernels.* import CuPy: after the importorskip
from kernels import cublas
from kernels.blas_args import ShapeError, gemm_path
from kernels.operands import MemoryOrder, nan_operand, random_operand, to_host

pytestmark = [pytest.mark.gemv, pytest.mark.cublas]

CHECKS: dict[str, Any] = CASES["correctness"]
ACCEPTANCE: dict[str, float] = CASES["acceptance"]
ORDERS: dict[str, MemoryOrder] = {"col": "F", "row": "C"}


def _scalar_id(values: list[float]) -> str:
    alpha, beta = values
    return f"alpha{alpha:g}_beta{beta:g}"


def _check_gemv(handle: int, rng: np.random.Generator, shape: GemvShape, dtype: str, op: str, *,
                order: str = "col", pad: int = 0, alpha: float = 1.0, beta: float = 0.0, incx: int = 1) -> None:
    """One ``cublas.gemv`` on fresh operands (y poisoned with NaN when beta = 0), checked against float64."""
    trans = op == "T"
    a = random_operand(rng, (shape.m, shape.n), dtype, order=ORDERS[order], pad=pad)
    x_len, y_len = (shape.m, shape.n) if trans else (shape.n, shape.m)
    x = random_operand(rng, (x_len * incx,), dtype)[::incx]
    if beta == 0.0:
        y, y0 = nan_operand((y_len,), dtype), None
    else:
        y = random_operand(rng, (y_len,), dtype)
        y0 = to_host(y, dtype)[:, None]
    cublas.gemv(handle, a, x, y, dtype=dtype, trans=trans, alpha=alpha, beta=beta)
    a_host = to_host(a, dtype)
    assert_gemm_close(to_host(y, dtype)[:, None], a_host.T if trans else a_host, to_host(x, dtype)[:, None],
                      path=gemm_path(dtype).accuracy, alpha=alpha, beta=beta, c0=y0)


# --- correctness ---------------------------------------------------------------------------------------

@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["all_shapes"]["shapes"], ids=str)
@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("op", ["N", "T"], ids=lambda op: f"op{op}")
@pytest.mark.parametrize("dtype", CHECKS["all_shapes"]["dtypes"])
def test_gemv_correct(dtype: str, op: str, order: str, shape: GemvShape, cublas_handle: int,
                      rng: np.random.Generator) -> None:
    _check_gemv(cublas_handle, rng, shape, dtype, op, order=order)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["other_dtypes"]["shapes"], ids=str)
@pytest.mark.parametrize("op", ["N", "T"], ids=lambda op: f"op{op}")
@pytest.mark.parametrize("dtype", CHECKS["other_dtypes"]["dtypes"])
def test_gemv_dtypes_correct(dtype: str, op: str, shape: GemvShape, cublas_handle: int,
                             rng: np.random.Generator) -> None:
    _check_gemv(cublas_handle, rng, shape, dtype, op)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["padded"]["shapes"], ids=str)
@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("op", ["N", "T"], ids=lambda op: f"op{op}")
@pytest.mark.parametrize("dtype", CHECKS["padded"]["dtypes"])
def test_gemv_padded_ld_correct(dtype: str, op: str, order: str, shape: GemvShape, cublas_handle: int,
                                rng: np.random.Generator) -> None:
    _check_gemv(cublas_handle, rng, shape, dtype, op, order=order, pad=CHECKS["padded"]["pad"])


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["scalars"]["shapes"], ids=str)
@pytest.mark.parametrize("scalars", CHECKS["scalars"]["values"], ids=_scalar_id)
@pytest.mark.parametrize("op", ["N", "T"], ids=lambda op: f"op{op}")
@pytest.mark.parametrize("dtype", CHECKS["scalars"]["dtypes"])
def test_gemv_alpha_beta_correct(dtype: str, op: str, scalars: list[float], shape: GemvShape, cublas_handle: int,
                                 rng: np.random.Generator) -> None:
    alpha, beta = scalars
    _check_gemv(cublas_handle, rng, shape, dtype, op, alpha=alpha, beta=beta)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["strided_x"]["shapes"], ids=str)
@pytest.mark.parametrize("op", ["N", "T"], ids=lambda op: f"op{op}")
def test_gemv_strided_x_correct(op: str, shape: GemvShape, cublas_handle: int, rng: np.random.Generator) -> None:
    _check_gemv(cublas_handle, rng, shape, Precision.FP32, op, incx=2)


@pytest.mark.correctness
def test_gemv_rejects_a_vector_of_the_wrong_length(cublas_handle: int, rng: np.random.Generator) -> None:
    a = random_operand(rng, (7, 5), "fp32", order="F")
    with pytest.raises(ShapeError, match="x needs 5 elements and y 7; got x 7 and y 5"):
        cublas.gemv(cublas_handle, a, random_operand(rng, (7,), "fp32"), nan_operand((5,), "fp32"))


# --- performance ---------------------------------------------------------------------------------------

def _perf_params() -> Iterator[Any]:
    for group in CASES["perf"]:
        for dtype, op, shape in itertools.product(group["dtypes"], group["ops"], group["shapes"]):
            yield pytest.param(dtype, op, shape, id=f"{dtype}-op{op}-{shape}")


def _acceptance_note(pct_of_peak: float | None, matrix_bytes: int, l2_bytes: int) -> str | None:
    """A large GEMV below 60 % of the memory peak has room to optimise: worth a note, not a failure."""
    if pct_of_peak is None or matrix_bytes < ACCEPTANCE["large_l2_factor"] * l2_bytes:
        return None
    if pct_of_peak >= ACCEPTANCE["min_pct_of_peak"]:
        return None
    return (f"room to optimise: {pct_of_peak:.0f} % of the memory peak is below the "
            f"{ACCEPTANCE['min_pct_of_peak']:g} % acceptance line")


@pytest.mark.perf
@pytest.mark.parametrize(("dtype", "op", "shape"), list(_perf_params()))
def test_gemv_perf(dtype: str, op: str, shape: GemvShape, gpu: Any, cublas_handle: int, rng: np.random.Generator,
                   measure: Any, perf: Any) -> None:
    trans = op == "T"
    a = random_operand(rng, (shape.m, shape.n), dtype, order="F")  # column-major: cuBLAS gets `op` as named
    x = random_operand(rng, (shape.m if trans else shape.n,), dtype)
    y = nan_operand((shape.n if trans else shape.m,), dtype)

    def run(a: Any, x: Any, y: Any) -> None:
        cublas.gemv(cublas_handle, a, x, y, dtype=dtype, trans=trans)

    record = perf.check(measure(run, gemv_work(shape.m, shape.n, dtype), operands=(a, x, y),
                                label=f"cuBLAS gemv {dtype} op{op}"))
    note = _acceptance_note(record.pct_of_peak, a.nbytes, gpu.info.l2_bytes)
    if note:
        perf.note(note)
