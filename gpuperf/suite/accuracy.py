"""Correctness against a float64 reference, with error bounds that follow from each path's rounding.

Every check is elementwise against the magnitude of the terms that make up each output:

    |C − C_ref| ≤ tol(path, k) · (|α|·(|A|·|B|) + |β|·|C0|)

where ``C_ref`` is computed in float64 from the *stored* operands (so FP16/BF16 inputs carry no input
rounding of their own) and ``|A|·|B|`` is the product of the absolute matrices. This is the standard
forward error bound of a dot product, ``|fl(aᵀb) − aᵀb| ≤ γ_k·|a|ᵀ|b|`` with ``γ_k ≈ k·u`` (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1), which neither hides a wrong element
behind a large norm nor fails on cancellation.

Coefficients, with ``u`` the unit roundoff of each stage:
- ``fp32``: a fixed ``1e-5`` relative to the magnitude bound. For the sizes checked (k ≤ a few thousand) the realistic error,
  ``~√k·2⁻²⁴``, is well inside it; an indexing or ld error is off by O(1).
- ``fp64``: ``k·2⁻⁵³`` with a ×4 margin.
- ``tf32``: each FP32 input is reduced to TF32 (10 explicit mantissa bits; truncation or rounding,
  ``u_in ≤ 2⁻¹⁰``) before the multiply, so a product is off by ``≤ 2·u_in``; accumulation in FP32 adds
  ``k·2⁻²⁴``. Total ``2·2⁻¹⁰ + k·2⁻²⁴`` (≈ 2e-3 + k·6e-8).
- ``fp16`` (FP32 accumulate): exact inputs, ``k·2⁻²⁴`` accumulation, then the FP16 output is rounded
  (``2⁻¹¹`` relative to |C| ≤ the magnitude): ``2⁻¹¹ + k·2⁻²⁴``.
- ``fp16-acc16`` (``COMPUTE_16F``): accumulation in FP16 itself, ``(k + 1)·2⁻¹¹``.
- ``bf16`` (FP32 accumulate): BF16 output rounding ``2⁻⁸`` plus ``k·2⁻²⁴``.
Every coefficient other than the fixed FP32 one carries a ×2 safety margin over the derivation.

FP8 (``fp8_tolerance``, Hopper through cuBLASLt; derivation and measured errors in evidence/fp8.md): the operands'
values are exact (the reference multiplies the decoded bytes times their scaling factors) and a product of two
FP8 values is exact. Hopper's FP8 tensor-core instruction sums ``FP8_MMA_K`` = 32 products into an accumulator
that keeps about 14 bits (DeepSeek-V3 technical report, §3.3.2), so each such step is off by ``≤ 2⁻¹³`` of the
magnitude it adds. Without fast accumulation cuBLASLt promotes the partial sums to FP32 at least every
``FP8_PROMOTION_K`` = 128 elements, so at most 4 steps compound before an FP32 addition (``k·2⁻²⁴``); with fast
accumulation the whole sum stays in the tensor cores: ``⌈k/32⌉`` steps. Scaling by the factors adds two FP32
roundings, the output its own rounding (``2⁻⁸`` BF16, ``2⁻¹¹`` FP16, ``2⁻²⁴`` FP32, ``2⁻⁴`` E4M3, ``2⁻³`` E5M2) and, for
an FP8 output, half its smallest subnormal (divided by ``d_scale``) near zero. ×2 margin as above.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuperf.vocabulary import Precision


@dataclass(frozen=True)
class RoundingModel:
    """``tol(k) = margin · (fixed + per_term · k)``, or ``fixed`` alone when ``per_term`` is 0 and margin 1."""

    fixed: float
    per_term: float
    margin: float

    def coefficient(self, k: int) -> float:
        return self.margin * (self.fixed + self.per_term * k)


U32 = 2.0**-24
U64 = 2.0**-53
U_TF32_IN = 2.0**-10
U_FP16 = 2.0**-11
U_BF16 = 2.0**-8

#: The FP16 path that also accumulates in FP16 (``gemmEx`` with ``COMPUTE_16F``): a path, not a precision of its own.
FP16_ACC16 = f"{Precision.FP16}-acc16"
#: Path name → rounding model. See the module docstring for each derivation.
ROUNDING: dict[str, RoundingModel] = {
    Precision.FP32: RoundingModel(fixed=1e-5, per_term=0.0, margin=1.0),
    Precision.FP64: RoundingModel(fixed=0.0, per_term=U64, margin=4.0),
    Precision.TF32: RoundingModel(fixed=2 * U_TF32_IN, per_term=U32, margin=2.0),
    Precision.FP16: RoundingModel(fixed=U_FP16, per_term=U32, margin=2.0),
    FP16_ACC16: RoundingModel(fixed=U_FP16, per_term=U_FP16, margin=2.0),
    Precision.BF16: RoundingModel(fixed=U_BF16, per_term=U32, margin=2.0),
}


def tolerance(path: str, k: int) -> float:
    """The bound coefficient for ``path`` at inner dimension ``k``."""
    try:
        return ROUNDING[path].coefficient(k)
    except KeyError as exc:
        raise ValueError(f"no rounding model for path {path!r}: use one of {sorted(ROUNDING)}") from exc


#: FP8 GEMMs: the unit roundoff of each output type, the accumulator's precision and steps (module docstring).
FP8_OUTPUT_ROUNDING: dict[str, float] = {"fp32": U32, "bf16": U_BF16, "fp16": U_FP16, "fp8_e4m3": 2.0**-4,
                                         "fp8_e5m2": 2.0**-3}
#: Half the smallest subnormal of an FP8 output: the absolute error of a result that rounds to (nearly) zero.
FP8_UNDERFLOW: dict[str, float] = {"fp8_e4m3": 2.0**-10, "fp8_e5m2": 2.0**-17}
U_FP8_MMA = 2.0**-13
FP8_MMA_K = 32
FP8_PROMOTION_K = 128


def fp8_tolerance(k: int, out: str, fast_accum: bool) -> float:
    """The bound coefficient of an FP8 GEMM at inner dimension ``k`` writing ``out`` (see the module docstring)."""
    try:
        rounding = FP8_OUTPUT_ROUNDING[out]
    except KeyError as exc:
        raise ValueError(f"no FP8 output {out!r}: use one of {sorted(FP8_OUTPUT_ROUNDING)}") from exc
    steps = -(-k // FP8_MMA_K) if fast_accum else FP8_PROMOTION_K // FP8_MMA_K
    return 2.0 * (rounding + steps * U_FP8_MMA + (k + 2) * U32)


def assert_fp8_gemm_close(out: np.ndarray, a: np.ndarray, w: np.ndarray, *, out_type: str, fast_accum: bool,
                          d_scale: float = 1.0, amax: float | None = None) -> None:
    """Fail unless an FP8 product ``out ≈ d_scale·(A·Wᵀ)`` is within ``fp8_tolerance`` everywhere (and ``amax``, when
    given, within the accumulation's bound of the largest |A·Wᵀ|).

    ``a`` (``m×k``) and ``w`` (``n×k``) are the dequantised operands (decoded values times their factors), ``out``
    the decoded output.
    """
    k = np.shape(a)[-1]
    ref = reference_gemm(a, np.swapaxes(w, -1, -2))
    scale = magnitude(a, np.swapaxes(w, -1, -2))
    bound = fp8_tolerance(k, out_type, fast_accum) * scale * d_scale + FP8_UNDERFLOW.get(out_type, 0.0)
    assert_within(out, ref * d_scale, bound, what=f"FP8 GEMM ({out_type} output, k={k}, "
                                                  f"{'fast' if fast_accum else 'FP32-promoted'} accumulation)")
    if amax is not None:
        assert_within(np.array([amax]), np.array([np.abs(ref).max()]),
                      np.array([fp8_tolerance(k, "fp32", fast_accum) * scale.max()]), what="FP8 GEMM's amax")


def _f64(x: object) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def reference_gemm(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, beta: float = 0.0,
                   c0: np.ndarray | None = None) -> np.ndarray:
    """``α·A·B + β·C0`` in float64 (batched when the operands are 3-D). ``β = 0`` ignores C0 (it may be NaN)."""
    out = alpha * np.matmul(_f64(a), _f64(b))
    if beta != 0.0:
        if c0 is None:
            raise ValueError("beta ≠ 0 needs the original C (c0) for the reference")
        out = out + beta * _f64(c0)
    return np.asarray(out, dtype=np.float64)


def magnitude(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, beta: float = 0.0,
              c0: np.ndarray | None = None) -> np.ndarray:
    """``|α|·(|A|·|B|) + |β|·|C0|``: the scale each output element's error is measured against."""
    out = abs(alpha) * np.matmul(np.abs(_f64(a)), np.abs(_f64(b)))
    if beta != 0.0 and c0 is not None:
        out = out + abs(beta) * np.abs(_f64(c0))
    return np.asarray(out, dtype=np.float64)


def gemm_errors(out: np.ndarray, a: np.ndarray, b: np.ndarray, *, path: str, alpha: float = 1.0,
                beta: float = 0.0, c0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise ``(|C − C_ref|, bound)``; NaN in the output gives an infinite error."""
    ref = reference_gemm(a, b, alpha, beta, c0)
    got = _f64(out)
    if got.shape != ref.shape:
        raise AssertionError(f"output shape {got.shape} != reference shape {ref.shape}")
    err = np.abs(got - ref)
    err[~np.isfinite(got)] = np.inf
    k = np.shape(a)[-1]
    bound = tolerance(path, k) * magnitude(a, b, alpha, beta, c0)
    return err, bound


def assert_gemm_close(out: np.ndarray, a: np.ndarray, b: np.ndarray, *, path: str, alpha: float = 1.0,
                      beta: float = 0.0, c0: np.ndarray | None = None) -> None:
    """Fail, naming the worst element and how many are out of bound, unless every element is in bound.

    ``a`` and ``b`` are the logical operands ``op(A)`` (``…×m×k``) and ``op(B)`` (``…×k×n``) as stored
    on the device (already in their storage precision); ``out`` is what the kernel wrote.
    """
    err, bound = gemm_errors(out, a, b, path=path, alpha=alpha, beta=beta, c0=c0)
    bad = err > bound
    if not bad.any():
        return
    got = _f64(out)
    unwritten = int(np.count_nonzero(~np.isfinite(got)))
    ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0), np.inf)
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    ref = reference_gemm(a, b, alpha, beta, c0)
    raise AssertionError(
        f"{int(bad.sum())} of {bad.size} elements outside the {path} bound "
        f"(tol {tolerance(path, np.shape(a)[-1]):.3g} × magnitude); "
        f"{unwritten} not finite (unwritten or NaN); worst at {tuple(int(i) for i in worst)}: "
        f"got {got[worst]!r}, expected {ref[worst]!r}, error {err[worst]:.3g} > bound {bound[worst]:.3g}"
    )


def random_operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype | type = np.float32
                   ) -> np.ndarray:
    """Uniform values in [-1, 1) with no exact zeros, in ``dtype`` (a NumPy dtype; BF16 is made on the GPU)."""
    values = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    values[values == 0] = 0.5  # after the cast: tiny draws underflow to zero in narrow dtypes
    return values


def assert_within(out: object, ref: object, bound: object, what: str = "output") -> None:
    """Fail, naming the worst element and how many are out of bound, unless ``|out − ref| ≤ bound`` everywhere
    (each broadcast to ``ref``'s shape; NaN or an unwritten element is never within): the check of any operation
    whose float64 reference and elementwise error bound its test derives (a softmax, an attention, a fused op)."""
    got, expected = _f64(out), _f64(ref)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape} != reference shape {expected.shape}")
    limit = np.broadcast_to(_f64(bound), expected.shape)
    err = np.abs(got - expected)
    err[~np.isfinite(got)] = np.inf
    bad = ~(err <= limit)
    if not bad.any():
        return
    worst = np.unravel_index(int(np.argmax(np.where(bad, err - limit, -np.inf))), err.shape)
    raise AssertionError(
        f"{what}: {int(bad.sum())} of {bad.size} elements outside the bound; "
        f"{int(np.count_nonzero(~np.isfinite(got)))} not finite (unwritten or NaN); worst at "
        f"{tuple(int(i) for i in worst)}: got {got[worst]!r}, expected {expected[worst]!r}, error {err[worst]:.3g} > "
        f"bound {limit[worst]:.3g}")
