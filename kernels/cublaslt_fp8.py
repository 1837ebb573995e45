"""FP8 GEMMs through cuBLASLt (nvmath-python's low-level bindings): a linear layer's product
``C[m×n] = (s_A ⊙ A[m×k])·(s_W ⊙ W[n×k])ᵀ`` in E4M3/E5M2 with per-tensor, per-row/column or block scaling, BF16,
FP16, FP32 or FP8 output, FP32 accumulation with or without fast accumulation (``kernels.fp8_plan``).

Operands are CuPy ``uint8`` arrays of the FP8 bytes (``kernels.operands.random_fp8``), as BF16 travels as ``uint16``:
the suite needs no framework for FP8. The call is planned by ``kernels.fp8_plan.plan`` (the row-major swap: cuBLASLt's
A is W, its B is A, both K-contiguous, "TN"), so a layout the tensor cores cannot read is refused before cuBLASLt
sees it. The heuristic's candidates, and a runner for each, come from ``kernels.cublaslt.LtMatmul``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import fp8_plan
from kernels.cublaslt import REQUESTED_ALGOS, WORKSPACE_BYTES, LtError, LtMatmul, _bindings

#: Output types' storage as CuPy dtypes (BF16 and FP16 as their bits, FP8 as bytes).
OUTPUT_STORAGE: dict[str, str] = {"bf16": "uint16", "fp16": "float16", "fp32": "float32", "fp8_e4m3": "uint8",
                                  "fp8_e5m2": "uint8"}


@dataclass(frozen=True)
class Fp8Operand:
    """One FP8 operand as stored: ``data`` (``rows×cols`` ``uint8``, K along the columns), its ``fmt`` and the FP32
    buffer of its scaling factors laid out as ``layout`` says."""

    data: Any
    fmt: str
    scales: Any
    layout: fp8_plan.ScaleLayout


@dataclass(frozen=True)
class Fp8Output:
    """Where the product goes: ``data`` (``m×n``), and for an FP8 output its ``d_scale`` (one FP32, multiplied in
    before rounding) and ``amax`` (one FP32 cuBLASLt overwrites with the largest |result| before ``d_scale``)."""

    data: Any
    d_scale: Any = None
    amax: Any = None


class LtFp8Matmul(LtMatmul):
    """The heuristic's candidates for one FP8 problem and recipe, and a runner for each (``run`` enqueues on CuPy's
    current stream and never synchronises). Release with ``close()`` or a ``with`` block."""

    def __init__(self, m: int, n: int, k: int, recipe: fp8_plan.Fp8Recipe, *, requested: int = REQUESTED_ALGOS,
                 workspace_bytes: int = WORKSPACE_BYTES) -> None:
        self.recipe = recipe
        self.call = fp8_plan.plan(m, n, k, recipe)
        super().__init__(m, n, k, recipe.label, requested=requested, workspace_bytes=workspace_bytes)
        import cupy

        # With an FP8 output C has another type than D, so it cannot share D's memory (in place needs equal
        # layouts); beta = 0 never reads it.
        self._c_bits = cupy.empty((m, n), dtype=cupy.uint16) if recipe.fp8_output else None

    def __repr__(self) -> str:
        planned = f"{len(self.candidates)} candidates" if hasattr(self, "candidates") else "not planned"
        return f"LtFp8Matmul({self.m}x{self.n}x{self.k}, {self.recipe.label}, {planned})"

    @property
    def problem(self) -> str:
        return f"{self.m}x{self.n}x{self.k} {self.recipe.label}"

    def _set(self, desc: int, attribute: Any, value: int) -> None:
        """Set one attribute of the matmul descriptor ``desc`` (host memory: read when a matmul is enqueued)."""
        lt = self._lt
        array = np.array([value], dtype=lt.get_matmul_desc_attribute_dtype(attribute))
        lt.matmul_desc_set_attribute(desc, attribute, array.ctypes.data, array.nbytes)

    def _describe_problem(self, handles: dict[str, int]) -> None:
        nvmath, lt, cublas = _bindings()
        recipe, call = self.recipe, self.call
        self._alpha = np.ones(1, dtype=np.float32)
        self._beta = np.zeros(1, dtype=np.float32)
        f32 = int(nvmath.CudaDataType.CUDA_R_32F)
        desc = handles["desc"] = lt.matmul_desc_create(int(cublas.ComputeType.COMPUTE_32F), f32)
        attr = lt.MatmulDescAttribute
        self._set(desc, attr.TRANSA, int(cublas.Operation.T))
        self._set(desc, attr.TRANSB, int(cublas.Operation.N))
        self._set(desc, attr.FAST_ACCUM, int(recipe.fast_accum))
        modes = lt.MatmulMatrixScale
        # cuBLASLt's A is our W and its B our A (the swap): the weights' scale mode goes on A.
        self._set(desc, attr.A_SCALE_MODE, int(modes[fp8_plan.SCALE_MODES[(recipe.scaling, "w")]]))
        self._set(desc, attr.B_SCALE_MODE, int(modes[fp8_plan.SCALE_MODES[(recipe.scaling, "a")]]))
        # cuBLASLt's heuristic refuses vector and block scale modes without their pointers (INVALID_VALUE): until
        # ``run`` points them at an operand's factors, they point at a placeholder the size of the largest.
        import cupy

        largest = max(fp8_plan.scale_layout(recipe.scaling, "a", self.m, self.k).count,
                      fp8_plan.scale_layout(recipe.scaling, "w", self.n, self.k).count)
        self._placeholder_scales = cupy.ones(largest, dtype=cupy.float32)
        self._set(desc, attr.A_SCALE_POINTER, self._placeholder_scales.data.ptr)
        self._set(desc, attr.B_SCALE_POINTER, self._placeholder_scales.data.ptr)
        out_type = int(nvmath.CudaDataType[fp8_plan.OUTPUT_TYPES[recipe.out][0]])
        # With an FP8 output C is read in BF16 (the FP8 table of cublasLtMatmul); beta = 0 never reads it.
        c_type = int(nvmath.CudaDataType.CUDA_R_16BF) if recipe.fp8_output else out_type
        handles["layout_a"] = lt.matrix_layout_create(int(nvmath.CudaDataType[fp8_plan.FP8_TYPES[recipe.w]]),
                                                      self.k, call.m, call.lda)
        handles["layout_b"] = lt.matrix_layout_create(int(nvmath.CudaDataType[fp8_plan.FP8_TYPES[recipe.a]]),
                                                      self.k, call.n, call.ldb)
        handles["layout_c"] = lt.matrix_layout_create(c_type, call.m, call.n, call.ldc)
        handles["layout_d"] = lt.matrix_layout_create(out_type, call.m, call.n, call.ldc)

    def _check(self, name: str, array: Any, shape: tuple[int, int], dtype: str) -> None:
        self._check_operand(name, array, shape, dtype, "kernels.operands.random_fp8 / fp8_output",
                            "row-major, K-contiguous")

    def run(self, rank: int, a: Fp8Operand, w: Fp8Operand, out: Fp8Output) -> None:
        """Enqueue ``out = A·Wᵀ`` (scaled) with candidate ``rank`` on CuPy's current stream (no synchronisation)."""
        self._check_rank(rank)
        recipe = self.recipe
        self._check("A", a.data, (self.m, self.k), "uint8")
        self._check("W", w.data, (self.n, self.k), "uint8")
        self._check("C", out.data, (self.m, self.n), OUTPUT_STORAGE[recipe.out])
        if (a.fmt, w.fmt) != (recipe.a, recipe.w):
            raise ValueError(f"operands are {a.fmt} × {w.fmt} but {self!r} was planned for {recipe.a} × {recipe.w}")
        expected_a = fp8_plan.scale_layout(recipe.scaling, "a", self.m, self.k)
        expected_w = fp8_plan.scale_layout(recipe.scaling, "w", self.n, self.k)
        for name, operand, expected in (("A", a, expected_a), ("W", w, expected_w)):
            if operand.layout != expected or operand.scales.size < expected.count:
                raise ValueError(f"operand {name}'s scales are laid out for {operand.layout.mode} {operand.layout.shape}"
                                 f", expected {expected.mode} {expected.shape}: make them with the same recipe")
        if recipe.fp8_output and (out.d_scale is None or out.amax is None):
            raise ValueError(f"an {recipe.out} output needs its d_scale and amax buffers (kernels.operands.fp8_output)")
        attr = self._lt.MatmulDescAttribute
        self._set(self._desc, attr.A_SCALE_POINTER, w.scales.data.ptr)
        self._set(self._desc, attr.B_SCALE_POINTER, a.scales.data.ptr)
        if recipe.fp8_output:
            self._set(self._desc, attr.D_SCALE_POINTER, out.d_scale.data.ptr)
            self._set(self._desc, attr.AMAX_D_POINTER, out.amax.data.ptr)
        c_pointer = out.data.data.ptr if self._c_bits is None else self._c_bits.data.ptr
        self._enqueue(rank, w.data.data.ptr, a.data.data.ptr, c_pointer, out.data.data.ptr)


def measured_call(lt: LtFp8Matmul, rank: int, a: Fp8Operand, w: Fp8Operand,
                  out: Fp8Output) -> tuple[Any, tuple[Any, ...]]:
    """``(fn, operands)`` for the ``measure`` fixture: the operands as plain arrays (so cold-L2 rotation can copy
    them), and a function that runs candidate ``rank`` on whichever copies it is handed."""
    fp8_out = (out.d_scale, out.amax) if lt.recipe.fp8_output else ()

    def run(a_data: Any, a_scales: Any, w_data: Any, w_scales: Any, out_data: Any, *out_scales: Any) -> None:
        lt.run(rank, Fp8Operand(a_data, a.fmt, a_scales, a.layout), Fp8Operand(w_data, w.fmt, w_scales, w.layout),
               Fp8Output(out_data, *out_scales))

    return run, (a.data, a.scales, w.data, w.scales, out.data, *fp8_out)
