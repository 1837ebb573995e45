"""One small, typed API over CuPy's cuBLAS bindings: GEMM, GEMV and their batched forms on CuPy arrays.

Operands are CuPy arrays used in place, never copied: a C-contiguous array (or a row slice of a wider
one: a padded leading dimension) is row-major and goes through the swap trick ``Cᵀ = Bᵀ·Aᵀ``; an
F-ordered one is column-major and is passed as it is (``kernels.blas_args`` plans the call and rejects
bad leading dimensions before cuBLAS sees them). Any mix of the two works.

``dtype`` names the math path (``kernels.blas_args.GEMM_PATHS``): ``fp32`` → sgemm under the handle's
math mode, ``tf32`` → gemmEx with ``COMPUTE_32F_FAST_TF32`` on float32 arrays, ``fp16``/``bf16`` →
gemmEx with ``COMPUTE_32F`` (BF16 arrays are ``uint16`` bit patterns, see ``kernels.operands``),
``fp64`` → dgemm. alpha and beta are host scalars (the handle must be in host pointer mode, cuBLAS's
default).

Streams: every function only enqueues work, never synchronizes. CuPy's bindings bind the handle to
CuPy's *current* stream before each call, so work goes to whatever stream is current (the ``stream``
fixture's, inside a test).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import cupy
import numpy

from kernels import blas_args
from kernels.blas_args import GemmCall, GemmPath


@functools.cache
def _lib() -> Any:
    """CuPy's cuBLAS binding, imported on first use: importing it loads libcublas, which a machine
    without CUDA libraries lacks (the tests skip there instead of failing to collect)."""
    from cupy_backends.cuda.libs import cublas

    return cublas


@functools.cache
def _constant(name: str) -> int:
    """A cuBLAS enum value, or a ``cudaDataType`` from ``cupy.cuda.runtime`` (``CUDA_R_*``)."""
    if name.startswith("CUDA_R_"):
        return int(getattr(cupy.cuda.runtime, name))
    value = getattr(_lib(), name, None)
    if value is None:
        value = blas_args.CUBLAS_MATH_VALUES[name]
    return int(value)


def _op(op: str) -> int:
    return _constant("CUBLAS_OP_N" if op == "N" else "CUBLAS_OP_T")


def _scalars(alpha: float, beta: float, dtype: str) -> tuple[numpy.ndarray, numpy.ndarray]:
    """alpha and beta as host values of the compute type; the caller keeps them alive across the call."""
    return numpy.array(alpha, dtype=dtype), numpy.array(beta, dtype=dtype)


def _check_dtypes(path: GemmPath, **arrays: cupy.ndarray) -> None:
    for name, array in arrays.items():
        _check_dtype(path, name, _layout(name, array))


#: What a call's plan reads of an operand: its dtype, shape and byte strides. Its address is each call's own, so
#: one plan serves every copy of the operands a cold-rotated measurement cycles through.
Layout = tuple[numpy.dtype, tuple[int, ...], tuple[int, ...]]


def _layout(name: str, x: cupy.ndarray) -> Layout:
    if not isinstance(x, cupy.ndarray):
        raise TypeError(f"{name} must be a cupy.ndarray, got {type(x).__name__}")
    return x.dtype, x.shape, x.strides


def _check_dtype(path: GemmPath, name: str, layout: Layout) -> None:
    if layout[0] != path.dtype:
        hint = " (bfloat16 bits: see kernels.operands.to_bf16)" if path.storage == "bf16" else ""
        raise TypeError(f"{name} is {layout[0]}, but dtype={path.name!r} takes {path.dtype} arrays{hint}")


def _described(name: str, layout: Layout) -> blas_args.Operand:
    dtype, shape, strides = layout
    return blas_args.describe_matrix(name, shape, strides, dtype.itemsize)


def _batched(name: str, x: cupy.ndarray) -> blas_args.Batched:
    return blas_args.describe_batch(name, x.shape, x.strides, x.itemsize)


#: A planned call: ``issue(handle, first, second, out)`` with the operands' device addresses.
Issue = Callable[[int, int, int, int], None]


def _gemm_routine(path: GemmPath, call: GemmCall, alpha: numpy.ndarray, beta: numpy.ndarray,
                  compute: str | None = None) -> Issue:
    """One GEMM on device pointers: the path's typed routine, or gemmEx (always when ``compute`` is given), with
    every argument but the three addresses bound once (the issuing call holds ``alpha`` and ``beta``)."""
    opa, opb = _op(call.transa), _op(call.transb)
    m, n, k, lda, ldb, ldc = call.m, call.n, call.k, call.lda, call.ldb, call.ldc
    scalars = (alpha, beta)
    alpha_p, beta_p = alpha.ctypes.data, beta.ctypes.data
    if path.typed and compute is None:
        typed = getattr(_lib(), f"{path.typed}gemm")

        def issue_typed(handle: int, first: int, second: int, out: int, _keep: Any = scalars) -> None:
            typed(handle, opa, opb, m, n, k, alpha_p, first, lda, second, ldb, beta_p, out, ldc)

        return issue_typed
    data_type = _constant(blas_args.CUDA_TYPE[path.storage])
    compute_type = _constant(blas_args.compute_type(compute or path.compute).constant)
    algo = _constant("CUBLAS_GEMM_DEFAULT")
    gemm_ex_routine = _lib().gemmEx

    def issue_ex(handle: int, first: int, second: int, out: int, _keep: Any = scalars) -> None:
        gemm_ex_routine(handle, opa, opb, m, n, k, alpha_p, first, data_type, lda, second, data_type, ldb, beta_p, out,
                        data_type, ldc, compute_type, algo)

    return issue_ex


@functools.lru_cache(maxsize=1024)
def _planned_gemm(dtype: str, compute: str | None, a: Layout, b: Layout, c: Layout, trans_a: bool, trans_b: bool,
                  alpha: float, beta: float) -> tuple[bool, Issue]:
    """(whether cuBLAS's A is our B, the issuing call) of a GEMM on operands of these layouts: checked and planned
    once per layout, so a timed loop pays the binding and cuBLAS's launch, not our planning. A bad operand raises
    here every time (a raised call is not cached)."""
    path = blas_args.gemm_path(dtype)
    for name, layout in (("A", a), ("B", b), ("C", c)):
        _check_dtype(path, name, layout)
    call = blas_args.plan_gemm(_described("A", a), _described("B", b), _described("C", c), trans_a=trans_a,
                               trans_b=trans_b)
    scalar = path.scalar if compute is None else blas_args.compute_type(compute).scalar
    alpha_h, beta_h = _scalars(alpha, beta, scalar)
    return call.swapped, _gemm_routine(path, call, alpha_h, beta_h, compute)


def gemm(handle: int, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, dtype: str = "fp32",
         alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False) -> None:
    """``C = alpha·op(A)·op(B) + beta·C`` on 2-D arrays, through the ``dtype`` path's routine."""
    swapped, issue = _planned_gemm(dtype, None, _layout("A", a), _layout("B", b), _layout("C", c), trans_a, trans_b,
                                   alpha, beta)
    first, second = (b, a) if swapped else (a, b)
    issue(handle, first.data.ptr, second.data.ptr, c.data.ptr)


def gemm_ex(handle: int, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, compute: str,
            alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False) -> str:
    """``cublasGemmEx`` with an explicit compute type (``blas_args.COMPUTE_TYPES``: ``32F``,
    ``32F_PEDANTIC``, ``32F_FAST_TF32``, ``16F``, ``64F``); the storage comes from the arrays' dtype.

    Returns the ``gpuperf.suite.accuracy`` path that bounds the result (e.g. ``fp16-acc16`` for ``16F``).
    """
    storage = blas_args.storage_of(a.dtype.name)
    accuracy = blas_args.ex_accuracy(storage, compute)
    swapped, issue = _planned_gemm(storage, compute, _layout("A", a), _layout("B", b), _layout("C", c), trans_a,
                                   trans_b, alpha, beta)
    first, second = (b, a) if swapped else (a, b)
    issue(handle, first.data.ptr, second.data.ptr, c.data.ptr)
    return accuracy


def current_math_mode(handle: int) -> int:
    """The handle's ``cublasMath_t`` value (flags included)."""
    return int(_lib().getMathMode(handle))


@contextmanager
def math_mode(handle: int, mode: str) -> Iterator[None]:
    """Set the handle's math mode (``blas_args.MATH_MODES``: ``default``, ``tf32``, ``pedantic``) for the
    block and always restore the previous one: the setting is per handle, so a leak would silently change
    every later sgemm."""
    previous = current_math_mode(handle)
    _lib().setMathMode(handle, _constant(blas_args.math_mode_constant(mode)))
    try:
        yield
    finally:
        _lib().setMathMode(handle, previous)


def gemm_strided_batched(handle: int, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, dtype: str = "fp32",
                         alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
                         trans_b: bool = False) -> None:
    """``C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i]`` for every item of a 3-D ``c`` (batch, rows, cols).

    A 2-D ``a`` (or ``b``) is one matrix shared by every item: batch stride 0, as is a 3-D array whose
    batch stride is 0 (``cupy.broadcast_to``). fp32/fp64 call s/dgemmStridedBatched, the other paths
    gemmStridedBatchedEx.
    """
    swapped, issue = _planned_strided(dtype, _layout("A", a), _layout("B", b), _layout("C", c), trans_a, trans_b,
                                      alpha, beta)
    first, second = (b, a) if swapped else (a, b)
    issue(handle, first.data.ptr, second.data.ptr, c.data.ptr)


@functools.lru_cache(maxsize=1024)
def _planned_strided(dtype: str, a: Layout, b: Layout, c: Layout, trans_a: bool, trans_b: bool, alpha: float,
                     beta: float) -> tuple[bool, Issue]:
    """``_planned_gemm`` for the strided-batched GEMM."""
    path = blas_args.gemm_path(dtype)
    for name, layout in (("A", a), ("B", b), ("C", c)):
        _check_dtype(path, name, layout)
    plan = blas_args.plan_strided(*(blas_args.describe_batch(name, shape, strides, dtype_.itemsize)
                                    for name, (dtype_, shape, strides) in (("A", a), ("B", b), ("C", c))),
                                  trans_a=trans_a, trans_b=trans_b)
    call = plan.gemm
    alpha_h, beta_h = _scalars(alpha, beta, path.scalar)
    scalars = (alpha_h, beta_h)
    opa, opb = _op(call.transa), _op(call.transb)
    m, n, k, lda, ldb, ldc, batch = call.m, call.n, call.k, call.lda, call.ldb, call.ldc, plan.batch
    stride_a, stride_b, stride_c = plan.stride_a, plan.stride_b, plan.stride_c
    alpha_p, beta_p = alpha_h.ctypes.data, beta_h.ctypes.data
    if path.typed:
        typed = getattr(_lib(), f"{path.typed}gemmStridedBatched")

        def issue_typed(handle: int, first: int, second: int, out: int, _keep: Any = scalars) -> None:
            typed(handle, opa, opb, m, n, k, alpha_p, first, lda, stride_a, second, ldb, stride_b, beta_p, out, ldc,
                  stride_c, batch)

        return call.swapped, issue_typed
    data_type = _constant(blas_args.CUDA_TYPE[path.storage])
    compute_type = _constant(blas_args.compute_type(path.compute).constant)
    algo = _constant("CUBLAS_GEMM_DEFAULT")
    strided_ex = _lib().gemmStridedBatchedEx

    def issue_ex(handle: int, first: int, second: int, out: int, _keep: Any = scalars) -> None:
        strided_ex(handle, opa, opb, m, n, k, alpha_p, first, data_type, lda, stride_a, second, data_type, ldb,
                   stride_b, beta_p, out, data_type, ldc, stride_c, batch, compute_type, algo)

    return call.swapped, issue_ex


def gemm_loop(handle: int, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, dtype: str = "fp32",
              alpha: float = 1.0, beta: float = 0.0) -> None:
    """The same batch as ``gemm_strided_batched``, one cuBLAS GEMM per item from a Python loop.

    The naive way to run a batch, as a comparison point. The call is planned once and the loop only
    offsets pointers, so the per-item cost is the binding plus cuBLAS's launch, not our planning.
    """
    path = blas_args.gemm_path(dtype)
    _check_dtypes(path, A=a, B=b, C=c)
    plan = blas_args.plan_strided(_batched("A", a), _batched("B", b), _batched("C", c))
    call = plan.gemm
    first, second = (b, a) if call.swapped else (a, b)
    alpha_h, beta_h = _scalars(alpha, beta, path.scalar)
    issue = _gemm_routine(path, call, alpha_h, beta_h)
    size = c.itemsize
    for item in range(plan.batch):
        issue(handle, first.data.ptr + item * plan.stride_a * size, second.data.ptr + item * plan.stride_b * size,
              c.data.ptr + item * plan.stride_c * size)


@dataclass(frozen=True, eq=False)
class BatchPointers:
    """Device arrays of per-item pointers for the pointer-array batched GEMM, built once by the caller.

    Holds the operands it points into, so they live as long as the pointers do.
    """

    path: GemmPath
    call: GemmCall
    batch: int
    first: cupy.ndarray  # uint64 pointers of cuBLAS's A (the caller's B when ``call.swapped``)
    second: cupy.ndarray
    out: cupy.ndarray
    operands: tuple[cupy.ndarray, ...]


def _pointer_array(x: cupy.ndarray, stride: int, batch: int) -> cupy.ndarray:
    offsets = numpy.arange(batch, dtype=numpy.uint64) * numpy.uint64(stride * x.itemsize)
    return cupy.asarray(offsets + numpy.uint64(x.data.ptr))


def batch_pointers(a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, dtype: str = "fp32",
                   trans_a: bool = False, trans_b: bool = False) -> BatchPointers:
    """Build the pointer arrays of ``gemm_batched`` (same operand rules as ``gemm_strided_batched``).

    Only fp32 and fp64 exist: CuPy binds s/dgemmBatched but not gemmBatchedEx.
    """
    path = blas_args.gemm_path(dtype)
    if not path.typed:
        raise ValueError(f"pointer-array batched GEMM is bound by CuPy only as sgemmBatched/dgemmBatched: "
                         f"use dtype 'fp32' or 'fp64', or gemm_strided_batched for {dtype!r}")
    _check_dtypes(path, A=a, B=b, C=c)
    plan = blas_args.plan_strided(_batched("A", a), _batched("B", b), _batched("C", c),
                                  trans_a=trans_a, trans_b=trans_b)
    first, second = (b, a) if plan.gemm.swapped else (a, b)
    return BatchPointers(path, plan.gemm, plan.batch, _pointer_array(first, plan.stride_a, plan.batch),
                         _pointer_array(second, plan.stride_b, plan.batch),
                         _pointer_array(c, plan.stride_c, plan.batch), (a, b, c))


def gemm_batched(handle: int, pointers: BatchPointers, *, alpha: float = 1.0, beta: float = 0.0) -> None:
    """The pointer-array batched GEMM (s/dgemmBatched) over pointers from ``batch_pointers``."""
    call = pointers.call
    alpha_h, beta_h = _scalars(alpha, beta, pointers.path.scalar)
    getattr(_lib(), f"{pointers.path.typed}gemmBatched")(
        handle, _op(call.transa), _op(call.transb), call.m, call.n, call.k, alpha_h.ctypes.data,
        pointers.first.data.ptr, call.lda, pointers.second.data.ptr, call.ldb, beta_h.ctypes.data,
        pointers.out.data.ptr, call.ldc, pointers.batch)


def _column(v: cupy.ndarray, name: str, ndim: int) -> cupy.ndarray:
    if v.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {v.shape}")
    return v[..., None]


def gemv(handle: int, a: cupy.ndarray, x: cupy.ndarray, y: cupy.ndarray, *, dtype: str = "fp32",
         trans: bool = False, alpha: float = 1.0, beta: float = 0.0) -> None:
    """``y = alpha·op(A)·x + beta·y``: sgemv/dgemv for fp32/fp64; the other paths as GEMM with n = 1
    (cuBLAS has no FP16/BF16 GEMV in the API CuPy binds).

    cuBLAS's op is ``trans`` for a column-major A and the opposite for a row-major one (whose transpose
    is what cuBLAS sees): pass an F-ordered A to get ``CUBLAS_OP_N`` on ``m×n``.
    """
    path = blas_args.gemm_path(dtype)
    if not path.typed:
        _check_dtypes(path, A=a, x=x, y=y)
        gemm(handle, a, _column(x, "x", 1), _column(y, "y", 1), dtype=dtype, alpha=alpha, beta=beta, trans_a=trans)
        return
    issue = _planned_gemv(dtype, _layout("A", a), _layout("x", x), _layout("y", y), trans, alpha, beta)
    issue(handle, a.data.ptr, x.data.ptr, y.data.ptr)


@functools.lru_cache(maxsize=1024)
def _planned_gemv(dtype: str, a: Layout, x: Layout, y: Layout, trans: bool, alpha: float, beta: float) -> Issue:
    """``_planned_gemm`` for s/dgemv: ``issue(handle, A, x, y)``."""
    path = blas_args.gemm_path(dtype)
    for name, layout in (("A", a), ("x", x), ("y", y)):
        _check_dtype(path, name, layout)
    (_, x_shape, x_strides), (_, y_shape, y_strides) = x, y
    if len(x_shape) != 1 or len(y_shape) != 1:
        raise ValueError(f"x and y must be 1-D, got shapes {x_shape} and {y_shape}")
    call = blas_args.plan_gemv(_described("A", a), x_len=x_shape[0], y_len=y_shape[0], trans=trans)
    incx = blas_args.vector_increment("x", x_shape[0], x_strides[0], x[0].itemsize)
    incy = blas_args.vector_increment("y", y_shape[0], y_strides[0], y[0].itemsize)
    alpha_h, beta_h = _scalars(alpha, beta, path.scalar)
    scalars = (alpha_h, beta_h)
    op, m, n, lda = _op(call.trans), call.m, call.n, call.lda
    alpha_p, beta_p = alpha_h.ctypes.data, beta_h.ctypes.data
    typed = getattr(_lib(), f"{path.typed}gemv")

    def issue(handle: int, matrix: int, vector: int, out: int, _keep: Any = scalars) -> None:
        typed(handle, op, m, n, alpha_p, matrix, lda, vector, incx, beta_p, out, incy)

    return issue


def gemv_batched(handle: int, a: cupy.ndarray, x: cupy.ndarray, y: cupy.ndarray, *, dtype: str = "fp32",
                 trans: bool = False, alpha: float = 1.0, beta: float = 0.0) -> None:
    """Batched GEMV as a strided-batched GEMM with n = 1: ``y[i] = op(A[i])·x[i]``.

    ``x`` is ``(batch, len_x)``, ``y`` is ``(batch, len_y)``; a 2-D ``a`` is one weight shared by every
    vector (strideA = 0).
    """
    gemm_strided_batched(handle, a, _column(x, "x", 2), _column(y, "y", 2), dtype=dtype, alpha=alpha, beta=beta,
                         trans_a=trans)


def gemv_batch_pointers(a: cupy.ndarray, x: cupy.ndarray, y: cupy.ndarray, *, dtype: str = "fp32",
                        trans: bool = False) -> BatchPointers:
    """Pointer arrays for the pointer-array batched GEMV (sgemmBatched with n = 1 via ``gemm_batched``)."""
    return batch_pointers(a, _column(x, "x", 2), _column(y, "y", 2), dtype=dtype, trans_a=trans)


class StreamSplit:
    """A multi-stream comparison point: one strided-batched GEMM cut into sub-batches, one per
    side stream, forked from and joined back to the caller's current stream.

    The fork event is recorded on the current stream and every side stream waits on it; each side stream
    records its own event, which the current stream waits on. So everything ``run`` enqueues lies between
    whatever is recorded on the current stream before and after it (what ``measure`` times). Each side
    stream has its own cuBLAS handle, so concurrent kernels never share a handle's workspace.
    Make one with ``stream_split``, which destroys the handles afterwards.
    """

    def __init__(self, count: int = 4) -> None:
        if count < 1:
            raise ValueError(f"a stream split needs at least one stream, got {count}")
        self.streams = tuple(cupy.cuda.Stream(non_blocking=True) for _ in range(count))
        self._handles = [_lib().create() for _ in range(count)]
        self._fork = cupy.cuda.Event(disable_timing=True)
        self._joins = tuple(cupy.cuda.Event(disable_timing=True) for _ in range(count))

    def run(self, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, dtype: str = "fp32", alpha: float = 1.0,
            beta: float = 0.0) -> None:
        if c.ndim != 3:
            raise ValueError(f"C must be 3-D (batch, rows, cols), got shape {c.shape}")
        origin = cupy.cuda.get_current_stream()
        self._fork.record(origin)
        pieces = blas_args.split_batch(c.shape[0], len(self.streams))
        for (lo, hi), stream, handle, join in zip(pieces, self.streams, self._handles, self._joins):
            stream.wait_event(self._fork)
            with stream:
                gemm_strided_batched(handle, a if a.ndim == 2 else a[lo:hi], b if b.ndim == 2 else b[lo:hi],
                                     c[lo:hi], dtype=dtype, alpha=alpha, beta=beta)
            join.record(stream)
            origin.wait_event(join)

    def close(self) -> None:
        for stream in self.streams:
            stream.synchronize()
        while self._handles:
            _lib().destroy(self._handles.pop())



@contextmanager
def stream_split(count: int = 4) -> Iterator[StreamSplit]:
    """A ``StreamSplit`` over ``count`` side streams, closed (streams drained, handles destroyed) on exit."""
    split = StreamSplit(count)
    try:
        yield split
    finally:
        split.close()
