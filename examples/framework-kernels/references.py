"""Float64 references of this project's operations, in NumPy (no PyTorch needed)."""

from __future__ import annotations

import math
from typing import Any

import numpy


def gelu_tanh_float64(x: Any) -> Any:
    """The tanh approximation of GELU in float64, the reference of ops.fused_gelu and ops.MlpBlock."""
    x64 = numpy.asarray(x, dtype=numpy.float64)
    return 0.5 * x64 * (1.0 + numpy.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)))
