"""Change points in one case's series of figures: where its level moved, by how much, how surely. Pure.

The method (chosen against PELT and a sliding-window test on synthetic and real series, ``docs/history.md``)
is binary segmentation with a two-sample t-test, as Apache Otava does it: the split of a segment that
maximises the t statistic of the two sides' means is a candidate; it stands when the test's p-value, made
conservative for having picked the best of all splits (Bonferroni over them), is below ``alpha`` (tightened for a
short segment, ``Settings.alpha_for``) and the two means differ by at least ``min_size``; both sides are then searched again. A second pass re-tests each change
point against only its neighbouring segments and drops those that no longer pass (one strong step first found
as two weak ones, say), until none is dropped.

Figures are compared relative to the series' median, so the thresholds are fractions whatever the unit; the
test estimates the noise from the series itself, so a quiet case and a noisy one are judged on their own noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Per-test significance after the correction for the choice of split. Measured (docs/history.md): 0.05 keeps
#: false change points in stationary noise at ≤ 0.05 per 1,000 runs and finds none on the committed fleet
#: series, while 1e-3 misses a third more of the 3 % steps in 2 % noise.
DEFAULT_ALPHA = 0.05
#: Change points allowed per run of stationary noise: a segment of n runs is tested at min(alpha, n × this), so
#: a short series (a few runs of a new host) is held to the same false-alarm rate per run as a long one.
DEFAULT_FALSE_RATE = 2e-4
#: Smaller steps are not reported: below the gate's own tolerance by a wide margin, and below what hosts of
#: one model drift by between runs of unchanged code.
DEFAULT_MIN_SIZE = 0.015
#: Runs on each side of a change point at least: one outlying run is never a level.
DEFAULT_MIN_SEGMENT = 3


@dataclass(frozen=True)
class ChangePoint:
    """The level of the series moved between run ``index - 1`` and run ``index``."""

    index: int
    before: float  # mean figure of the segment before
    after: float  # mean figure of the segment after
    p_value: float

    @property
    def relative(self) -> float:
        """``(after - before) / before``: negative for a slowdown of a higher-is-better figure."""
        return (self.after - self.before) / self.before


@dataclass(frozen=True)
class Settings:
    alpha: float = DEFAULT_ALPHA
    min_size: float = DEFAULT_MIN_SIZE
    min_segment: int = DEFAULT_MIN_SEGMENT
    false_rate: float = DEFAULT_FALSE_RATE

    def alpha_for(self, runs: int) -> float:
        """The significance a segment of ``runs`` runs is tested at."""
        return min(self.alpha, self.false_rate * runs)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.min_size < 0:
            raise ValueError(f"the smallest change must be ≥ 0, got {self.min_size}")
        if self.min_segment < 2:
            raise ValueError(f"a segment needs at least 2 runs to have a spread, got {self.min_segment}")


def _best_split(x: np.ndarray, min_segment: int) -> tuple[int, float]:
    """``(k, t)``: the split ``x[:k] | x[k:]`` with the largest pooled-variance t statistic."""
    n = len(x)
    k = np.arange(min_segment, n - min_segment + 1)
    cum = np.cumsum(x)
    cum2 = np.cumsum(x * x)
    total, total2 = cum[-1], cum2[-1]
    left_sum, left_sq = cum[k - 1], cum2[k - 1]
    right_sum, right_sq = total - left_sum, total2 - left_sq
    left_mean, right_mean = left_sum / k, right_sum / (n - k)
    within = (left_sq - k * left_mean ** 2) + (right_sq - (n - k) * right_mean ** 2)
    pooled = np.maximum(within, 0.0) / (n - 2)
    scale = np.sqrt(pooled * (1.0 / k + 1.0 / (n - k)))
    diff = np.abs(right_mean - left_mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(scale > 0, diff / scale, np.where(diff > 0, np.inf, 0.0))
    best = int(np.argmax(t))
    return int(k[best]), float(t[best])


def _significant(x: np.ndarray, split: int, t: float, splits: int, settings: Settings) -> float | None:
    """The corrected p-value of the split when it stands, else ``None``."""
    left, right = x[:split], x[split:]
    if abs(right.mean() - left.mean()) < settings.min_size:
        return None
    # Imported here: scipy.stats takes about a second to import, and a suite run's append loads this module
    # without ever testing a split.
    from scipy import stats

    p = float(2 * stats.t.sf(t, len(x) - 2)) if math.isfinite(t) else 0.0
    corrected = min(1.0, p * max(splits, 1))
    return corrected if corrected < settings.alpha_for(len(x)) else None


def _segment(x: np.ndarray, start: int, settings: Settings, found: dict[int, float]) -> None:
    n = len(x)
    if n < 2 * settings.min_segment:
        return
    split, t = _best_split(x, settings.min_segment)
    p = _significant(x, split, t, n - 2 * settings.min_segment + 1, settings)
    if p is None:
        return
    found[start + split] = p
    _segment(x[:split], start, settings, found)
    _segment(x[split:], start + split, settings, found)


def _prune(x: np.ndarray, indices: list[int], settings: Settings) -> dict[int, float]:
    """Re-test each change point between its neighbours; drop the weakest failing one until all pass."""
    while True:
        bounds = [0, *indices, len(x)]
        kept: dict[int, float] = {}
        weakest: tuple[float, int] | None = None
        for position, index in enumerate(indices):
            window = x[bounds[position]:bounds[position + 2]]
            split = index - bounds[position]
            _, t = _t_at(window, split)
            p = _significant(window, split, t, len(window) - 2 * settings.min_segment + 1, settings)
            if p is None:
                strength = -t
                if weakest is None or strength > weakest[0]:
                    weakest = (strength, index)
            else:
                kept[index] = p
        if weakest is None:
            return kept
        indices = [index for index in indices if index != weakest[1]]


def _t_at(x: np.ndarray, split: int) -> tuple[int, float]:
    left, right = x[:split], x[split:]
    n = len(x)
    within = ((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum()
    scale = math.sqrt(max(within, 0.0) / (n - 2) * (1 / len(left) + 1 / len(right)))
    diff = abs(right.mean() - left.mean())
    return split, diff / scale if scale > 0 else (math.inf if diff > 0 else 0.0)


def change_points(values: Sequence[float], settings: Settings | None = None) -> list[ChangePoint]:
    """The change points of a series in run order; values that are not positive finite numbers are refused."""
    settings = settings or Settings()
    x = np.asarray(values, dtype=float)
    if len(x) and (not np.all(np.isfinite(x)) or np.any(x <= 0)):
        raise ValueError("change points need positive finite figures; leave out runs whose figure is missing")
    if len(x) < 2 * settings.min_segment:
        return []
    level = float(np.median(x))
    relative = x / level
    found: dict[int, float] = {}
    _segment(relative, 0, settings, found)
    kept = _prune(relative, sorted(found), settings)
    bounds = [0, *sorted(kept), len(x)]
    points = []
    for position, index in enumerate(sorted(kept)):
        before = float(x[bounds[position]:index].mean())
        after = float(x[index:bounds[position + 2]].mean())
        points.append(ChangePoint(index=index, before=before, after=after, p_value=kept[index]))
    return points
