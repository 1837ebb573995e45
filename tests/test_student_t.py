"""Student's t upper tail (gpuperf/verdict/student_t.py): the closed forms of 1 and 2 degrees of freedom, the
symmetry, the deep tails the change-point tests decide on, and SciPy's ``stdtr`` where SciPy is installed."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuperf.verdict.student_t import regularized_beta, t_upper_tail

T_VALUES = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
DEGREES = st.one_of(st.integers(1, 10**7), st.floats(min_value=0.05, max_value=1e9))


@given(T_VALUES)
def test_one_degree_of_freedom_is_the_cauchy_tail(t: float) -> None:
    # atan2(1, t) = π/2 − atan(t), without the cancellation of the difference far in the tail
    assert t_upper_tail(t, 1) == pytest.approx(math.atan2(1, t) / math.pi, rel=1e-13)


@given(T_VALUES)
def test_two_degrees_of_freedom_have_their_closed_form(t: float) -> None:
    # P(T > t) = ½ (1 − t / √(2 + t²)), written as 1 / (√(2+t²) (√(2+t²) + t)) for t > 0 so it does not cancel
    root = math.sqrt(2 + t * t)
    expected = 1 / (root * (root + t)) if t > 0 else 0.5 * (1 - t / root)
    assert t_upper_tail(t, 2) == pytest.approx(expected, rel=1e-13)


@given(T_VALUES, DEGREES)
def test_the_two_tails_add_to_one_and_the_tail_falls_with_t(t: float, df: float) -> None:
    upper = t_upper_tail(t, df)
    assert 0.0 <= upper <= 1.0
    assert upper + t_upper_tail(-t, df) == pytest.approx(1.0, abs=1e-15)
    assert t_upper_tail(abs(t) + 1.0, df) <= t_upper_tail(abs(t), df)


def test_a_great_many_degrees_of_freedom_give_the_normal_tail() -> None:
    for z in (0.5, 1.96, 3.0, 6.0):
        assert t_upper_tail(z, 1e12) == pytest.approx(0.5 * math.erfc(z / math.sqrt(2)), rel=1e-9)


def test_a_deep_tail_keeps_its_relative_precision() -> None:
    """A thousand-run step's p-value near 1e-286 is exact (the values: mpmath at 50 digits), not rounded to 0 as
    1 − (1 − p) would be; below the smallest double (1e-333 at t = 60) it is 0."""
    assert t_upper_tail(37.0, 998) == pytest.approx(1.1508713476006942e-189, rel=1e-12)
    assert t_upper_tail(52.0, 998) == pytest.approx(1.2180357424809216e-286, rel=1e-12)
    assert t_upper_tail(60.0, 998) == 0.0


def test_the_edges() -> None:
    assert t_upper_tail(0.0, 5) == 0.5
    assert t_upper_tail(math.inf, 5) == 0.0 and t_upper_tail(-math.inf, 5) == 1.0
    assert math.isnan(t_upper_tail(math.nan, 5))
    assert regularized_beta(0.0, 1.0, 2.0, 3.0) == 0.0 and regularized_beta(1.0, 0.0, 2.0, 3.0) == 1.0
    for df in (0, -1, math.nan):
        with pytest.raises(ValueError, match="degrees of freedom must be > 0"):
            t_upper_tail(1.0, df)


DEGREES_GRID = [0.5, 1, 2, 3, 4, 5, 7, 10, 30, 99, 100, 101, 1000, 10**4, 10**5, 10**6, 10**8]
T_GRID = [0.0, 1e-3, 0.1, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 8, 12, 20, 37, 100, 1e3, 1e5]


@pytest.mark.parametrize("df", DEGREES_GRID)
def test_scipy_agrees_from_the_centre_to_the_deepest_tail_a_double_holds(df: float) -> None:
    special = pytest.importorskip("scipy.special", reason="SciPy is not installed: pip install scipy")
    for t in T_GRID:
        for signed in (t, -t):
            expected = float(special.stdtr(df, -signed))
            if expected < 1e-300:  # SciPy flushes subnormal tails to 0; the function gives them, tiny
                assert t_upper_tail(signed, df) < 1e-290
                continue
            assert t_upper_tail(signed, df) == pytest.approx(expected, rel=1e-12), (df, signed)


@given(st.floats(min_value=-60, max_value=60), st.integers(1, 10**6))
def test_scipy_agrees_on_drawn_values(t: float, df: int) -> None:
    special = pytest.importorskip("scipy.special", reason="SciPy is not installed: pip install scipy")
    # at one degree of freedom SciPy's stdtr is off by up to 2.4e-9 near t = 0 (t = 1.1e-8: 0.4999999953 for
    # 0.4999999963), so the closed form is the reference there; elsewhere SciPy agrees within 2.4e-13 relative
    expected = math.atan2(1, t) / math.pi if df == 1 else float(special.stdtr(df, -t))
    if expected >= 1e-300:
        assert t_upper_tail(t, df) == pytest.approx(expected, rel=1e-12)
