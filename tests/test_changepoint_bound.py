"""The change-point target's power bound (tools/generators/changepoint_bound.py) against scipy and a seeded
simulation."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tools.generators.changepoint_bound import (change_point_bound, noise_limit, power_bound, simulated_power,
                                               t_test_bound)


@pytest.fixture(scope="module")
def stats() -> Any:
    """SciPy's distributions, imported by the tests that use them (half a second a collection need not pay)."""
    return pytest.importorskip("scipy.stats", reason="SciPy is not installed: pip install -e '.[test]'")


@pytest.mark.long
@pytest.mark.parametrize("sigma", [0.005, 0.01, 0.015, 0.02])
def test_the_bound_is_the_neyman_pearson_power_and_a_simulation_of_that_test_agrees(sigma: float, stats: Any) -> None:
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


def test_the_change_point_bound_allows_the_three_nights_false_alarms_and_stays_below_95_percent_above_1_2_percent(
        stats: Any) -> None:
    assert change_point_bound(0.03, 0.015) == pytest.approx(stats.norm.cdf(0.03 / 0.015 * math.sqrt(3)
                                                                            - stats.norm.isf(3e-3)), abs=1e-12)
    assert change_point_bound(0.03, 0.015) == pytest.approx(0.763, abs=0.001)
    assert change_point_bound(0.03, 0.02) == pytest.approx(0.440, abs=0.001)
    assert noise_limit(false_rate=3e-3) == pytest.approx(0.01183, abs=1e-4)


def test_the_t_test_bound_is_what_a_seeded_t_test_with_the_runs_before_achieves(stats: Any) -> None:
    rng = np.random.default_rng(5)
    before, trials, sigma = 30, 100_000, 0.01
    prior = 1 + sigma * rng.standard_normal((trials, before))
    after = 0.97 + sigma * rng.standard_normal((trials, 3))
    t = (prior.mean(axis=1) - after.mean(axis=1)) / (prior.std(axis=1, ddof=1) * math.sqrt(1 / 3 + 1 / before))
    simulated = float(np.mean(t > stats.t.isf(1e-3, before - 1)))
    assert t_test_bound(0.03, sigma, before) == pytest.approx(simulated, abs=0.004)
    assert t_test_bound(0.03, sigma, before) < t_test_bound(0.03, sigma, 100) < power_bound(0.03, sigma)
    assert t_test_bound(0.03, sigma, 10 ** 6) == pytest.approx(power_bound(0.03, sigma), abs=1e-3)
    with pytest.raises(ValueError, match="2 runs before"):
        t_test_bound(0.03, sigma, 1)
