"""Change points in one case's series of figures: where its level moved, by how much, how surely. Pure.

The method (chosen against PELT and a sliding-window test on synthetic and real series, ``evidence/history.md``)
is binary segmentation with a two-sample t-test, as Apache Otava does it: the split of a segment that
maximises the t statistic of the two sides' means is a candidate; it stands when the test's p-value, made
conservative for having picked the best of all splits (Bonferroni over them), is below ``alpha`` (tightened for a
short segment, ``Settings.alpha_for``) and the two means differ by at least ``min_size``; both sides are then searched again. A second pass re-tests each change
point against only its neighbouring segments and drops those that no longer pass (one strong step first found
as two weak ones, say), until none is dropped.

Binary segmentation needs ``min_segment`` runs on each side, so on its own it sees a step only once three runs
show it, and weakly then. The last runs are therefore also tested on their own (``recent_slowdown``) against the
long segment before them (since its last change point), with one-sided t-tests of a slowdown that estimate the
noise from that segment: the mean of the last ``tail_runs`` runs at ``tail_alpha``, the most powerful test of a
step that many runs old (with the noise known it is the Neyman-Pearson test whose power is the bound
``tools/generators/changepoint_bound.py`` computes), and the last run alone at the much smaller ``last_run_alpha``, so that a
large step is named the first night. Both run after every run, so their thresholds are false alarms per run;
windows of consecutive nights overlap, and the rate of false change points (runs of consecutive alarms) they give
is measured by simulation (``tools/generators/changepoint_compare.py``, ``evidence/history.md``) rather than assumed.

A young series, whose last runs follow fewer than ``tail_history`` runs, has too few runs for a t-test; there
its last runs are judged by the gate's own rule (``gate_slowdown``): each of them against an entry made from the
runs before them as a baseline recorded from several runs is made (their median, their median sample spread,
their range), with the gate's band. That is how a slowdown in the third run of a new case is named at once.

Figures are compared relative to the series' median, so the thresholds are fractions whatever the unit; the
tests estimate the noise from the series itself, so a quiet case and a noisy one are judged on their own noise.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpuperf.store.baseline import Entry
from gpuperf.verdict.gate import GateConfig, compare
from gpuperf.verdict.student_t import t_upper_tail
from gpuperf.vocabulary import Status

#: Per-test significance after the correction for the choice of split. Measured (evidence/history.md): 0.05 keeps
#: false change points in stationary noise at ≤ 0.05 per 1,000 runs and finds none on the committed fleet
#: series, while 1e-3 misses a third more of the 3 % steps in 2 % noise.
DEFAULT_ALPHA = 0.05
#: Change points allowed per run of stationary noise: a segment of n runs is tested at min(alpha, n × this), so
#: a short series (a few runs of a new host) is held to the same false-alarm rate per run as a long one. A check
#: after every run re-tests every prefix of the series, so this is a quarter of what one look at a whole series
#: would allow: measured (evidence/history.md), 2e-4 let such checks raise 1.5 false change points per 1,000 runs
#: of 2 % noise and 5e-5 still 0.5; 1e-5 leaves most of that budget to the last runs' test, which finds a step
#: within 3 runs far more often than segmentation can.
DEFAULT_FALSE_RATE = 1e-5
#: Smaller steps are not reported: below the gate's own tolerance by a wide margin, and below what hosts of
#: one model drift by between runs of unchanged code.
DEFAULT_MIN_SIZE = 0.015
#: Runs on each side of a change point at least: one outlying run is never a level.
DEFAULT_MIN_SEGMENT = 3
#: The last runs whose mean is tested on its own against the segment before them (the last run is also tested
#: alone); a slowdown found there is placed at whichever of the last 1 … ``tail_runs`` runs it separates best.
DEFAULT_TAIL_RUNS = 3
#: Runs the segment before them needs for that test: its spread is then estimated well enough.
DEFAULT_TAIL_HISTORY = 8
#: The false-alarm rate per run of the test of the last ``tail_runs`` runs' mean (its one-sided p-value).
#: Calibrated by simulation (evidence/history.md): with segmentation and the last run's test it raises 0.6-0.7 false
#: change points per 1,000 runs of stationary noise (a run of consecutive alarms counted once; the 95 % interval
#: below 0.85) and finds 96.6 % of the 3 % steps at 1 % noise by the third run after them; 1e-3 found 97.0 % and
#: raised 0.71 (interval to 0.90) at 1 % noise, 1.5e-3 found 97.4 % and raised 0.93, no longer shown to be below 1.
DEFAULT_TAIL_ALPHA = 8e-4
#: The false-alarm rate per run of the test of the last run alone: a share small enough to cost the budget
#: little (it needs a drop of four times the noise), there so that a large step is named the night it happens.
DEFAULT_LAST_RUN_ALPHA = 3e-5
#: Noisier series are asked more (evidence/history.md, "Noisy series"): the gate's band (4 %) is two noise σ of a series
#: of 2 % noise, which one run in some forty crosses by chance, and the last runs' t-test, exact for Gaussian noise
#: at any σ, finds few 3 % steps there anyway (the bound: 44 % at 2 %). A series whose segment before its last runs
#: varies by ``noisy_series`` or more (relative standard deviation) has its last runs tested at ``noisy_share`` of
#: the false-alarm rates, and a young series whose runs before its last vary so is named a slowdown by the gate's
#: rule only when two slow runs or more show it.
DEFAULT_NOISY_SERIES = 0.015
DEFAULT_NOISY_SHARE = 0.5
#: How much worse (in squared errors, in units of the noise's variance) a place for a change point may fit than
#: the best one and still be among the places it could have been (``placement``). Calibrated by simulation
#: (``tools/generators/history_generate.py``, evidence/history.md): a step of 2 noise σ or more lies within the places
#: admitted at 6 in ≥ 95 % of trials (93.6 % at 1.5 σ, a step the detector rarely finds).
PLACEMENT_THRESHOLD = 6.0
#: What ``PLACEMENT_THRESHOLD`` gives, as the report states it beside a change point's commit range (on 3 % steps
#: found in histories made from the validation runs the range held the step 99.7 % of the time, evidence/history.md).
PLACEMENT_CONFIDENCE = "95 % confidence for a step of 2 noise σ or more"


@dataclass(frozen=True)
class ChangePoint:
    """The level of the series moved between run ``index - 1`` and run ``index``."""

    index: int
    before: float  # mean figure of the segment before
    after: float  # mean figure of the segment after
    p_value: float
    recent: bool = False  # found by the test of the last runs, not (yet) by segmentation
    by_gate: bool = False  # found by the gate's rule in a young series (``p_value`` is then NaN)

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
    tail_runs: int = DEFAULT_TAIL_RUNS
    tail_history: int = DEFAULT_TAIL_HISTORY
    tail_alpha: float = DEFAULT_TAIL_ALPHA
    last_run_alpha: float = DEFAULT_LAST_RUN_ALPHA
    noisy_series: float = DEFAULT_NOISY_SERIES
    noisy_share: float = DEFAULT_NOISY_SHARE
    #: Whether the gate's rule may name a young series' last run alone. ``history changes`` says no for a series
    #: over several hosts (``changes.settings_for``): there each host's offset comes from one or two runs, or is its
    #: class's, and a host that reads the case apart from its class looks like a slowdown the first time it runs it
    #: (measured on the generated fleet, evidence/history.md: half the false change points at 2 % noise).
    young_last_run_alone: bool = True

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
        if self.tail_runs < 1 or not (0 < self.tail_alpha < 1 and 0 < self.last_run_alpha < 1):
            raise ValueError("the last runs' test needs tail_runs ≥ 1 and its false-alarm rates in (0, 1), got "
                             f"{self.tail_runs}, {self.tail_alpha}, {self.last_run_alpha}")


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

    p = float(2 * t_upper_tail(t, len(x) - 2)) if math.isfinite(t) else 0.0
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


def _tail_test(x: np.ndarray, start: int, k: int, settings: Settings) -> tuple[float, float, float] | None:
    """``(p, t, drop)`` of the one-sided t-test of a slowdown in the last ``k`` runs of ``x`` against
    ``x[start:n - k]``, with that segment's spread (``None`` when it has fewer than ``tail_history`` runs)."""
    prior, tail = x[start:len(x) - k], x[len(x) - k:]
    if len(prior) < settings.tail_history:
        return None
    drop = float(prior.mean() - tail.mean())
    sd = float(prior.std(ddof=1))
    if sd <= 0:
        return (0.0, math.inf, drop) if drop > 0 else None
    t = drop / (sd * math.sqrt(1 / k + 1 / len(prior)))
    return t_upper_tail(t, len(prior) - 1), t, drop


def recent_slowdown(x: np.ndarray, start: int, settings: Settings) -> ChangePoint | None:
    """A slowdown in the last runs of ``x`` against the segment before them (since ``start``): the mean of the
    last ``tail_runs`` runs with a one-sided p-value below ``tail_alpha``, or the last run alone below
    ``last_run_alpha`` (both times ``noisy_share`` where that segment varies by ``noisy_series`` or more), the drop
    at least ``min_size``. It is placed at the k of the last 1 … ``tail_runs``
    runs whose test is strongest; ``p_value`` is the detecting test's. ``x`` is relative to the series' level."""
    tests = {k: _tail_test(x, start, k, settings) for k in range(1, settings.tail_runs + 1)}
    sized = {k: test for k, test in tests.items() if test is not None and test[2] >= settings.min_size}
    prior = x[start:len(x) - settings.tail_runs]
    share = settings.noisy_share if len(prior) > 1 and float(np.std(prior, ddof=1)) >= settings.noisy_series else 1.0
    alarms = [sized[k][0] for k, alpha in ((settings.tail_runs, settings.tail_alpha), (1, settings.last_run_alpha))
              if k in sized and sized[k][0] < alpha * share]
    if not alarms:
        return None
    k = max(sized, key=lambda runs: sized[runs][1])
    n = len(x)
    return ChangePoint(index=n - k, before=float(x[start:n - k].mean()), after=float(x[n - k:].mean()),
                       p_value=min(alarms), recent=True)


def _relative_range(values: np.ndarray) -> float:
    return float((values.max() - values.min()) / np.median(values))


def gate_slowdown(x: np.ndarray, spreads: np.ndarray, start: int, settings: Settings,
                  config: GateConfig = GateConfig()) -> ChangePoint | None:
    """A slowdown in the last j runs (j = ``tail_runs`` … 1, the longest first) of a young series: every one of
    them ``REGRESSED`` by ``gate.compare`` against an entry made from the 2 to ``tail_history - 1`` runs before
    them (since ``start``), as a baseline recorded from several runs holds them: their median figure, their median
    sample spread (``spreads``, the records' relative IQR) and their relative range. A noisy series (the runs
    before them varying by ``noisy_series`` or more), or one whose ``young_last_run_alone`` is off, needs two slow
    runs or more: its last alone is not enough."""
    n = len(x)
    for j in range(settings.tail_runs, 0, -1):
        prior, tail = x[start:n - j], x[n - j:]
        if not 2 <= len(prior) < settings.tail_history:
            continue
        if j == 1 and (not settings.young_last_run_alone
                       or float(np.std(prior, ddof=1) / np.mean(prior)) >= settings.noisy_series):
            continue  # a noisy young series, or one over several hosts: its last run alone is not enough
        entry = Entry(metric="", value=float(np.median(prior)), unit="", spread=float(np.median(spreads[start:n - j])),
                      runs=len(prior), run_spread=_relative_range(prior))
        if all(compare(float(value), entry, config).status == Status.REGRESSED for value in tail):
            return ChangePoint(index=n - j, before=float(prior.mean()), after=float(tail.mean()), p_value=math.nan,
                               recent=True, by_gate=True)
    return None


def change_points(values: Sequence[float] | np.ndarray, settings: Settings | None = None,
                  spreads: Sequence[float] | None = None) -> list[ChangePoint]:
    """The change points of a series in run order, a slowdown in its last runs included; values that are not
    positive finite numbers are refused. ``spreads``: each run's sample spread (relative IQR), for the gate's
    rule in a young series (none known: 0, the gate's narrowest band)."""
    settings = settings or Settings()
    x = np.asarray(values, dtype=float)
    if len(x) and (not np.all(np.isfinite(x)) or np.any(x <= 0)):
        raise ValueError("change points need positive finite figures; leave out runs whose figure is missing")
    if len(x) < 3:
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
    recent = _recent(x, relative, sorted(kept), settings, spreads)
    if recent is None:
        return points
    near = len(x) - settings.tail_runs - settings.min_segment
    same = [point for point in points if point.index >= near and point.relative < 0]
    if not same:
        return [*points, recent]
    # Segmentation found the step too, with at least min_segment runs after it: keep whichever split of the
    # runs since the change point before them separates the two levels better.
    start = max((point.index for point in points if point.index < min(same[0].index, recent.index)), default=0)
    window = relative[start:]
    if _t_at(window, recent.index - start)[1] > _t_at(window, same[0].index - start)[1]:
        return [*(point for point in points if point not in same), recent]
    return points


def _recent(x: np.ndarray, relative: np.ndarray, kept: list[int], settings: Settings,
            spreads: Sequence[float] | None) -> ChangePoint | None:
    """A slowdown in the last runs, against the segment since the last change point before them: the t-test
    where that segment is long enough, else the gate's rule. A change point segmentation found among the last
    ``tail_runs + min_segment`` runs is not a bound of the t-test's segment: with only a few runs after a step it
    is often placed a run or two early, and would leave the test too few runs (``change_points`` keeps whichever
    of the two places the step better). One found before them is: a segment that straddled it would mix the two
    levels, and the step it reports already would be reported again as recent, one change alarmed twice."""
    settled = [index for index in kept if index < len(x) - settings.tail_runs - settings.min_segment]
    start = max(settled, default=0)
    found = recent_slowdown(relative, start, settings)
    if found is not None:
        level = float(np.median(x))
        return replace(found, before=found.before * level, after=found.after * level)
    start = max(kept, default=0)
    if kept and len(x) - start <= settings.tail_runs:
        return None  # segmentation has told the step among the last runs
    known = np.zeros(len(x)) if spreads is None else np.nan_to_num(np.asarray(spreads, dtype=float))
    return gate_slowdown(x, known, start, settings)


def placement(values: Sequence[float] | np.ndarray, index: int, start: int, end: int,
              threshold: float = PLACEMENT_THRESHOLD) -> tuple[int, int]:
    """The runs a change point found at ``index`` (in ``values[start:end]``, the segment between its neighbouring
    change points) could have been placed at: the first and the last place, inclusive, of every split of that
    segment whose two-level fit's squared errors exceed the least by at most ``threshold`` × the noise's variance
    (estimated from the best fit). Between the run before the first and the run at the last lies the cause, with
    the confidence ``PLACEMENT_THRESHOLD`` states; ``index`` itself is always among them."""
    x = np.asarray(values[start:end], dtype=float)
    n = len(x)
    if n < 3 or not start < index < end:
        return index, index
    sums, squares = np.cumsum(x), np.cumsum(x * x)
    left = np.arange(1, n)
    right = n - left
    errors = (squares[left - 1] - sums[left - 1] ** 2 / left
              + (squares[-1] - squares[left - 1]) - (sums[-1] - sums[left - 1]) ** 2 / right)
    best = max(float(errors.min()), 0.0)
    variance = best / (n - 2)
    if variance <= 0:
        return index, index
    admitted = np.flatnonzero(errors - best <= threshold * variance) + 1 + start
    return int(min(admitted.min(), index)), int(max(admitted.max(), index))
