"""Planning an FP8 GEMM on Hopper: the recipe (formats, output, scaling, accumulation), the layout rules
cuBLASLt enforces on sm_90, and where each scaling factor sits in memory.

The product is a linear layer's: ``C[m×n] = (s_A ⊙ A[m×k]) · (s_B ⊙ W[n×k])ᵀ``, activations ``A`` (``m`` tokens)
times weights ``W`` stored ``n×k`` row-major, both K-contiguous. That is the only layout Hopper's FP8 tensor cores
take: in cuBLAS's column-major terms ``A`` must be transposed and ``B`` not ("TN"). It is planned by the same
row-major swap as every other GEMM (``blas_args.plan_gemm`` with ``trans_b``: cuBLAS's A is our W, its B our A),
and ``plan`` refuses, naming the rule, every layout cuBLASLt would refuse or run wrong.

Scaling (``s_A``, ``s_B``; cuBLASLt's ``*_SCALE_MODE``):

- ``tensor``: one FP32 factor per operand (``SCALAR_32F``).
- ``outer``: one factor per row of A (per token) and one per row of W (per output channel): ``OUTER_VEC_32F``.
- ``block``: DeepSeek-V3's recipe, a factor per 1×128 block of A along K (``VEC128_32F``) and per 128×128 block
  of W (``BLK128x128_32F``).

A factor multiplies its block: the value an element stands for is ``decode(byte) · factor`` (cuBLASLt's
convention; the dequantised operand is what the float64 reference multiplies). With an FP8 output the result is
also multiplied by ``d_scale`` before rounding, and cuBLASLt writes the largest magnitude it saw (``amax``) before
that scaling. What cuBLASLt 13.1 refuses on sm_90 was measured (``tools/gpu_host/fp8_probe.py``, evidence/fp8.md); the
rules below are those refusals, named.

Pure Python (no CuPy): tested on the CPU in ``tests/test_fp8_plan.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from kernels import blas_args

Scaling = Literal["tensor", "outer", "block"]

#: FP8 storage formats (the suite's dtype names) → their ``cudaDataType``.
FP8_TYPES: dict[str, str] = {"fp8_e4m3": "CUDA_R_8F_E4M3", "fp8_e5m2": "CUDA_R_8F_E5M2"}
#: Outputs an FP8 product may write → ``(cudaDataType, bytes per element)``.
OUTPUT_TYPES: dict[str, tuple[str, int]] = {"bf16": ("CUDA_R_16BF", 2), "fp16": ("CUDA_R_16F", 2),
                                            "fp32": ("CUDA_R_32F", 4), "fp8_e4m3": ("CUDA_R_8F_E4M3", 1),
                                            "fp8_e5m2": ("CUDA_R_8F_E5M2", 1)}
#: cuBLASLt's ``cublasLtMatmulMatrixScale_t`` name for (scaling, operand): ``a`` the activations, ``w`` the weights.
SCALE_MODES: dict[tuple[str, str], str] = {
    ("tensor", "a"): "SCALAR_32F", ("tensor", "w"): "SCALAR_32F",
    ("outer", "a"): "OUTER_VEC_32F", ("outer", "w"): "OUTER_VEC_32F",
    ("block", "a"): "VEC128_32F", ("block", "w"): "BLK128x128_32F",
}
#: The side of a scaling block along K, and along the rows of W for ``block``.
BLOCK = 128
#: Leading dimensions and the output's rows must be multiples of this many bytes (the tensor cores' TMA loads).
ALIGNMENT_BYTES = 16
#: Block scaling: the tokens (cuBLASLt's N) must be a multiple of this (1, 2 and 17 refused; 4, 8, 12, 16, 20 and 24
#: run: tools/gpu_host/fp8_probe.py, evidence/fp8.md): a column of 1×128 factors is one 16-byte aligned vector per
#: K-block.
BLOCK_TOKENS_MULTIPLE = 4


class Fp8RecipeError(ValueError):
    """A combination of formats, output, scaling and accumulation that cuBLASLt does not run on sm_90."""


class Fp8LayoutError(blas_args.LayoutError):
    """Operands whose shape or layout the FP8 tensor cores cannot read; the message names the rule and the fix."""


@dataclass(frozen=True)
class Fp8Recipe:
    """How one FP8 product is computed: ``a`` (activations) and ``w`` (weights) formats, the output type, the
    scaling and whether cuBLASLt may keep the whole sum in the tensor cores' accumulator (``fast_accum``)."""

    a: str = "fp8_e4m3"
    w: str = "fp8_e4m3"
    out: str = "bf16"
    scaling: Scaling = "tensor"
    fast_accum: bool = False

    def __post_init__(self) -> None:
        for role, fmt in (("activations", self.a), ("weights", self.w)):
            if fmt not in FP8_TYPES:
                raise Fp8RecipeError(f"{role} format {fmt!r} is not an FP8 format: use one of {sorted(FP8_TYPES)}")
        if self.out not in OUTPUT_TYPES:
            raise Fp8RecipeError(f"output {self.out!r} is not one cuBLASLt writes from FP8: use one of "
                                 f"{sorted(OUTPUT_TYPES)}")
        if self.scaling not in ("tensor", "outer", "block"):
            raise Fp8RecipeError(f"scaling {self.scaling!r}: use tensor, outer or block")
        if self.a == self.w == "fp8_e5m2":
            raise Fp8RecipeError("E5M2 × E5M2 is not an FP8 GEMM cuBLASLt runs (CUBLAS_STATUS_NOT_SUPPORTED on "
                                 "sm_90): keep one operand E4M3 (E5M2 is meant for gradients, E4M3 for the other side)")
        if self.scaling != "tensor" and self.out in FP8_TYPES:
            raise Fp8RecipeError(f"{self.scaling} scaling with an FP8 output is refused by cuBLASLt on sm_90 "
                                 "(CUBLAS_STATUS_INVALID_VALUE): write BF16 or FP32, or use tensor scaling")
        if self.scaling == "block" and self.fast_accum:
            raise Fp8RecipeError("block scaling with fast accumulation is refused by cuBLASLt on sm_90 "
                                 "(CUBLAS_STATUS_NOT_SUPPORTED): the block scales are applied when the partial sums "
                                 "are promoted to FP32, so turn fast_accum off")

    @property
    def fp8_output(self) -> bool:
        return self.out in FP8_TYPES

    @property
    def label(self) -> str:
        """``e4m3xe4m3-bf16-tensor`` (+ ``-fast``): the recipe in a case id or a note."""
        short = {name: name.removeprefix("fp8_") for name in (*FP8_TYPES, *OUTPUT_TYPES)}
        text = f"{short[self.a]}x{short[self.w]}-{short[self.out]}-{self.scaling}"
        return text + ("-fast" if self.fast_accum else "")


@dataclass(frozen=True)
class ScaleLayout:
    """Where the factors of one operand (``rows×cols``, K along the columns) sit in their FP32 buffer:
    ``shape`` of the grid of factors (rows of blocks × blocks along K), and the buffer's strides in elements."""

    mode: str
    shape: tuple[int, int]
    strides: tuple[int, int]
    block: tuple[int, int]

    @property
    def count(self) -> int:
        """Elements of the buffer (padding included)."""
        rows, cols = self.shape
        return max((rows - 1) * self.strides[0] + (cols - 1) * self.strides[1] + 1, 1)

    def grid(self, flat: np.ndarray) -> np.ndarray:
        """The ``shape`` grid of factors read out of the buffer ``flat``."""
        rows, cols = self.shape
        index = np.arange(rows)[:, None] * self.strides[0] + np.arange(cols)[None, :] * self.strides[1]
        grid: np.ndarray = np.asarray(flat, dtype=np.float64).reshape(-1)[index]
        return grid

    def factors(self, flat: np.ndarray, rows: np.ndarray, cols: int) -> np.ndarray:
        """The factor of every element of the operand's rows ``rows`` (indices), each ``cols`` long."""
        per_row = self.grid(flat)[np.asarray(rows, dtype=np.int64) // self.block[0]]
        return np.repeat(per_row, self.block[1], axis=1)[:, :cols]

    def expand(self, flat: np.ndarray, rows: int, cols: int) -> np.ndarray:
        """The factor of every element of the ``rows×cols`` operand."""
        return self.factors(flat, np.arange(rows), cols)


def _ceil(x: int, y: int) -> int:
    return -(-x // y)


def scale_layout(scaling: Scaling, role: Literal["a", "w"], rows: int, cols: int) -> ScaleLayout:
    """The layout of the factors of the activations (``role="a"``, ``m×k``) or the weights (``"w"``, ``n×k``).

    Measured against a float64 reference on the H200 (``tools/gpu_host/fp8_probe.py``): 1×128 block factors are
    outer-contiguous (the factors of one K-block for every row, then the next block); 128×128 block factors are
    K-contiguous, each row of blocks padded to a multiple of 4 factors (16 bytes).
    """
    mode = SCALE_MODES[(scaling, role)]
    k_blocks = _ceil(cols, BLOCK)
    if scaling == "tensor":
        return ScaleLayout(mode, (1, 1), (0, 0), (rows, cols))
    if scaling == "outer":
        return ScaleLayout(mode, (rows, 1), (1, 0), (1, cols))
    if role == "a":
        return ScaleLayout(mode, (rows, k_blocks), (1, rows), (1, BLOCK))
    padded = _ceil(k_blocks, 4) * 4
    return ScaleLayout(mode, (_ceil(rows, BLOCK), k_blocks), (padded, 1), (BLOCK, BLOCK))


def plan(m: int, n: int, k: int, recipe: Fp8Recipe, *, a: blas_args.Operand | None = None,
         w: blas_args.Operand | None = None, c: blas_args.Operand | None = None) -> blas_args.GemmCall:
    """The cuBLASLt call of ``C[m×n] = A[m×k]·W[n×k]ᵀ``, or an ``Fp8LayoutError`` naming the rule it breaks.

    ``a``, ``w``, ``c`` describe the operands as stored (``blas_args.describe_matrix``); by default A and W are
    tight row-major and C tight row-major.
    """
    a = a or blas_args.Operand("A", m, k)
    w = w or blas_args.Operand("W", n, k)
    c = c or blas_args.Operand("C", m, n)
    call = blas_args.plan_gemm(a, w, c, trans_b=True)
    if not call.swapped or (call.transa, call.transb) != ("T", "N"):
        raise Fp8LayoutError(
            f"FP8 on sm_90 reads both operands K-contiguous (cuBLASLt's 'TN' layout), but A is {a.order}-major and "
            f"W {w.order}-major with C {c.order}-major: store A as m×k and W as n×k row-major (a linear layer's "
            f"weights), and C row-major")
    if k % ALIGNMENT_BYTES:
        raise Fp8LayoutError(
            f"K = {k} is not a multiple of {ALIGNMENT_BYTES}: cuBLASLt's FP8 kernels need K-contiguous rows of a "
            f"multiple of {ALIGNMENT_BYTES} bytes (CUBLAS_STATUS_NOT_SUPPORTED otherwise); pad K with zeros to "
            f"{_ceil(k, ALIGNMENT_BYTES) * ALIGNMENT_BYTES}")
    for name, ld in (("A", call.ldb), ("W", call.lda)):
        if ld % ALIGNMENT_BYTES:
            raise Fp8LayoutError(f"{name}'s rows are {ld} bytes apart: FP8 operands need a multiple of "
                                 f"{ALIGNMENT_BYTES} bytes; pad the leading dimension")
    out_bytes = OUTPUT_TYPES[recipe.out][1]
    if (call.ldc * out_bytes) % ALIGNMENT_BYTES:
        step = ALIGNMENT_BYTES // out_bytes
        raise Fp8LayoutError(
            f"C's rows are {call.ldc} × {out_bytes} B = {call.ldc * out_bytes} bytes apart: cuBLASLt's FP8 kernels "
            f"write rows of a multiple of {ALIGNMENT_BYTES} bytes, so with a {recipe.out} output n (the output "
            f"features) must be a multiple of {step} (CUBLAS_STATUS_NOT_SUPPORTED otherwise); pad n to "
            f"{_ceil(call.ldc, step) * step}")
    if recipe.scaling == "block" and m % BLOCK_TOKENS_MULTIPLE:
        raise Fp8LayoutError(
            f"m = {m}: block scaling needs m (the tokens) to be a multiple of {BLOCK_TOKENS_MULTIPLE} on sm_90 "
            f"(CUBLAS_STATUS_NOT_SUPPORTED otherwise); pad the batch to "
            f"{_ceil(m, BLOCK_TOKENS_MULTIPLE) * BLOCK_TOKENS_MULTIPLE} tokens or use outer (per-token) scaling")
    return call
