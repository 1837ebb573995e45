"""Student's t upper tail, exact to double precision, so the change-point t-tests need no SciPy.

P(T > t) for ν degrees of freedom is ½·I_x(ν/2, ½) with x = ν / (ν + t²) for t ≥ 0 (and 1 minus it below 0),
where I is the regularized incomplete beta function (Abramowitz & Stegun 26.7.1). I_x(a, b) is taken as Cephes'
``incbet`` takes it (S. Moshier, ``incbet.c``): on the side of the symmetry I_x(a, b) = 1 − I_{1−x}(b, a) where x
is below a / (a + b), as the front factor x^a (1−x)^(b−1) / (a·B(a, b)) times the continued fraction in
z = x / (1 − x) (Cephes' "expansion #2"), evaluated by the modified Lentz method (Numerical Recipes, 3rd ed.,
§5.2). Unlike the fraction in x (A&S 26.5.8), whose first terms cancel to a few digits when ν is large and t
moderate (a 1e-7 error at ν = 10⁸), its terms are of moderate size everywhere, and it converges in tens of terms.

A small tail, the case a test decides on, is the directly computed side, to full relative precision: a
thousand-run step's p-value near 1e-300 is right, not rounded to 0. 1 − x is passed in as t² / (ν + t²), never
subtracted, and ln B(a, b) for a large argument comes from Stirling's series. tests/test_student_t.py holds it
to ``scipy.special.stdtr`` for ν from 1 to 10⁸ and tails down to 1e-300.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math

#: The continued fraction stops when a term changes it by less than this (relative): a few units in the last
#: place of a double (exactly 0 may never come: the product of two rounded factors jitters by one unit).
_EPSILON = 3e-16
#: Far more terms than any ν up to 10¹² needs; reaching it would be a bug, so it raises.
_MAX_TERMS = 100_000
#: Lentz's guard against a zero denominator.
_TINY = 1e-300
#: Above this, Stirling's series to the x⁻⁷ term is exact to double precision (the next term, 1/(1188·x⁹), is
#: below 1e-21 there).
_STIRLING_FROM = 100.0


def t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` > 0 degrees of freedom (``stdtr(df, -t)`` in SciPy's terms)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    t2 = t * t
    half_tail = 0.5 * regularized_beta(df / (df + t2), t2 / (df + t2), df / 2, 0.5)
    return half_tail if t >= 0 else 1.0 - half_tail


def regularized_beta(x: float, one_minus_x: float, a: float, b: float) -> float:
    """I_x(a, b) for a, b > 0 and x in [0, 1], with ``one_minus_x`` = 1 − x computed by the caller."""
    if x <= 0.0:
        return 0.0
    if one_minus_x <= 0.0:
        return 1.0
    if x <= a / (a + b):
        return _by_fraction(x, one_minus_x, a, b)
    return 1.0 - _by_fraction(one_minus_x, x, b, a)


def _by_fraction(x: float, one_minus_x: float, a: float, b: float) -> float:
    """I_x(a, b) = x^a (1−x)^(b−1) / (a·B(a, b)) · F(z), x ≤ a / (a + b). The powers are taken in logarithms
    (each alone may underflow where the product does not), each from whichever of x and 1 − x is the smaller."""
    log_x = math.log1p(-one_minus_x) if one_minus_x < 0.5 else math.log(x)
    log_one_minus_x = math.log1p(-x) if x < 0.5 else math.log(one_minus_x)
    front = math.exp(a * log_x + (b - 1) * log_one_minus_x - _log_beta(a, b)) / a
    return front * _fraction(x / one_minus_x, a, b)


def _fraction(z: float, a: float, b: float) -> float:
    """F(z) = 1 / G, G = 1 + d₁ / (1 + d₂ / (1 + …)) with, for n = 0, 1, …,
    d₂ₙ₊₁ = −z (a+n)(b−1−n) / ((a+2n)(a+2n+1)) and d₂ₙ₊₂ = z (n+1)(a+b+n) / ((a+2n+1)(a+2n+2)) (Cephes'
    ``incbd``); G by the modified Lentz method."""
    g, c, d = 1.0, 1.0, 0.0
    for n in range(_MAX_TERMS):
        for numerator in (-z * (a + n) * (b - 1 - n) / ((a + 2 * n) * (a + 2 * n + 1)),
                          z * (n + 1) * (a + b + n) / ((a + 2 * n + 1) * (a + 2 * n + 2))):
            d = 1.0 / _guarded(1.0 + numerator * d)
            c = _guarded(1.0 + numerator / c)
            g *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            return 1.0 / g
    raise ArithmeticError(f"the incomplete beta's continued fraction did not converge for z={z}, a={a}, b={b}")


def _guarded(denominator: float) -> float:
    """Lentz's guard: a denominator of exactly 0 is replaced by a tiny one (the fraction then recovers)."""
    return denominator if abs(denominator) >= _TINY else _TINY


def _log_beta(a: float, b: float) -> float:
    """ln B(a, b). For a large argument, ln Γ(big) − ln Γ(big + small) is taken from Stirling's series rather
    than as the difference of two values near big·ln(big), which would lose big·ln(big)·2⁻⁵³ (1e-7 at ν = 10⁸)."""
    small, big = sorted((a, b))
    if big < _STIRLING_FROM:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return (math.lgamma(small) - (big - 0.5) * math.log1p(small / big) - small * math.log(big + small) + small
            + _stirling_correction(big) - _stirling_correction(big + small))


def _stirling_correction(x: float) -> float:
    """ln Γ(x) − ((x − ½) ln x − x + ½ ln 2π) for x ≥ 100 (A&S 6.1.41)."""
    inverse, inverse_square = 1.0 / x, 1.0 / (x * x)
    return inverse * (1 / 12 - inverse_square * (1 / 360 - inverse_square * (1 / 1260 - inverse_square / 1680)))


def t_quantile(upper_tail: float, df: float) -> float:
    """The t whose upper tail P(T > t) is ``upper_tail`` (0 < upper_tail < 1), for ``df`` > 0: a confidence
    interval's half-width in standard errors (``t_quantile(0.025, n - 1)`` for 95 %). Bisection on the monotone
    tail: 200 halvings of the bracket reach the spacing of doubles, and the tail above is exact."""
    if not 0.0 < upper_tail < 1.0:
        raise ValueError(f"an upper tail is a probability strictly between 0 and 1, got {upper_tail}")
    if upper_tail == 0.5:
        return 0.0
    if upper_tail > 0.5:
        return -t_quantile(1.0 - upper_tail, df)
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > upper_tail:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if t_upper_tail(middle, df) > upper_tail:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)
