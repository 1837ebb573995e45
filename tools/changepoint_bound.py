"""The best any detector can do: the power bound of the change-point target, computed and simulated.

    PYTHONPATH=$PWD python3 tools/changepoint_bound.py [--trials 200000] [--seed 1]

The target asks a 3 % step to be found within 3 runs after it, with at most 1 false change point per 1,000
runs of stationary noise. Give a detector more than any real one has: the level before the step and the noise σ
(relative, run to run, Gaussian) known exactly, and the step's place known, so that only "are these 3 runs lower"
is left to decide. The most powerful test of it at a false-alarm rate α (Neyman-Pearson) compares the mean of the
3 runs with the level, one-sided; a detector asked after every run may raise at most α = 1/1,000 false alarms
per run, so its power is at most

    Φ(step / σ · √runs − z_α),   z_α = Φ⁻¹(1 − α).

No method reaches 95 % above the σ at which this falls to 95 %: ``step · √runs / (z_α + z_0.95)`` (1.10 % for a
3 % step and 3 runs). The bound is printed for σ = 0.5, 1, 1.5 and 2 %, next to a seeded simulation of that very
test (what it says must agree with the formula to the simulation's precision).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

STEP = 0.03
RUNS_AFTER = 3
FALSE_RATE = 1e-3
TARGET = 0.95
NOISES = (0.005, 0.01, 0.015, 0.02)


def power_bound(step: float, sigma: float, runs: int = RUNS_AFTER, false_rate: float = FALSE_RATE) -> float:
    """The power of the one-sided Neyman-Pearson test of a drop of ``step`` (relative) in the mean of ``runs``
    runs of Gaussian noise ``sigma``, level and noise known, at the false-alarm rate ``false_rate``."""
    if step <= 0 or sigma <= 0 or runs < 1 or not 0 < false_rate < 1:
        raise ValueError("step and sigma must be > 0, runs ≥ 1 and the false rate in (0, 1)")
    z_alpha = float(stats.norm.isf(false_rate))
    return float(stats.norm.cdf(step / sigma * math.sqrt(runs) - z_alpha))


def noise_limit(step: float = STEP, runs: int = RUNS_AFTER, false_rate: float = FALSE_RATE,
                power: float = TARGET) -> float:
    """The noise σ above which ``power_bound`` is below ``power``."""
    return step * math.sqrt(runs) / float(stats.norm.isf(false_rate) + stats.norm.isf(1 - power))


def simulated_power(step: float, sigma: float, trials: int, seed: int, runs: int = RUNS_AFTER,
                    false_rate: float = FALSE_RATE) -> tuple[float, float]:
    """``(power, false-alarm rate)`` of that test on ``trials`` seeded draws of ``runs`` runs after a step of
    ``step`` and as many without one."""
    rng = np.random.default_rng(seed)
    threshold = 1.0 - float(stats.norm.isf(false_rate)) * sigma / math.sqrt(runs)
    stepped = (1.0 - step) + sigma * rng.standard_normal((trials, runs))
    flat = 1.0 + sigma * rng.standard_normal((trials, runs))
    return float(np.mean(stepped.mean(axis=1) < threshold)), float(np.mean(flat.mean(axis=1) < threshold))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"a {100 * STEP:.0f} % step, {RUNS_AFTER} runs after it, ≤ {1000 * FALSE_RATE:g} false alarm per 1,000 runs "
          f"(z_α = {stats.norm.isf(FALSE_RATE):.3f}); {args.trials} simulated trials")
    print("| noise σ | bound Φ(step/σ·√3 − z_α) | simulated | simulated false-alarm rate |")
    print("| --- | --- | --- | --- |")
    for sigma in NOISES:
        power, false = simulated_power(STEP, sigma, args.trials, args.seed)
        print(f"| {100 * sigma:.1f} % | {100 * power_bound(STEP, sigma):.1f} % | {100 * power:.1f} % | "
              f"{1000 * false:.2f} / 1,000 |")
    print(f"the bound falls below {100 * TARGET:.0f} % at σ = {100 * noise_limit():.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
