"""Device operands for the cuBLAS tests: fresh random matrices of any suite dtype, NaN-poisoned outputs,
padded leading dimensions, and the BF16 representation.

BF16: CuPy has no bfloat16 dtype, so a BF16 operand is a ``uint16`` array holding bfloat16 bit patterns
(the upper half of a float32). ``to_bf16`` rounds float32 to nearest-even on the device, ``from_bf16``
widens back exactly; ``to_host`` decodes the stored values for a float64 reference.

Random values are made on the device by a counter-based hash (splitmix64) of the element index and a
seed drawn from the test's ``rng``: reproducible per case, no cuRAND dependency, and fast enough for the
4 GiB operands of the largest GEMV cases (host generation would take seconds per operand). Values are
uniform in ±[2⁻¹⁰, 1): never zero, in any storage precision (FP16 would flush smaller values to zero).
"""

from __future__ import annotations

import functools
from typing import Literal

import cupy
import numpy

from kernels.blas_args import gemm_path

MemoryOrder = Literal["C", "F"]

#: The bfloat16 quiet NaN bit pattern.
BF16_NAN = 0x7FC0

_UNIFORM = r"""
unsigned long long z = seed + (unsigned long long)i * 0x9E3779B97F4A7C15ull;
z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
z = z ^ (z >> 31);
double v = 2.0 * ((double)(z >> 11) * 1.1102230246251565e-16) - 1.0;
if (fabs(v) < 0.0009765625) v = (v < 0.0) ? -0.5 : 0.5;
y = (T)v;
"""

_TO_BF16 = r"""
unsigned int bits = __float_as_uint(x);
if ((bits & 0x7fffffffu) > 0x7f800000u) {
    y = 0x7fc0;
} else {
    y = (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
"""


@functools.cache
def _uniform_kernel() -> cupy.ElementwiseKernel:
    return cupy.ElementwiseKernel("uint64 seed", "T y", _UNIFORM, "gpuperf_uniform_nonzero")


@functools.cache
def _to_bf16_kernel() -> cupy.ElementwiseKernel:
    return cupy.ElementwiseKernel("float32 x", "uint16 y", _TO_BF16, "gpuperf_float32_to_bf16")


@functools.cache
def _from_bf16_kernel() -> cupy.ElementwiseKernel:
    return cupy.ElementwiseKernel("uint16 x", "float32 y", "y = __uint_as_float(((unsigned int)x) << 16);",
                                  "gpuperf_bf16_to_float32")


def to_bf16(x: cupy.ndarray) -> cupy.ndarray:
    """float32 → bfloat16 bits (``uint16``), round to nearest even; NaN stays NaN."""
    return _to_bf16_kernel()(cupy.asarray(x, dtype=cupy.float32))


def from_bf16(bits: cupy.ndarray) -> cupy.ndarray:
    """bfloat16 bits (``uint16``) → float32, exactly."""
    return _from_bf16_kernel()(bits)


def bf16_bits_to_float32(bits: numpy.ndarray) -> numpy.ndarray:
    """Host-side ``from_bf16``."""
    return (numpy.asarray(bits, dtype=numpy.uint16).astype(numpy.uint32) << 16).view(numpy.float32)


def storage_dtype(dtype: str) -> numpy.dtype:
    """The array dtype of a suite dtype (``tf32`` is stored as float32, ``bf16`` as uint16 bits)."""
    return numpy.dtype(gemm_path(dtype).dtype)


def nan_value(dtype: str) -> float | int:
    """The NaN fill value of a suite dtype's storage."""
    return BF16_NAN if gemm_path(dtype).storage == "bf16" else float("nan")


def _buffer_shape(shape: tuple[int, ...], order: MemoryOrder, pad: int) -> tuple[int, ...]:
    if len(shape) < 2:
        if order != "C" or pad:
            raise ValueError(f"a vector (shape {shape}) has no memory order or leading dimension to pad")
        return shape
    rows, cols = shape[-2:]
    outer, inner = (rows, cols) if order == "C" else (cols, rows)
    return (*shape[:-2], outer, inner + pad)


def _view(buffer: cupy.ndarray, shape: tuple[int, ...], order: MemoryOrder) -> cupy.ndarray:
    """The ``shape`` matrix (or stack) inside a buffer whose last axis may be padded."""
    if len(shape) < 2:
        return buffer
    rows, cols = shape[-2:]
    if order == "C":
        return buffer[..., :cols]
    return buffer[..., :rows].swapaxes(-1, -2)


def random_operand(rng: numpy.random.Generator, shape: tuple[int, ...], dtype: str, *,
                   order: MemoryOrder = "C", pad: int = 0) -> cupy.ndarray:
    """Fresh random device values of suite dtype ``dtype`` (on the current stream).

    ``shape`` is ``(n,)``, ``(rows, cols)`` or ``(batch, rows, cols)``. ``order="F"`` stores each matrix
    column-major. ``pad > 0`` makes the leading dimension ``pad`` elements longer than the matrix needs;
    the padding holds NaN, so a call that reads it produces NaN instead of a plausible wrong number.
    """
    path = gemm_path(dtype)
    wide = cupy.empty(_buffer_shape(shape, order, pad), dtype=numpy.float64 if path.storage == "fp64" else numpy.float32)
    _uniform_kernel()(numpy.uint64(int(rng.integers(0, 2**63))), wide)
    if path.storage == "bf16":
        buffer = to_bf16(wide)
    else:
        buffer = wide.astype(path.dtype, copy=False)
    if pad:
        buffer[..., buffer.shape[-1] - pad:] = nan_value(dtype)
    return _view(buffer, shape, order)


def nan_operand(shape: tuple[int, ...], dtype: str, *, order: MemoryOrder = "C", pad: int = 0) -> cupy.ndarray:
    """A device output filled with NaN, padding included (a poisoned C: every element must be written)."""
    buffer = cupy.full(_buffer_shape(shape, order, pad), nan_value(dtype), dtype=storage_dtype(dtype))
    return _view(buffer, shape, order)


def poison(x: cupy.ndarray, dtype: str) -> None:
    """Overwrite ``x`` (a view is fine: its padding keeps its values) with NaN."""
    x.fill(nan_value(dtype))


def to_host(x: cupy.ndarray, dtype: str) -> numpy.ndarray:
    """The stored values of ``x`` as NumPy floats (BF16 bits decoded); waits for the current stream."""
    host = cupy.asnumpy(x)
    return bf16_bits_to_float32(host) if gemm_path(dtype).storage == "bf16" else host
