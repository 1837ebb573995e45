"""A pytest plugin that makes chosen cuBLAS calls genuinely slower, to show that the gate catches it.

For demonstrations only (``docs/fleet.md``: "a genuine 5 % slowdown caught on every GPU"). With
``GPUPERF_SLOWDOWN=0.05`` and ``-p tools.slowdown``, every ``kernels.cublas.gemv`` and non-transposed
``kernels.cublas.gemm`` runs on operands whose *reduction* dimension is 5 % longer than the case's (fresh
random values, allocated once per operand set): the same kernel, on the same grid (it is set by the output's
size), does 5 % more reads and FMAs, while the case still counts the work of its own shape. No figure is
edited: the device really spends longer. Nothing else in the suite knows about it.
"""

from __future__ import annotations

import math
import os
from typing import Any

#: The fraction of extra work, from the environment (unset or 0: the plugin does nothing).
SLOWDOWN_ENV = "GPUPERF_SLOWDOWN"


#: The extension is a whole number of these elements, so the longer operands keep the alignment (16 bytes and
#: more) of the case's own: an odd K cost cuBLAS its vector loads and made a "5 %" call 24 % slower on the H200.
ALIGN_ELEMENTS = 8


def longer(size: int, fraction: float) -> int:
    """The reduction size that carries at least ``fraction`` more work, extended by whole aligned steps."""
    return size + ALIGN_ELEMENTS * max(1, math.ceil(size * fraction / ALIGN_ELEMENTS))


def gemv_shapes(m: int, n: int, trans: bool, fraction: float) -> tuple[tuple[int, int], int]:
    """(A's shape, x's length) of a GEMV whose reduction is ``fraction`` longer: A's columns for ``y = A·x``,
    its rows for ``y = Aᵀ·x``; y keeps its length, so the kernel's grid stays the same."""
    if trans:
        rows = longer(m, fraction)
        return (rows, n), rows
    columns = longer(n, fraction)
    return (m, columns), columns


def gemm_shapes(m: int, n: int, k: int, fraction: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """(A's, B's) shapes of ``C = A·B`` (m×n) with k ``fraction`` longer."""
    k_long = longer(k, fraction)
    return (m, k_long), (k_long, n)


def pytest_configure(config: Any) -> None:
    fraction = float(os.environ.get(SLOWDOWN_ENV, "0") or 0)
    if fraction <= 0:
        return
    import numpy

    from kernels import cublas
    from kernels.operands import random_operand

    rng = numpy.random.default_rng(2026)
    longer_operands: dict[tuple[int, ...], tuple[Any, ...]] = {}  # keyed by the ids of the case's operands
    gemv, gemm = cublas.gemv, cublas.gemm

    def slow_gemv(handle: int, a: Any, x: Any, y: Any, *, dtype: str = "fp32", trans: bool = False,
                  **scalars: Any) -> None:
        key = (id(a), id(x))
        if key not in longer_operands:
            order = "F" if a.flags.f_contiguous else "C"
            a_shape, x_len = gemv_shapes(a.shape[0], a.shape[1], trans, fraction)
            longer_operands[key] = (a, x, random_operand(rng, a_shape, dtype, order=order),
                                    random_operand(rng, (x_len,), dtype))
        *_, a_long, x_long = longer_operands[key]
        gemv(handle, a_long, x_long, y, dtype=dtype, trans=trans, **scalars)

    def slow_gemm(handle: int, a: Any, b: Any, c: Any, *, dtype: str = "fp32", trans_a: bool = False,
                  trans_b: bool = False, **scalars: Any) -> None:
        if trans_a or trans_b or a.ndim != 2:
            gemm(handle, a, b, c, dtype=dtype, trans_a=trans_a, trans_b=trans_b, **scalars)
            return
        key = (id(a), id(b))
        if key not in longer_operands:
            a_shape, b_shape = gemm_shapes(a.shape[0], b.shape[1], a.shape[1], fraction)
            longer_operands[key] = (a, b, random_operand(rng, a_shape, dtype), random_operand(rng, b_shape, dtype))
        *_, a_long, b_long = longer_operands[key]
        gemm(handle, a_long, b_long, c, dtype=dtype, **scalars)

    cublas.gemv, cublas.gemm = slow_gemv, slow_gemm  # type: ignore[assignment]
    config.add_cleanup(lambda: setattr(cublas, "gemv", gemv) or setattr(cublas, "gemm", gemm))
