"""FP8 device operands: fresh random E4M3/E5M2 bytes with their scaling factors, NaN-poisoned outputs, and the
stored values decoded on the host for the float64 reference.

The bytes are made on the device from the same counter hash as ``kernels.operands`` (reproducible per case,
fast enough for the 470 MB weights of the largest projection): a uniform float in ±[2⁻⁶, 1) has its exponent and
top mantissa bits copied into the format's fields, so every byte is a normal, finite FP8 value. No rounding rule is
involved: the host decodes whatever bytes were stored with ``ml_dtypes``, the field's reference implementation of
both formats, and the reference multiplies those values.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Any, Literal

import cupy
import numpy

from kernels import fp8_plan
from kernels.cublaslt_fp8 import OUTPUT_STORAGE, Fp8Operand, Fp8Output
from kernels.operands import BF16_NAN, bf16_bits_to_float32

#: A quiet NaN in both FP8 formats (E4M3: S.1111.111; E5M2: S.11111.11).
FP8_NAN = 0x7F
#: The factors drawn for the scales: uniform in [low, high), not powers of two, so a factor applied to the wrong
#: block changes the result.
SCALE_RANGE = (0.5, 2.0)

_FP8_BITS = r"""
unsigned long long z = seed + (unsigned long long)i * 0x9E3779B97F4A7C15ull;
z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
z = z ^ (z >> 31);
float v = (float)(2.0 * ((double)(z >> 11) * 1.1102230246251565e-16) - 1.0);
if (fabsf(v) < 0.015625f) v = (v < 0.0f) ? -0.5f : 0.5f;
unsigned int u = __float_as_uint(v);
unsigned int sign = u >> 31;
int e = (int)((u >> 23) & 0xffu) - 127;
y = e5m2 ? (unsigned char)((sign << 7) | ((unsigned)(e + 15) << 2) | ((u >> 21) & 3u))
         : (unsigned char)((sign << 7) | ((unsigned)(e + 7) << 3) | ((u >> 20) & 7u));
"""


@functools.cache
def _bits_kernel() -> cupy.ElementwiseKernel:
    return cupy.ElementwiseKernel("uint64 seed, int32 e5m2", "uint8 y", _FP8_BITS, "gpuperf_random_fp8")


@functools.cache
def ml_dtypes() -> ModuleType:
    """The ``ml_dtypes`` module, or an ImportError naming the install command."""
    try:
        return importlib.import_module("ml_dtypes")
    except ImportError as exc:
        raise ImportError(f"FP8 values are decoded with ml_dtypes, which is not installed ({exc}): "
                          "pip install ml_dtypes (the cuda13 extra brings it)") from exc


def numpy_format(fmt: str) -> Any:
    """The ``ml_dtypes`` dtype of an FP8 format or output name (``fp8_e4m3`` → ``float8_e4m3fn``)."""
    module = ml_dtypes()
    return {"fp8_e4m3": module.float8_e4m3fn, "fp8_e5m2": module.float8_e5m2, "bf16": module.bfloat16}[fmt]


def random_fp8(rng: numpy.random.Generator, rows: int, cols: int, fmt: str, scaling: fp8_plan.Scaling,
               role: Literal["a", "w"]) -> Fp8Operand:
    """A fresh ``rows×cols`` FP8 operand (K along the columns) with random factors laid out for ``scaling``."""
    if fmt not in fp8_plan.FP8_TYPES:
        raise ValueError(f"{fmt!r} is not an FP8 format: use one of {sorted(fp8_plan.FP8_TYPES)}")
    data = cupy.empty((rows, cols), dtype=cupy.uint8)
    _bits_kernel()(numpy.uint64(int(rng.integers(0, 2**63))), numpy.int32(fmt == "fp8_e5m2"), data)
    layout = fp8_plan.scale_layout(scaling, role, rows, cols)
    scales = cupy.asarray(rng.uniform(*SCALE_RANGE, size=layout.count).astype(numpy.float32))
    return Fp8Operand(data, fmt, scales, layout)


def fp8_output(m: int, n: int, out: str, d_scale: float = 1.0) -> Fp8Output:
    """A NaN-poisoned ``m×n`` output of type ``out``; an FP8 one with its ``d_scale`` and a NaN ``amax``."""
    storage = OUTPUT_STORAGE[out]
    nan = {"uint16": BF16_NAN, "uint8": FP8_NAN}.get(storage, float("nan"))
    data = cupy.full((m, n), nan, dtype=storage)
    if out not in fp8_plan.FP8_TYPES:
        return Fp8Output(data)
    return Fp8Output(data, cupy.full(1, d_scale, dtype=cupy.float32), cupy.full(1, float("nan"), dtype=cupy.float32))


def decode(data: Any, fmt: str) -> numpy.ndarray:
    """The stored values of a device array of format ``fmt`` (an FP8 format or an output type) as float64."""
    host = cupy.asnumpy(data)
    if fmt in fp8_plan.FP8_TYPES:
        host = host.view(numpy_format(fmt))
    elif fmt == "bf16":
        host = bf16_bits_to_float32(host)
    values: numpy.ndarray = numpy.asarray(host, dtype=numpy.float64)
    return values


def dequantize(operand: Fp8Operand, rows: numpy.ndarray | None = None) -> numpy.ndarray:
    """What the operand (or its ``rows``) stands for: each decoded value times its block's factor, in float64."""
    count, cols = operand.data.shape
    picked = numpy.arange(count) if rows is None else numpy.asarray(rows)
    data = operand.data if rows is None else operand.data[cupy.asarray(picked)]
    values: numpy.ndarray = decode(data, operand.fmt) * operand.layout.factors(cupy.asnumpy(operand.scales), picked,
                                                                             cols)
    return values
