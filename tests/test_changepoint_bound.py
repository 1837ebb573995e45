"""The change-point target's power bound (tools/changepoint_bound.py) against scipy and a seeded simulation."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from tools.changepoint_bound import noise_limit, power_bound, simulated_power


@pytest.mark.parametrize("sigma", [0.005, 0.01, 0.015, 0.02])
def test_the_bound_is_the_neyman_pearson_power_and_a_simulation_of_that_test_agrees(sigma: float) -> None:
    expected = stats.norm.cdf(0.03 / sigma * math.sqrt(3) - stats.norm.isf(1e-3))
    assert power_bound(0.03, sigma) == pytest.approx(expected, abs=1e-12)
    power, false = simulated_power(0.03, sigma, trials=200_000, seed=4)
    assert power == pytest.approx(expected, abs=0.004)  # 4 standard errors at most
    assert false == pytest.approx(1e-3, abs=4e-4)


def test_the_bound_falls_below_95_percent_at_the_noise_limit_and_not_before() -> None:
    limit = noise_limit()
    assert limit == pytest.approx(0.01097, abs=1e-4)
    assert power_bound(0.03, limit) == pytest.approx(0.95, abs=1e-9)
    assert power_bound(0.03, 0.99 * limit) > 0.95 > power_bound(0.03, 1.01 * limit)
    assert power_bound(0.03, 0.02) == pytest.approx(0.311, abs=0.001)
    with pytest.raises(ValueError, match="false rate"):
        power_bound(0.03, 0.01, false_rate=0)
