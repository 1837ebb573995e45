"""The code under test: a shared-memory tiled SGEMM of this project's own, a CuPy ``RawKernel``.

CuPy is imported when the kernel is first launched, so the tests collect (and skip with a reason) on a machine
without it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy

TILE = 16

SOURCE = r"""
extern "C" __global__ void tiled_sgemm(const float* a, const float* b, float* c, int m, int n, int k) {
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < k; t += TILE) {
        a_tile[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : 0.0f;
        b_tile[threadIdx.y][threadIdx.x] = (t + threadIdx.y < k && col < n) ? b[(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) {
            sum += a_tile[threadIdx.y][i] * b_tile[i][threadIdx.x];
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        c[row * n + col] = sum;
    }
}
"""


@functools.cache
def _kernel() -> Any:
    import cupy

    kernel = cupy.RawKernel(SOURCE, "tiled_sgemm", options=(f"-DTILE={TILE}",))
    kernel.compile()  # here, not inside a timed batch
    return kernel


def sgemm(a: Any, b: Any, c: Any) -> None:
    """``c = a · b`` for C-contiguous float32 CuPy matrices; enqueued on the current stream, no synchronisation."""
    m, k = a.shape
    k_b, n = b.shape
    if k_b != k or c.shape != (m, n):
        raise ValueError(f"shapes do not chain: a {a.shape} · b {b.shape} into c {c.shape}")
    for name, x in (("a", a), ("b", b), ("c", c)):
        if x.dtype != numpy.float32 or not x.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous float32 matrix, got {x.dtype}")
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    _kernel()(grid, (TILE, TILE), (a, b, c, numpy.int32(m), numpy.int32(n), numpy.int32(k)))
