"""Planning cuBLAS calls: layouts, transposes and leading dimensions → column-major call arguments.

cuBLAS is column-major. A row-major ``r×c`` matrix whose rows are ``ld`` elements apart is, to cuBLAS,
the column-major ``c×r`` matrix (its transpose) with leading dimension ``ld``. So a row-major product
``C = op(A)·op(B)`` is issued as the column-major product ``Cᵀ = op(B)ᵀ·op(A)ᵀ``: m and n swap, A and B
swap places, and no element moves. This module generalises the trick to any mix of row-
and column-major operands: the call is planned in C's layout, and an operand stored in the other layout
has its transpose flag flipped (what CuPy's own ``cupy.cublas.gemm`` does).

Leading dimensions are checked *before* cuBLAS sees them: cuBLAS only rejects an ``ld`` below its own
minimum, and a wrong but large-enough ``ld`` makes it read neighbouring memory silently.

Pure Python (no CuPy): every rule is tested on the CPU in ``tests/test_blas_args.py``, the plans
themselves by emulating cuBLAS's column-major GEMM/GEMV on flat NumPy buffers.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

Order = Literal["row", "col"]
Op = Literal["N", "T"]
_T = TypeVar("_T")


class LayoutError(ValueError):
    """An operand's memory layout cannot be handed to cuBLAS as it is."""


class LeadingDimensionError(LayoutError):
    """A leading dimension below the operand's minimum: cuBLAS would read the wrong elements."""


class ShapeError(ValueError):
    """Operand shapes that do not form the requested product."""


@dataclass(frozen=True)
class Operand:
    """One matrix as stored: its shape as the caller sees it, its order and its leading dimension.

    ``ld`` is the distance in elements between consecutive rows (row-major) or columns (column-major);
    ``None`` means tightly packed.
    """

    name: str
    rows: int
    cols: int
    order: Order = "row"
    ld: int | None = None

    def __post_init__(self) -> None:
        if self.order not in ("row", "col"):
            raise LayoutError(f"operand {self.name}: order must be 'row' or 'col', got {self.order!r}")
        if self.rows < 1 or self.cols < 1:
            raise ShapeError(f"operand {self.name} is {self.rows}x{self.cols}: every dimension must be ≥ 1")

    @property
    def inner(self) -> int:
        """Elements along the contiguous direction (a row when row-major, a column when column-major)."""
        return self.cols if self.order == "row" else self.rows

    @property
    def outer(self) -> int:
        return self.rows if self.order == "row" else self.cols

    @property
    def min_ld(self) -> int:
        return max(1, self.inner)

    @property
    def leading(self) -> int:
        return self.min_ld if self.ld is None else self.ld

    @property
    def footprint(self) -> int:
        """Elements from the first to one past the last element of the matrix."""
        return (self.outer - 1) * self.leading + self.inner

    def validate(self) -> None:
        if self.leading >= self.min_ld:
            return
        ld_name = f"ld{self.name.lower()}"
        along = "columns" if self.order == "row" else "rows"
        raise LeadingDimensionError(
            f"{ld_name}={self.leading} is smaller than the minimum {self.min_ld} for operand {self.name} "
            f"({self.rows}x{self.cols}, {self.order}-major, so {ld_name} must be at least its number of {along}): "
            f"cuBLAS would silently read the neighbouring {self.order}s' memory; pass {ld_name} ≥ {self.min_ld} "
            f"(a tight or padded array)"
        )


@dataclass(frozen=True)
class Batched:
    """A stack of equally laid out matrices ``stride`` elements apart; ``batch=None``: one shared matrix."""

    matrix: Operand
    batch: int | None
    stride: int


@dataclass(frozen=True)
class GemmCall:
    """The arguments of one column-major cuBLAS GEMM ``C = op(first)·op(second)`` (cuBLAS's m, n, k).

    ``swapped`` says cuBLAS's first operand is the caller's B (the row-major swap trick).
    """

    transa: Op
    transb: Op
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    swapped: bool


@dataclass(frozen=True)
class StridedCall:
    """A strided-batched GEMM: the per-item call plus the strides of cuBLAS's A, B and C (in elements)."""

    gemm: GemmCall
    stride_a: int
    stride_b: int
    stride_c: int
    batch: int


@dataclass(frozen=True)
class GemvCall:
    """The arguments of one column-major cuBLAS GEMV ``y = op(A)·x`` with A cuBLAS's ``m×n``."""

    trans: Op
    m: int
    n: int
    lda: int


def _op(transposed: bool, flip: bool) -> Op:
    return "T" if transposed != flip else "N"


def plan_gemm(a: Operand, b: Operand, c: Operand, *, trans_a: bool = False, trans_b: bool = False) -> GemmCall:
    """Plan ``C = op(A)·op(B)`` as one column-major cuBLAS call, with no copy and no transpose in memory."""
    for operand in (a, b, c):
        operand.validate()
    m, k = (a.cols, a.rows) if trans_a else (a.rows, a.cols)
    k_b, n = (b.cols, b.rows) if trans_b else (b.rows, b.cols)
    if k != k_b or (c.rows, c.cols) != (m, n):
        raise ShapeError(
            f"op(A) is {m}x{k}, op(B) is {k_b}x{n} and C is {c.rows}x{c.cols}: a product needs op(A) m×k, "
            f"op(B) k×n and C m×n (check the transposes and the output's shape)"
        )
    if c.order == "col":
        return GemmCall(_op(trans_a, a.order == "row"), _op(trans_b, b.order == "row"), m, n, k,
                        a.leading, b.leading, c.leading, swapped=False)
    return GemmCall(_op(trans_b, b.order == "col"), _op(trans_a, a.order == "col"), n, m, k,
                    b.leading, a.leading, c.leading, swapped=True)


def plan_strided(a: Batched, b: Batched, c: Batched, *, trans_a: bool = False,
                 trans_b: bool = False) -> StridedCall:
    """Plan a strided-batched GEMM; a shared (``batch=None``) A or B gets stride 0."""
    if c.batch is None:
        raise ShapeError("C must be 3-D (batch, rows, cols): every item of a batch needs its own output")
    for operand in (a, b):
        if operand.batch is not None and operand.batch != c.batch:
            raise ShapeError(f"{operand.matrix.name} holds {operand.batch} matrices but C holds {c.batch}: "
                             f"pass one per item, or a 2-D {operand.matrix.name} to share it")
    if c.batch > 1 and c.stride < c.matrix.footprint:
        raise LayoutError(
            f"C's matrices overlap (batch stride {c.stride} < the {c.matrix.footprint} elements one matrix "
            f"spans): items would overwrite each other; use a (batch, rows, cols) array of distinct matrices"
        )
    call = plan_gemm(a.matrix, b.matrix, c.matrix, trans_a=trans_a, trans_b=trans_b)
    first, second = (b, a) if call.swapped else (a, b)
    return StridedCall(call, first.stride, second.stride, c.stride, c.batch)


def plan_gemv(a: Operand, *, x_len: int, y_len: int, trans: bool = False) -> GemvCall:
    """Plan ``y = op(A)·x`` as one column-major cuBLAS GEMV (a row-major A is cuBLAS's Aᵀ: the op flips)."""
    a.validate()
    want_x, want_y = (a.rows, a.cols) if trans else (a.cols, a.rows)
    if (x_len, y_len) != (want_x, want_y):
        raise ShapeError(f"op(A) is {want_y}x{want_x} (A {a.rows}x{a.cols}, trans={trans}), so x needs "
                         f"{want_x} elements and y {want_y}; got x {x_len} and y {y_len}")
    if a.order == "col":
        return GemvCall(_op(trans, False), a.rows, a.cols, a.leading)
    return GemvCall(_op(trans, True), a.cols, a.rows, a.leading)


def _elements(name: str, stride_bytes: int, itemsize: int) -> int:
    if stride_bytes % itemsize:
        raise LayoutError(f"operand {name}: a stride of {stride_bytes} bytes is not a whole number of "
                          f"{itemsize}-byte elements; make it contiguous first (cupy.ascontiguousarray)")
    return stride_bytes // itemsize


def describe_matrix(name: str, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> Operand:
    """The ``Operand`` a 2-D array's shape and byte strides describe, or a ``LayoutError`` naming the fix.

    A matrix is row-major when its elements along a row are adjacent, column-major when those down a
    column are. A single column is read as column-major (so a vector is the ``n = 1`` operand of
    GEMV-as-GEMM), a single row as row-major. The leading dimension is the other stride, unchecked here:
    ``plan_*`` rejects one below the minimum.
    """
    if len(shape) != 2:
        raise ShapeError(f"operand {name} must be 2-D, got shape {tuple(shape)}")
    rows, cols = shape
    row_step, col_step = (_elements(name, s, itemsize) for s in strides)
    if row_step < 0 or col_step < 0:
        raise LayoutError(f"operand {name} ({rows}x{cols}) has negative element strides ({row_step}, {col_step}): "
                          f"a reversed view is not a BLAS matrix; pass cupy.ascontiguousarray({name.lower()})")
    if cols == 1 and (rows == 1 or row_step == 1):
        return Operand(name, rows, cols, "col", max(1, rows))
    if col_step == 1 or cols == 1:
        return Operand(name, rows, cols, "row", row_step if rows > 1 else max(1, cols))
    if row_step == 1 or rows == 1:
        return Operand(name, rows, cols, "col", col_step if cols > 1 else max(1, rows))
    raise LayoutError(
        f"operand {name} ({rows}x{cols}) has element strides ({row_step}, {col_step}): neither its rows nor its "
        f"columns are contiguous, so it is not a BLAS matrix; pass cupy.ascontiguousarray({name.lower()})"
    )


def describe_batch(name: str, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> Batched:
    """A 3-D ``(batch, rows, cols)`` array, or a 2-D array meaning one matrix shared by every item."""
    if len(shape) == 2:
        return Batched(describe_matrix(name, shape, strides, itemsize), None, 0)
    if len(shape) != 3:
        raise ShapeError(f"operand {name} must be 3-D (batch, rows, cols) or 2-D (shared), got shape {tuple(shape)}")
    matrix = describe_matrix(name, shape[1:], strides[1:], itemsize)
    stride = _elements(name, strides[0], itemsize) if shape[0] > 1 else 0
    if stride < 0:
        raise LayoutError(f"operand {name}: a negative batch stride ({stride}) cannot be passed to cuBLAS; "
                          f"pass cupy.ascontiguousarray({name.lower()})")
    return Batched(matrix, shape[0], stride)


def vector_increment(name: str, length: int, stride_bytes: int, itemsize: int) -> int:
    """cuBLAS's ``incx``/``incy`` for a 1-D array (elements between consecutive entries, positive)."""
    if length == 1:
        return 1
    step = _elements(name, stride_bytes, itemsize)
    if step < 1:
        raise LayoutError(f"vector {name} has element stride {step}: only positive strides are supported; "
                          f"pass cupy.ascontiguousarray({name})")
    return step


def split_batch(batch: int, parts: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges cutting ``batch`` items into at most ``parts`` near-equal, non-empty pieces."""
    if batch < 1 or parts < 1:
        raise ValueError(f"batch and parts must be positive, got batch={batch}, parts={parts}")
    parts = min(parts, batch)
    return list(itertools.pairwise(batch * i // parts for i in range(parts + 1)))


# --- data types and compute types ---------------------------------------------------------------------

#: Storage kinds → the NumPy/CuPy dtype of the arrays. CuPy has no bfloat16, so BF16 operands are
#: ``uint16`` arrays holding the bfloat16 bit patterns (``kernels.operands.to_bf16`` / ``from_bf16``).
STORAGE_DTYPE: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "uint16", "fp64": "float64"}

#: Storage kinds → the ``cudaDataType`` constant (name in ``cupy.cuda.runtime``).
CUDA_TYPE: dict[str, str] = {"fp32": "CUDA_R_32F", "fp16": "CUDA_R_16F", "bf16": "CUDA_R_16BF",
                             "fp64": "CUDA_R_64F"}


@dataclass(frozen=True)
class ComputeType:
    """A ``cublasComputeType_t`` and the host type of alpha/beta it takes."""

    constant: str
    scalar: str


COMPUTE_TYPES: dict[str, ComputeType] = {
    "32F": ComputeType("CUBLAS_COMPUTE_32F", "float32"),
    "32F_PEDANTIC": ComputeType("CUBLAS_COMPUTE_32F_PEDANTIC", "float32"),
    "32F_FAST_TF32": ComputeType("CUBLAS_COMPUTE_32F_FAST_TF32", "float32"),
    "16F": ComputeType("CUBLAS_COMPUTE_16F", "float16"),
    "64F": ComputeType("CUBLAS_COMPUTE_64F", "float64"),
}

#: (storage, compute type) pairs ``gemmEx`` is called with (A, B and C of one storage kind; cuBLAS's
#: GemmEx table allows them) → the ``gpuperf.suite.accuracy`` rounding model that bounds the result.
EX_ACCURACY: dict[tuple[str, str], str] = {
    ("fp32", "32F"): "fp32",
    ("fp32", "32F_PEDANTIC"): "fp32",
    ("fp32", "32F_FAST_TF32"): "tf32",
    ("fp16", "32F"): "fp16",
    ("fp16", "32F_PEDANTIC"): "fp16",
    ("fp16", "16F"): "fp16-acc16",
    ("bf16", "32F"): "bf16",
    ("bf16", "32F_PEDANTIC"): "bf16",
    ("fp64", "64F"): "fp64",
}


@dataclass(frozen=True)
class GemmPath:
    """How one math path of the suite (``gpuperf.vocabulary.Precision``) calls cuBLAS.

    ``typed`` is the prefix of the classic routines (``s``: sgemm, sgemmStridedBatched, sgemmBatched,
    sgemv) or ``None`` when the path exists only through the ``*Ex`` routines with ``compute``.
    """

    name: str
    storage: str
    compute: str
    typed: str | None

    @property
    def dtype(self) -> str:
        return STORAGE_DTYPE[self.storage]

    @property
    def scalar(self) -> str:
        return COMPUTE_TYPES[self.compute].scalar

    @property
    def accuracy(self) -> str:
        return EX_ACCURACY[(self.storage, self.compute)]


GEMM_PATHS: dict[str, GemmPath] = {
    "fp32": GemmPath("fp32", "fp32", "32F", "s"),  # sgemm: the handle's math mode applies
    "tf32": GemmPath("tf32", "fp32", "32F_FAST_TF32", None),
    "fp16": GemmPath("fp16", "fp16", "32F", None),
    "bf16": GemmPath("bf16", "bf16", "32F", None),
    "fp64": GemmPath("fp64", "fp64", "64F", "d"),
}

#: ``cublasMath_t`` values from cuBLAS's ``cublas_api.h`` (CUDA 11+), for the names CuPy's binding does not
#: export (CuPy 14.2 has no ``CUBLAS_TF32_TENSOR_OP_MATH``).
CUBLAS_MATH_VALUES: dict[str, int] = {
    "CUBLAS_DEFAULT_MATH": 0,
    "CUBLAS_TENSOR_OP_MATH": 1,
    "CUBLAS_PEDANTIC_MATH": 2,
    "CUBLAS_TF32_TENSOR_OP_MATH": 3,
}

#: Handle math modes by name → ``cublasMath_t`` constant names.
MATH_MODES: dict[str, str] = {
    "default": "CUBLAS_DEFAULT_MATH",
    "tf32": "CUBLAS_TF32_TENSOR_OP_MATH",
    "pedantic": "CUBLAS_PEDANTIC_MATH",
}


def _lookup(table: Mapping[str, _T], key: str, what: str) -> _T:
    try:
        return table[key]
    except KeyError:
        raise ValueError(f"unknown {what} {key!r}: use one of {sorted(table)}") from None


def gemm_path(name: str) -> GemmPath:
    return _lookup(GEMM_PATHS, name, "GEMM dtype")


def compute_type(name: str) -> ComputeType:
    return _lookup(COMPUTE_TYPES, name, "compute type")


def ex_accuracy(storage: str, compute: str) -> str:
    """The rounding model of ``gemmEx`` on ``storage`` operands with ``compute``; rejects other pairs."""
    compute_type(compute)
    try:
        return EX_ACCURACY[(storage, compute)]
    except KeyError:
        allowed = sorted(c for s, c in EX_ACCURACY if s == storage)
        raise ValueError(f"gemmEx is not planned for {storage} operands with COMPUTE_{compute}: "
                         f"use one of {allowed} for {storage}") from None


def storage_of(dtype_name: str) -> str:
    """The storage kind of an array dtype (``uint16`` is read as bfloat16 bits, the suite's convention)."""
    for storage, name in STORAGE_DTYPE.items():
        if name == dtype_name:
            return storage
    raise ValueError(f"no cuBLAS storage kind for arrays of dtype {dtype_name}: use one of "
                     f"{sorted(STORAGE_DTYPE.values())} (uint16 holds bfloat16 bits)")


def math_mode_constant(name: str) -> str:
    return _lookup(MATH_MODES, name, "math mode")
