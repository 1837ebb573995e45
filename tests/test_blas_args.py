"""CPU tests of ``kernels.blas_args``: the swap trick, transposes, leading dimensions and batch strides.

The plans are checked by running them: ``_Cublas`` emulates cuBLAS's column-major GEMM/GEMV on flat
NumPy buffers (reading exactly the elements cuBLAS would, and enforcing its documented ``ld`` minimums),
and the result is compared with ``op(A)·op(B)`` computed directly. Padding holds NaN, so an element read
from the wrong place shows up.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpuperf.suite.accuracy import ROUNDING
from gpuperf.vocabulary import Precision
from kernels import blas_args
from kernels.blas_args import (
    Batched,
    GemmCall,
    LayoutError,
    LeadingDimensionError,
    Operand,
    Order,
    ShapeError,
    describe_batch,
    describe_matrix,
    plan_gemm,
    plan_gemv,
    plan_strided,
)

SHAPES = [(7, 5, 3), (1, 1, 1), (1, 9, 1), (4, 1, 6), (33, 17, 65)]
TRANSPOSES = ["nn", "nt", "tn", "tt"]
ORDERS = ["".join(o) for o in itertools.product("rc", repeat=3)]  # orders of A, B, C
ORDER: dict[str, Order] = {"r": "row", "c": "col"}


def _store(matrix: np.ndarray, order: Order, pad: int) -> tuple[np.ndarray, int]:
    """``matrix`` in a flat buffer laid out in ``order`` with leading dimension ``inner + pad`` (NaN pad)."""
    stored = matrix if order == "row" else matrix.T
    ld = stored.shape[1] + pad
    buffer = np.full((stored.shape[0], ld), np.nan)
    buffer[:, : stored.shape[1]] = stored
    return buffer.ravel(), ld


def _load(flat: np.ndarray, rows: int, cols: int, order: Order, ld: int) -> np.ndarray:
    stored = flat.reshape(-1, ld)[:, : (cols if order == "row" else rows)]
    return stored if order == "row" else stored.T


def _col_major(flat: np.ndarray, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """The column-major ``rows×cols`` matrix cuBLAS reads at ``offset`` (IndexError past the buffer)."""
    index = offset + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    matrix: np.ndarray = flat[index]
    return matrix


class _Cublas:
    """cuBLAS's column-major semantics on flat float64 buffers, with its argument checks."""

    @staticmethod
    def gemm(call: GemmCall, first: np.ndarray, second: np.ndarray, out: np.ndarray, alpha: float, beta: float,
             offsets: tuple[int, int, int] = (0, 0, 0)) -> None:
        a_rows, a_cols = (call.m, call.k) if call.transa == "N" else (call.k, call.m)
        b_rows, b_cols = (call.k, call.n) if call.transb == "N" else (call.n, call.k)
        assert call.lda >= max(1, a_rows), f"cuBLAS would reject lda={call.lda} < {a_rows}"
        assert call.ldb >= max(1, b_rows), f"cuBLAS would reject ldb={call.ldb} < {b_rows}"
        assert call.ldc >= max(1, call.m), f"cuBLAS would reject ldc={call.ldc} < {call.m}"
        a = _col_major(first, offsets[0], a_rows, a_cols, call.lda)
        b = _col_major(second, offsets[1], b_rows, b_cols, call.ldb)
        op_a = a if call.transa == "N" else a.T
        op_b = b if call.transb == "N" else b.T
        index = offsets[2] + np.arange(call.m)[:, None] + np.arange(call.n)[None, :] * call.ldc
        previous = out[index] if beta != 0.0 else 0.0
        out[index] = alpha * (op_a @ op_b) + beta * previous

    @staticmethod
    def gemv(trans: str, m: int, n: int, a: np.ndarray, lda: int, x: np.ndarray, incx: int, y: np.ndarray,
             incy: int) -> None:
        assert lda >= max(1, m), f"cuBLAS would reject lda={lda} < {m}"
        matrix = _col_major(a, 0, m, n, lda)
        op = matrix if trans == "N" else matrix.T
        y[:: incy][: op.shape[0]] = op @ x[::incx][: op.shape[1]]


def _operands(rng: np.random.Generator, m: int, n: int, k: int, trans: str) -> tuple[np.ndarray, np.ndarray]:
    a = rng.uniform(-1, 1, (k, m) if trans[0] == "t" else (m, k))
    b = rng.uniform(-1, 1, (n, k) if trans[1] == "t" else (k, n))
    return a, b


def _logical(a: np.ndarray, b: np.ndarray, trans: str) -> tuple[np.ndarray, np.ndarray]:
    return (a.T if trans[0] == "t" else a), (b.T if trans[1] == "t" else b)


# --- GEMM plans, run -----------------------------------------------------------------------------------

@pytest.mark.parametrize("trans", TRANSPOSES)
@pytest.mark.parametrize("orders", ORDERS)
def test_gemm_plan_computes_the_product(orders: str, trans: str) -> None:
    rng = np.random.default_rng(0)
    for (m, n, k), pad, (alpha, beta) in itertools.product(SHAPES, (0, 3), ((1.0, 0.0), (-1.5, 0.5))):
        a, b = _operands(rng, m, n, k, trans)
        c0 = rng.uniform(-1, 1, (m, n))
        order_a, order_b, order_c = (ORDER[o] for o in orders)
        a_flat, lda = _store(a, order_a, pad)
        b_flat, ldb = _store(b, order_b, pad)
        c_flat, ldc = _store(c0, order_c, pad)
        call = plan_gemm(Operand("A", a.shape[0], a.shape[1], order_a, lda),
                         Operand("B", b.shape[0], b.shape[1], order_b, ldb),
                         Operand("C", m, n, order_c, ldc), trans_a=trans[0] == "t", trans_b=trans[1] == "t")
        first, second = (b_flat, a_flat) if call.swapped else (a_flat, b_flat)
        _Cublas.gemm(call, first, second, c_flat, alpha, beta)

        op_a, op_b = _logical(a, b, trans)
        np.testing.assert_allclose(_load(c_flat, m, n, order_c, ldc), alpha * op_a @ op_b + beta * c0, rtol=1e-12,
                                   atol=1e-12, err_msg=f"{m}x{n}x{k} pad={pad}")
        assert np.isnan(c_flat).sum() == c_flat.size - m * n, "C's padding was written"


def test_row_major_gemm_is_the_seeds_swapped_call() -> None:
    """Seed 001 §3.1: sgemm(N, N, n, m, k, B, ldb=n, A, lda=k, C, ldc=n)."""
    call = plan_gemm(Operand("A", 7, 3), Operand("B", 3, 5), Operand("C", 7, 5))
    assert call == GemmCall("N", "N", 5, 7, 3, lda=5, ldb=3, ldc=5, swapped=True)


def test_column_major_gemm_is_passed_as_it_is() -> None:
    call = plan_gemm(Operand("A", 7, 3, "col"), Operand("B", 3, 5, "col"), Operand("C", 7, 5, "col"),
                     trans_a=False, trans_b=False)
    assert call == GemmCall("N", "N", 7, 5, 3, lda=7, ldb=3, ldc=7, swapped=False)


def test_row_major_transposes_reach_cublas_unflipped() -> None:
    call = plan_gemm(Operand("A", 3, 7), Operand("B", 5, 3), Operand("C", 7, 5), trans_a=True, trans_b=True)
    assert (call.transa, call.transb, call.m, call.n, call.k) == ("T", "T", 5, 7, 3)
    assert (call.lda, call.ldb) == (3, 7)


# --- leading dimensions --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("operand", "name", "minimum"),
    [
        (Operand("A", 7, 5, "row", 4), "A", 5),
        (Operand("B", 7, 5, "col", 6), "B", 7),
        (Operand("C", 7, 5, "row", 1), "C", 5),
    ],
)
def test_short_leading_dimension_names_operand_ld_and_minimum(operand: Operand, name: str, minimum: int) -> None:
    with pytest.raises(LeadingDimensionError) as info:
        operand.validate()
    message = str(info.value)
    assert f"operand {name}" in message
    assert f"ld{name.lower()}={operand.ld}" in message
    assert f"minimum {minimum}" in message


def test_gemm_plan_rejects_short_ld_before_planning() -> None:
    with pytest.raises(LeadingDimensionError, match=r"ldb=2 .* minimum 5 for operand B"):
        plan_gemm(Operand("A", 7, 3), Operand("B", 3, 5, "row", 2), Operand("C", 7, 5))


def test_ld_error_is_a_value_error() -> None:
    assert issubclass(LeadingDimensionError, ValueError)


def test_shape_mismatch_names_the_shapes() -> None:
    with pytest.raises(ShapeError, match=r"op\(A\) is 7x3, op\(B\) is 4x5"):
        plan_gemm(Operand("A", 7, 3), Operand("B", 4, 5), Operand("C", 7, 5))
    with pytest.raises(ShapeError, match="C is 5x7"):
        plan_gemm(Operand("A", 7, 3), Operand("B", 3, 5), Operand("C", 5, 7))


def test_operand_rejects_empty_and_unknown_order() -> None:
    with pytest.raises(ShapeError):
        Operand("A", 0, 3)
    with pytest.raises(LayoutError, match="order"):
        Operand("A", 2, 3, "diagonal")  # type: ignore[arg-type]


# --- reading arrays' strides ---------------------------------------------------------------------------

def _describe(name: str, array: np.ndarray) -> Operand:
    return describe_matrix(name, array.shape, array.strides, array.itemsize)


def test_describe_contiguous_and_padded_arrays() -> None:
    base = np.zeros((7, 8), dtype=np.float32)
    assert _describe("A", base) == Operand("A", 7, 8, "row", 8)
    assert _describe("A", base[:, :5]) == Operand("A", 7, 5, "row", 8)
    fortran = np.zeros((7, 5), dtype=np.float32, order="F")
    assert _describe("A", fortran) == Operand("A", 7, 5, "col", 7)
    padded_f = np.zeros((5, 9), dtype=np.float32)[:, :7].T  # column-major 7x5, ld 9
    assert _describe("A", padded_f) == Operand("A", 7, 5, "col", 9)


def test_describe_vectors() -> None:
    column = np.zeros(6, dtype=np.float32)[:, None]
    assert _describe("B", column) == Operand("B", 6, 1, "col", 6)
    row = np.zeros(6, dtype=np.float32)[None, :]
    assert _describe("B", row) == Operand("B", 1, 6, "row", 6)
    strided_column = np.zeros((6, 4), dtype=np.float32)[:, 2:3]
    assert _describe("B", strided_column) == Operand("B", 6, 1, "row", 4)
    assert _describe("B", np.zeros((1, 1), dtype=np.float32)).min_ld == 1


def test_overlapping_rows_are_a_short_ld() -> None:
    """An ``as_strided`` view whose rows overlap: the case cuBLAS cannot detect."""
    flat = np.zeros(64, dtype=np.float32)
    overlapping = np.lib.stride_tricks.as_strided(flat, shape=(7, 5), strides=(12, 4))
    operand = _describe("A", overlapping)
    with pytest.raises(LeadingDimensionError, match=r"lda=3 is smaller than the minimum 5 for operand A"):
        plan_gemm(operand, Operand("B", 5, 2), Operand("C", 7, 2))


@pytest.mark.parametrize(
    "array",
    [np.zeros((6, 8), dtype=np.float32)[:, ::2], np.zeros((6, 8), dtype=np.float32)[::-1]],
    ids=["every-other-column", "reversed-rows"],
)
def test_describe_rejects_non_blas_layouts(array: np.ndarray) -> None:
    with pytest.raises(LayoutError, match="not a BLAS matrix") as info:
        _describe("A", array)
    assert "cupy.ascontiguousarray(a)" in str(info.value)


def test_describe_rejects_non_matrices() -> None:
    with pytest.raises(ShapeError, match="must be 2-D"):
        describe_matrix("A", (40,), (4,), 4)


def test_describe_rejects_fractional_strides() -> None:
    with pytest.raises(LayoutError, match="not a whole number"):
        describe_matrix("A", (3, 4), (18, 4), 4)


def test_describe_batch() -> None:
    stack = np.zeros((3, 7, 5), dtype=np.float32)
    assert describe_batch("A", stack.shape, stack.strides, 4) == Batched(Operand("A", 7, 5, "row", 5), 3, 35)
    shared = np.zeros((7, 5), dtype=np.float32)
    assert describe_batch("A", shared.shape, shared.strides, 4) == Batched(Operand("A", 7, 5, "row", 5), None, 0)
    broadcast = np.broadcast_to(shared, (4, 7, 5))
    assert describe_batch("A", broadcast.shape, broadcast.strides, 4).stride == 0
    single = stack[:1]
    assert describe_batch("A", single.shape, single.strides, 4).stride == 0
    vectors = np.zeros((3, 6), dtype=np.float32)[:, :, None]
    assert describe_batch("x", vectors.shape, vectors.strides, 4) == Batched(Operand("x", 6, 1, "col", 6), 3, 6)
    with pytest.raises(ShapeError, match="3-D"):
        describe_batch("A", (2, 3, 4, 5), (240, 80, 20, 4), 4)
    with pytest.raises(LayoutError, match="negative batch stride"):
        describe_batch("A", (3, 7, 5), (-140, 20, 4), 4)


# --- strided-batched plans, run ------------------------------------------------------------------------

def _batch_buffer(stack: np.ndarray, order: Order) -> tuple[np.ndarray, Batched]:
    flats, ld = zip(*(_store(matrix, order, 0) for matrix in stack))
    flat = np.concatenate(flats)
    rows, cols = stack.shape[1:]
    return flat, Batched(Operand("X", rows, cols, order, ld[0]), stack.shape[0], flats[0].size)


@pytest.mark.parametrize("shared", ["none", "A", "B"])
@pytest.mark.parametrize("orders", ["rrr", "ccc", "rcr", "crc"])
@pytest.mark.parametrize("trans", TRANSPOSES)
def test_strided_plan_computes_every_item(trans: str, orders: str, shared: str) -> None:
    rng = np.random.default_rng(1)
    batch, (m, n, k) = 3, (7, 5, 3)
    a, b = _operands(rng, m, n, k, trans)
    a_stack = np.stack([a] * batch) if shared == "A" else rng.uniform(-1, 1, (batch, *a.shape))
    b_stack = np.stack([b] * batch) if shared == "B" else rng.uniform(-1, 1, (batch, *b.shape))
    order_a, order_b, order_c = (ORDER[o] for o in orders)
    a_flat, a_desc = _batch_buffer(a_stack[:1] if shared == "A" else a_stack, order_a)
    b_flat, b_desc = _batch_buffer(b_stack[:1] if shared == "B" else b_stack, order_b)
    c_flat, c_desc = _batch_buffer(np.full((batch, m, n), np.nan), order_c)
    if shared == "A":
        a_desc = Batched(a_desc.matrix, None, 0)
    if shared == "B":
        b_desc = Batched(b_desc.matrix, None, 0)
    plan = plan_strided(a_desc, b_desc, c_desc, trans_a=trans[0] == "t", trans_b=trans[1] == "t")
    first, second = (b_flat, a_flat) if plan.gemm.swapped else (a_flat, b_flat)
    for item in range(plan.batch):
        offsets = (item * plan.stride_a, item * plan.stride_b, item * plan.stride_c)
        _Cublas.gemm(plan.gemm, first, second, c_flat, 1.0, 0.0, offsets)
    for item in range(batch):
        op_a, op_b = _logical(a_stack[item], b_stack[item], trans)
        got = _load(c_flat[item * c_desc.stride:(item + 1) * c_desc.stride], m, n, order_c, c_desc.matrix.leading)
        np.testing.assert_allclose(got, op_a @ op_b, rtol=1e-12, atol=1e-12, err_msg=f"item {item}")


def test_strided_plan_puts_strides_in_cublas_order() -> None:
    a = Batched(Operand("A", 7, 3), None, 0)
    b = Batched(Operand("B", 3, 5), 4, 15)
    c = Batched(Operand("C", 7, 5), 4, 35)
    plan = plan_strided(a, b, c)
    assert plan.gemm.swapped
    assert (plan.stride_a, plan.stride_b, plan.stride_c, plan.batch) == (15, 0, 35, 4)


def test_strided_plan_rejects_bad_batches() -> None:
    a, b = Batched(Operand("A", 7, 3), 4, 21), Batched(Operand("B", 3, 5), 4, 15)
    with pytest.raises(ShapeError, match="C must be 3-D"):
        plan_strided(a, b, Batched(Operand("C", 7, 5), None, 0))
    with pytest.raises(ShapeError, match="A holds 3 matrices but C holds 4"):
        plan_strided(Batched(Operand("A", 7, 3), 3, 21), b, Batched(Operand("C", 7, 5), 4, 35))
    with pytest.raises(LayoutError, match="C's matrices overlap"):
        plan_strided(a, b, Batched(Operand("C", 7, 5), 4, 20))


# --- GEMV plans, run -----------------------------------------------------------------------------------

@pytest.mark.parametrize("pad", [0, 2])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("order", ["row", "col"])
@pytest.mark.parametrize("shape", [(7, 5), (1, 1), (1, 6), (6, 1), (33, 65)])
def test_gemv_plan_computes_the_product(shape: tuple[int, int], order: Order, trans: bool, pad: int) -> None:
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, shape)
    x = rng.uniform(-1, 1, shape[0] if trans else shape[1])
    y = np.full(shape[1] if trans else shape[0], np.nan)
    flat, ld = _store(a, order, pad)
    call = plan_gemv(Operand("A", shape[0], shape[1], order, ld), x_len=x.size, y_len=y.size, trans=trans)
    _Cublas.gemv(call.trans, call.m, call.n, flat, call.lda, x, 1, y, 1)
    np.testing.assert_allclose(y, (a.T if trans else a) @ x, rtol=1e-12, atol=1e-12)


def test_column_major_gemv_is_the_seeds_call() -> None:
    """Seed 001 §4.2: sgemv(OP_N, m, n, A, lda=m, x, 1, y, 1) on a column-major m×n A."""
    assert plan_gemv(Operand("A", 64, 65536, "col"), x_len=65536, y_len=64) == blas_args.GemvCall("N", 64, 65536, 64)
    assert plan_gemv(Operand("A", 64, 65536, "row"), x_len=65536, y_len=64) == blas_args.GemvCall("T", 65536, 64,
                                                                                                   65536)


def test_gemv_plan_checks_vector_lengths() -> None:
    with pytest.raises(ShapeError, match="x needs 5 elements and y 7; got x 7 and y 5"):
        plan_gemv(Operand("A", 7, 5), x_len=7, y_len=5)


def test_vector_increment() -> None:
    assert blas_args.vector_increment("x", 5, 8, 4) == 2
    assert blas_args.vector_increment("x", 1, -4, 4) == 1
    with pytest.raises(LayoutError, match="only positive strides"):
        blas_args.vector_increment("x", 5, -4, 4)


@pytest.mark.parametrize(("batch", "parts"), [(1, 4), (3, 4), (4, 4), (1000, 4), (1023, 4), (10, 3)])
def test_split_batch_covers_every_item_once(batch: int, parts: int) -> None:
    pieces = blas_args.split_batch(batch, parts)
    assert len(pieces) == min(batch, parts)
    assert [i for lo, hi in pieces for i in range(lo, hi)] == list(range(batch))
    sizes = [hi - lo for lo, hi in pieces]
    assert max(sizes) - min(sizes) <= 1


# --- tables --------------------------------------------------------------------------------------------

def test_every_suite_dtype_has_a_gemm_path_with_a_rounding_model() -> None:
    # FP8 and INT8 are precisions of the vocabulary (a user's kernels report them) but no cublasGemmEx path here
    assert set(blas_args.GEMM_PATHS) == set(Precision.ALL) - {Precision.FP8, Precision.INT8}
    for name, path in blas_args.GEMM_PATHS.items():
        assert path.name == name
        assert path.accuracy in ROUNDING
        assert path.storage in blas_args.STORAGE_DTYPE and path.storage in blas_args.CUDA_TYPE
        assert path.compute in blas_args.COMPUTE_TYPES


def test_ex_table_uses_known_compute_types_and_rounding_models() -> None:
    for (storage, compute), accuracy in blas_args.EX_ACCURACY.items():
        assert storage in blas_args.STORAGE_DTYPE
        assert compute in blas_args.COMPUTE_TYPES
        assert accuracy in ROUNDING


def test_paths_name_the_seeds_routines() -> None:
    assert blas_args.gemm_path("fp32").typed == "s"
    assert blas_args.gemm_path("fp64").typed == "d"
    tf32 = blas_args.gemm_path("tf32")
    assert (tf32.typed, tf32.dtype, blas_args.COMPUTE_TYPES[tf32.compute].constant) == (
        None, "float32", "CUBLAS_COMPUTE_32F_FAST_TF32")
    assert blas_args.gemm_path("bf16").dtype == "uint16"
    assert blas_args.compute_type("16F").scalar == "float16"


def test_lookups_name_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown GEMM dtype 'int8': use one of \['bf16'"):
        blas_args.gemm_path("int8")
    with pytest.raises(ValueError, match="unknown compute type"):
        blas_args.compute_type("32I")
    with pytest.raises(ValueError, match=r"not planned for bf16 operands with COMPUTE_16F: use one of"):
        blas_args.ex_accuracy("bf16", "16F")
    with pytest.raises(ValueError, match="uint16 holds bfloat16 bits"):
        blas_args.storage_of("int8")
    assert blas_args.storage_of("uint16") == "bf16"
    assert blas_args.math_mode_constant("tf32") == "CUBLAS_TF32_TENSOR_OP_MATH"
    with pytest.raises(ValueError, match="unknown math mode"):
        blas_args.math_mode_constant("fast")
