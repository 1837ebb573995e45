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
from collections.abc import Iterator
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
        if not isinstance(array, cupy.ndarray):
            raise TypeError(f"{name} must be a cupy.ndarray, got {type(array).__name__}")
        if array.dtype != path.dtype:
            hint = " (bfloat16 bits: see kernels.operands.to_bf16)" if path.storage == "bf16" else ""
            raise TypeError(f"{name} is {array.dtype}, but dtype={path.name!r} takes {path.dtype} arrays{hint}")


def _matrix(name: str, x: cupy.ndarray) -> blas_args.Operand:
    return blas_args.describe_matrix(name, x.shape, x.strides, x.itemsize)


def _batched(name: str, x: cupy.ndarray) -> blas_args.Batched:
    return blas_args.describe_batch(name, x.shape, x.strides, x.itemsize)


def _issue_gemm(handle: int, path: GemmPath, call: GemmCall, first: int, second: int, out: int,
                alpha: numpy.ndarray, beta: numpy.ndarray, compute: str | None = None) -> None:
    """One GEMM on device pointers: the path's typed routine, or gemmEx (always when ``compute`` is given)."""
    if path.typed and compute is None:
        getattr(_lib(), f"{path.typed}gemm")(
            handle, _op(call.transa), _op(call.transb), call.m, call.n, call.k, alpha.ctypes.data,
            first, call.lda, second, call.ldb, beta.ctypes.data, out, call.ldc)
        return
    data_type = _constant(blas_args.CUDA_TYPE[path.storage])
    _lib().gemmEx(
        handle, _op(call.transa), _op(call.transb), call.m, call.n, call.k, alpha.ctypes.data,
        first, data_type, call.lda, second, data_type, call.ldb, beta.ctypes.data, out, data_type, call.ldc,
        _constant(blas_args.compute_type(compute or path.compute).constant), _constant("CUBLAS_GEMM_DEFAULT"))


def _plan(a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, trans_a: bool, trans_b: bool
          ) -> tuple[GemmCall, cupy.ndarray, cupy.ndarray]:
    call = blas_args.plan_gemm(_matrix("A", a), _matrix("B", b), _matrix("C", c), trans_a=trans_a, trans_b=trans_b)
    first, second = (b, a) if call.swapped else (a, b)
    return call, first, second


def gemm(handle: int, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, dtype: str = "fp32",
         alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False) -> None:
    """``C = alpha·op(A)·op(B) + beta·C`` on 2-D arrays, through the ``dtype`` path's routine."""
    path = blas_args.gemm_path(dtype)
    _check_dtypes(path, A=a, B=b, C=c)
    call, first, second = _plan(a, b, c, trans_a, trans_b)
    alpha_h, beta_h = _scalars(alpha, beta, path.scalar)
    _issue_gemm(handle, path, call, first.data.ptr, second.data.ptr, c.data.ptr, alpha_h, beta_h)


def gemm_ex(handle: int, a: cupy.ndarray, b: cupy.ndarray, c: cupy.ndarray, *, compute: str,
            alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False) -> str:
    """``cublasGemmEx`` with an explicit compute type (``blas_args.COMPUTE_TYPES``: ``32F``,
    ``32F_PEDANTIC``, ``32F_FAST_TF32``, ``16F``, ``64F``); the storage comes from the arrays' dtype.

    Returns the ``gpuperf.suite.accuracy`` path that bounds the result (e.g. ``fp16-acc16`` for ``16F``).
    """
    storage = blas_args.storage_of(a.dtype.name)
    accuracy = blas_args.ex_accuracy(storage, compute)
    path = blas_args.gemm_path(storage)
    _check_dtypes(path, A=a, B=b, C=c)
    call, first, second = _plan(a, b, c, trans_a, trans_b)
    alpha_h, beta_h = _scalars(alpha, beta, blas_args.compute_type(compute).scalar)
    _issue_gemm(handle, path, call, first.data.ptr, second.data.ptr, c.data.ptr, alpha_h, beta_h, compute)
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
    path = blas_args.gemm_path(dtype)
    _check_dtypes(path, A=a, B=b, C=c)
    plan = blas_args.plan_strided(_batched("A", a), _batched("B", b), _batched("C", c),
                                  trans_a=trans_a, trans_b=trans_b)
    call = plan.gemm
    first, second = (b, a) if call.swapped else (a, b)
    alpha_h, beta_h = _scalars(alpha, beta, path.scalar)
    if path.typed:
        getattr(_lib(), f"{path.typed}gemmStridedBatched")(
            handle, _op(call.transa), _op(call.transb), call.m, call.n, call.k, alpha_h.ctypes.data,
            first.data.ptr, call.lda, plan.stride_a, second.data.ptr, call.ldb, plan.stride_b,
            beta_h.ctypes.data, c.data.ptr, call.ldc, plan.stride_c, plan.batch)
        return
    data_type = _constant(blas_args.CUDA_TYPE[path.storage])
    _lib().gemmStridedBatchedEx(
        handle, _op(call.transa), _op(call.transb), call.m, call.n, call.k, alpha_h.ctypes.data,
        first.data.ptr, data_type, call.lda, plan.stride_a, second.data.ptr, data_type, call.ldb, plan.stride_b,
        beta_h.ctypes.data, c.data.ptr, data_type, call.ldc, plan.stride_c, plan.batch,
        _constant(blas_args.compute_type(path.compute).constant), _constant("CUBLAS_GEMM_DEFAULT"))


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
    size = c.itemsize
    for item in range(plan.batch):
        _issue_gemm(handle, path, call, first.data.ptr + item * plan.stride_a * size,
                    second.data.ptr + item * plan.stride_b * size, c.data.ptr + item * plan.stride_c * size,
                    alpha_h, beta_h)


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
    _check_dtypes(path, A=a, x=x, y=y)
    if not path.typed:
        gemm(handle, a, _column(x, "x", 1), _column(y, "y", 1), dtype=dtype, alpha=alpha, beta=beta, trans_a=trans)
        return
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"x and y must be 1-D, got shapes {x.shape} and {y.shape}")
    call = blas_args.plan_gemv(_matrix("A", a), x_len=x.shape[0], y_len=y.shape[0], trans=trans)
    incx = blas_args.vector_increment("x", x.shape[0], x.strides[0], x.itemsize)
    incy = blas_args.vector_increment("y", y.shape[0], y.strides[0], y.itemsize)
    alpha_h, beta_h = _scalars(alpha, beta, path.scalar)
    getattr(_lib(), f"{path.typed}gemv")(
        handle, _op(call.trans), call.m, call.n, alpha_h.ctypes.data, a.data.ptr, call.lda,
        x.data.ptr, incx, beta_h.ctypes.data, y.data.ptr, incy)


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
