"""The best any detector can do: the power bound of the change-point target, computed and simulated.

    PYTHONPATH=$PWD python3 tools/generators/changepoint_bound.py [--trials 200000] [--seed 1]

The target asks a 3 % step to be found within 3 runs after it, with at most 1 false change point per 1,000
runs of stationary noise. Give a detector more than any real one has: the level before the step and the noise σ
(relative, run to run, Gaussian) known exactly, and the step's place known, so that only "are these 3 runs lower"
is left to decide. The most powerful test of it at a false-alarm rate α (Neyman-Pearson) compares the mean of the
3 runs with the level, one-sided; a detector asked after every run may raise at most α = 1/1,000 false alarms
per run, so its power is at most

    Φ(step / σ · √runs − z_α),   z_α = Φ⁻¹(1 − α).

No method reaches 95 % above the σ at which this falls to 95 %: ``step · √runs / (z_α + z_0.95)`` (1.10 % for a
3 % step and 3 runs).

The target counts false change points, not alarms: a run of consecutive nightly alarms is one change point, so a
detector may alarm more often than once per 1,000 runs if its alarms come in runs. That does not lift the bound
much. Finding the step means a change point first reported on one of the 3 nights after it; in stationary noise
a change point is first reported on a given night with probability ≤ 1/1,000, so on one of 3 given nights with
probability ≤ 3/1,000 (their union), and the Neyman-Pearson test at α = 3/1,000 bounds every such detector:
``change_point_bound``, Φ(step / σ · √runs − z_{3α}), below 95 % from σ = 1.18 %, 76 % at 1.5 % and 44 % at 2 %.

A real check knows neither the level nor σ: it estimates both from the runs before the
step. The best test that does (the one-sided two-sample t-test, uniformly most powerful among unbiased tests of
a shift of a Gaussian mean with the variance unknown) has the power of a noncentral t, ``t_test_bound``, lower
than the first bound the fewer runs come before the step. The bound is printed for σ = 0.5, 1, 1.5 and 2 %, next to a seeded simulation of that very
test (what it says must agree with the formula to the simulation's precision).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

STEP = 0.03
RUNS_AFTER = 3
FALSE_RATE = 1e-3
TARGET = 0.95
NOISES = (0.005, 0.01, 0.015, 0.02)


def _stats() -> Any:
    """SciPy's distributions, imported on first use: half a second that importing this module (a test's
    collection) need not pay."""
    from scipy import stats

    return stats


def power_bound(step: float, sigma: float, runs: int = RUNS_AFTER, false_rate: float = FALSE_RATE) -> float:
    """The power of the one-sided Neyman-Pearson test of a drop of ``step`` (relative) in the mean of ``runs``
    runs of Gaussian noise ``sigma``, level and noise known, at the false-alarm rate ``false_rate``."""
    if step <= 0 or sigma <= 0 or runs < 1 or not 0 < false_rate < 1:
        raise ValueError("step and sigma must be > 0, runs ≥ 1 and the false rate in (0, 1)")
    z_alpha = float(_stats().norm.isf(false_rate))
    return float(_stats().norm.cdf(step / sigma * math.sqrt(runs) - z_alpha))


def change_point_bound(step: float, sigma: float, runs: int = RUNS_AFTER, false_rate: float = FALSE_RATE) -> float:
    """The power bound for a detector held to ``false_rate`` false change points per run, however its alarms
    cluster: the Neyman-Pearson power at the union of ``runs`` nights' rates, ``runs × false_rate``."""
    return power_bound(step, sigma, runs, min(runs * false_rate, 0.5))


def t_test_bound(step: float, sigma: float, before: int, runs: int = RUNS_AFTER,
                 false_rate: float = FALSE_RATE) -> float:
    """The power of the one-sided two-sample t-test of a drop of ``step`` in the mean of ``runs`` runs against
    ``before`` runs, Gaussian noise ``sigma`` estimated from those ``before`` runs (``before - 1`` degrees of
    freedom, as the detector's last runs' test has), at the false-alarm rate ``false_rate``."""
    if before < 2:
        raise ValueError("the t-test needs at least 2 runs before the step")
    power_bound(step, sigma, runs, false_rate)  # the same checks of the arguments
    df = before - 1
    shift = step / sigma / math.sqrt(1 / runs + 1 / before)
    return float(_stats().nct.sf(_stats().t.isf(false_rate, df), df, shift))


def noise_limit(step: float = STEP, runs: int = RUNS_AFTER, false_rate: float = FALSE_RATE,
                power: float = TARGET) -> float:
    """The noise σ above which ``power_bound`` is below ``power``."""
    return step * math.sqrt(runs) / float(_stats().norm.isf(false_rate) + _stats().norm.isf(1 - power))


def simulated_power(step: float, sigma: float, trials: int, seed: int, runs: int = RUNS_AFTER,
                    false_rate: float = FALSE_RATE) -> tuple[float, float]:
    """``(power, false-alarm rate)`` of that test on ``trials`` seeded draws of ``runs`` runs after a step of
    ``step`` and as many without one."""
    rng = np.random.default_rng(seed)
    threshold = 1.0 - float(_stats().norm.isf(false_rate)) * sigma / math.sqrt(runs)
    stepped = (1.0 - step) + sigma * rng.standard_normal((trials, runs))
    flat = 1.0 + sigma * rng.standard_normal((trials, runs))
    return float(np.mean(stepped.mean(axis=1) < threshold)), float(np.mean(flat.mean(axis=1) < threshold))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"a {100 * STEP:.0f} % step, {RUNS_AFTER} runs after it, ≤ {1000 * FALSE_RATE:g} false alarm per 1,000 runs "
          f"(z_α = {_stats().norm.isf(FALSE_RATE):.3f}); {args.trials} simulated trials")
    print("| noise σ | bound Φ(step/σ·√3 − z_α) | simulated | simulated false-alarm rate | t-test, 30 / 100 runs "
          "before | change-point bound Φ(step/σ·√3 − z_3α) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for sigma in NOISES:
        power, false = simulated_power(STEP, sigma, args.trials, args.seed)
        print(f"| {100 * sigma:.1f} % | {100 * power_bound(STEP, sigma):.1f} % | {100 * power:.1f} % | "
              f"{1000 * false:.2f} / 1,000 | {100 * t_test_bound(STEP, sigma, 30):.1f} % / "
              f"{100 * t_test_bound(STEP, sigma, 100):.1f} % | {100 * change_point_bound(STEP, sigma):.1f} % |")
    print(f"the bound falls below {100 * TARGET:.0f} % at σ = {100 * noise_limit():.2f} %, the change-point bound "
          f"at σ = {100 * noise_limit(false_rate=RUNS_AFTER * FALSE_RATE):.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
