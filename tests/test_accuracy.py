"""``gpuperf.suite.accuracy``: the float64 reference and the elementwise magnitude bound.

A "kernel" here is NumPy itself computing in the path's storage precision; the harness must accept it, and
must reject a single wrong, unwritten or NaN element, naming where it is.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpuperf.suite.accuracy import (
    ROUNDING,
    assert_gemm_close,
    gemm_errors,
    magnitude,
    random_operand,
    reference_gemm,
    tolerance,
)


def _operands(seed: int, m: int, n: int, k: int, dtype: type = np.float32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return random_operand(rng, (m, k), dtype), random_operand(rng, (k, n), dtype)


@pytest.mark.parametrize(("m", "n", "k"), [(7, 5, 3), (1, 1, 1), (1, 64, 1), (33, 17, 65), (127, 129, 31),
                                           (64, 64, 2048)])
def test_correct_float32_gemm_passes(m: int, n: int, k: int) -> None:
    a, b = _operands(m * 1000 + k, m, n, k)
    assert_gemm_close(a @ b, a, b, path="fp32")  # float32 matmul: the error of a correct FP32 kernel


def test_single_corrupted_element_fails_naming_its_index() -> None:
    a, b = _operands(1, 33, 17, 65)
    out = a @ b
    out[20, 11] += np.float32(1e-2) * max(1.0, abs(float(out[20, 11])))
    with pytest.raises(AssertionError) as info:
        assert_gemm_close(out, a, b, path="fp32")
    text = str(info.value)
    assert "1 of 561 elements" in text
    assert "(20, 11)" in text
    assert "0 not finite" in text


def test_off_by_one_indexing_error_fails() -> None:
    """What a wrong leading dimension or a transposed operand looks like: O(1) errors everywhere."""
    a, b = _operands(2, 16, 16, 16)
    out = (a @ b)[:, ::-1].copy()
    with pytest.raises(AssertionError, match="outside the fp32 bound"):
        assert_gemm_close(out, a, b, path="fp32")


def test_unwritten_nan_output_fails_and_is_counted() -> None:
    a, b = _operands(3, 8, 9, 10)
    out = a @ b
    out[0, 0] = np.nan  # the poison left where the kernel never wrote
    out[7, 8] = np.nan
    out[3, 4] = np.inf
    with pytest.raises(AssertionError) as info:
        assert_gemm_close(out, a, b, path="fp32")
    text = str(info.value)
    assert "3 of 72 elements" in text
    assert "3 not finite" in text
    assert "(0, 0)" in text


def test_fully_unwritten_output_fails() -> None:
    a, b = _operands(4, 4, 4, 4)
    with pytest.raises(AssertionError, match="16 not finite"):
        assert_gemm_close(np.full((4, 4), np.nan, dtype=np.float32), a, b, path="fp32")


def test_beta_zero_ignores_nan_in_c0() -> None:
    a, b = _operands(5, 6, 7, 8)
    c0 = np.full((6, 7), np.nan)
    ref = reference_gemm(a, b, alpha=1.0, beta=0.0, c0=c0)
    assert np.isfinite(ref).all()
    assert np.isfinite(magnitude(a, b, beta=0.0, c0=c0)).all()
    assert_gemm_close(a @ b, a, b, path="fp32", beta=0.0, c0=c0)


def test_beta_nonzero_reference_and_check() -> None:
    a, b = _operands(6, 5, 4, 3)
    c0 = random_operand(np.random.default_rng(60), (5, 4))
    alpha, beta = 1.5, -0.75
    ref = reference_gemm(a, b, alpha=alpha, beta=beta, c0=c0)
    expected = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)
    np.testing.assert_allclose(ref, expected, rtol=1e-15)
    out = (np.float32(alpha) * (a @ b) + np.float32(beta) * c0).astype(np.float32)
    assert_gemm_close(out, a, b, path="fp32", alpha=alpha, beta=beta, c0=c0)
    # forgetting the β·C0 term is caught
    with pytest.raises(AssertionError):
        assert_gemm_close((np.float32(alpha) * (a @ b)).astype(np.float32), a, b, path="fp32",
                          alpha=alpha, beta=beta, c0=c0)


def test_beta_nonzero_without_c0_raises() -> None:
    a, b = _operands(7, 2, 2, 2)
    with pytest.raises(ValueError, match="c0"):
        reference_gemm(a, b, beta=1.0)


def test_magnitude_includes_beta_term() -> None:
    a = np.array([[1.0, -2.0]])
    b = np.array([[3.0], [4.0]])
    c0 = np.array([[-10.0]])
    assert magnitude(a, b, alpha=-2.0, beta=0.5, c0=c0)[0, 0] == pytest.approx(2.0 * (3.0 + 8.0) + 0.5 * 10.0)


def test_batched_operands() -> None:
    rng = np.random.default_rng(8)
    a = random_operand(rng, (4, 9, 5))
    b = random_operand(rng, (4, 5, 6))
    out = np.matmul(a, b)
    assert_gemm_close(out, a, b, path="fp32")
    out[2, 8, 5] = 0.0
    with pytest.raises(AssertionError, match=r"\(2, 8, 5\)"):
        assert_gemm_close(out, a, b, path="fp32")


def test_wrong_output_shape_fails() -> None:
    a, b = _operands(9, 4, 5, 6)
    with pytest.raises(AssertionError, match="shape"):
        assert_gemm_close(np.zeros((5, 4), np.float32), a, b, path="fp32")


def test_fp16_products_pass_their_bound_and_not_the_fp32_one() -> None:
    a, b = _operands(10, 64, 64, 512, np.float16)
    out = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)  # FP32 accumulate, FP16 out
    assert_gemm_close(out, a, b, path="fp16")
    err, bound = gemm_errors(out, a, b, path="fp32")
    assert (err > bound).any()  # the FP16 output rounding alone exceeds 1e-5


def test_tf32_like_rounding_passes_the_tf32_bound() -> None:
    a, b = _operands(11, 32, 32, 1024)

    def to_tf32(x: np.ndarray) -> np.ndarray:  # keep 10 explicit mantissa bits (truncate)
        truncated: np.ndarray = (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return truncated

    out = to_tf32(a) @ to_tf32(b)
    assert_gemm_close(out, a, b, path="tf32")
    with pytest.raises(AssertionError):
        assert_gemm_close(out, a, b, path="fp32")


@pytest.mark.parametrize("path", ["tf32", "fp16", "fp16-acc16", "bf16", "fp64"])
def test_tolerance_grows_with_k_for_accumulating_paths(path: str) -> None:
    assert tolerance(path, 4096) > tolerance(path, 64) > tolerance(path, 1)


def test_fp32_tolerance_is_the_spec_constant() -> None:
    assert tolerance("fp32", 1) == tolerance("fp32", 8192) == 1e-5


def test_tolerance_values_follow_the_derivations() -> None:
    assert tolerance("tf32", 1000) == pytest.approx(2 * (2 * 2**-10 + 1000 * 2**-24))
    assert tolerance("fp16", 1000) == pytest.approx(2 * (2**-11 + 1000 * 2**-24))
    assert tolerance("bf16", 0) == pytest.approx(2 * 2**-8)
    assert tolerance("fp64", 100) == pytest.approx(4 * 100 * 2**-53)
    # ordering a reader expects: fp64 ≪ fp32 < tf32, fp16 < bf16 at a moderate k
    assert tolerance("fp64", 256) < tolerance("fp32", 256) < tolerance("fp16", 256) < tolerance("bf16", 256)
    assert tolerance("fp32", 256) < tolerance("tf32", 256)


def test_unknown_path_raises_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="fp8") as info:
        tolerance("fp8", 16)
    assert "fp32" in str(info.value)
    a, b = _operands(12, 2, 2, 2)
    with pytest.raises(ValueError, match="no rounding model"):
        assert_gemm_close(a @ b, a, b, path="int8")


def test_every_rounding_model_is_positive() -> None:
    for path, model in ROUNDING.items():
        assert model.coefficient(1) > 0, path


def test_random_operand_shape_dtype_range_and_no_zeros() -> None:
    x = random_operand(np.random.default_rng(13), (300, 200))
    assert x.shape == (300, 200)
    assert x.dtype == np.float32
    assert np.all(x != 0.0)
    assert np.all((x >= -1.0) & (x <= 1.0))
    assert x.min() < -0.9 and x.max() > 0.9  # spans the range
    assert np.unique(x).size > 59_000  # not a constant fill


def test_random_operand_is_reproducible_per_seed() -> None:
    first = random_operand(np.random.default_rng(42), (10, 10))
    again = random_operand(np.random.default_rng(42), (10, 10))
    other = random_operand(np.random.default_rng(43), (10, 10))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_random_operand_replaces_exact_zero_draws() -> None:
    class ZeroDraws:
        def uniform(self, low: float, high: float, size: tuple[int, ...]) -> np.ndarray:
            return np.array([0.0, 0.25, -0.0, -0.5])

    x = random_operand(ZeroDraws(), (4,))  # type: ignore[arg-type]
    assert np.all(x != 0.0)


def test_random_operand_has_no_zeros_in_a_narrow_dtype() -> None:
    """SPEC: inputs are never zeros. A draw below half of FP16's smallest subnormal (|x| < 2⁻²⁵ ≈ 3e-8)
    rounds to exactly 0 when cast; with 16 M draws that happens about every other matrix. Seed 2 gives two
    zeros in a 4096×4096 FP16 operand, at (590, 2563) and (1185, 545)."""
    x = random_operand(np.random.default_rng(2), (4096, 4096), np.float16)
    assert x.dtype == np.float16
    zeros = np.argwhere(x == 0).tolist()
    assert zeros == [], f"exact zeros at {zeros}"


def test_random_operand_tiny_draws_do_not_underflow_to_zero_in_fp16() -> None:
    class TinyDraws:
        def uniform(self, low: float, high: float, size: tuple[int, ...]) -> np.ndarray:
            return np.array([1e-9, -2e-8, 0.5, -0.75])

    x = random_operand(TinyDraws(), (4,), np.float16)  # type: ignore[arg-type]
    assert np.all(x != 0.0), x


def test_assert_within_passes_inside_the_bound_and_names_the_worst_element_outside() -> None:
    from gpuperf.suite.accuracy import assert_within

    rng = np.random.default_rng(7)
    ref = rng.uniform(0.5, 1.0, size=(4, 5))
    assert_within(ref * (1 + 1e-4), ref, 2e-4 * ref)
    bad = ref.copy()
    bad[2, 3] += 0.1
    bad[0, 0] = np.nan
    with pytest.raises(AssertionError, match=r"softmax: 2 of 20 elements outside the bound; 1 not finite") as info:
        assert_within(bad, ref, 1e-3, "softmax")
    assert "worst at (0, 0)" in str(info.value)
    with pytest.raises(AssertionError, match="shape"):
        assert_within(ref[:2], ref, 1.0)
