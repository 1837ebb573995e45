"""Which change-point method the history uses: three candidates measured on synthetic and real series.

    PYTHONPATH=$PWD python3 tools/changepoint_compare.py [--trials 400] [--seed 1]

Candidates, each reporting only changes of at least ``changepoints.DEFAULT_MIN_SIZE`` with ≥ 3 runs a side:

- ``binseg-t``: ``gpuperf.verdict.changepoints`` (binary segmentation + t-test with a pruning pass, as Otava).
- ``pelt``: PELT from ``ruptures`` (L2 cost, penalty ``c · σ² · ln n``, σ from the median absolute difference of
  consecutive runs), the penalised fit asv's step detection also solves.
- ``window``: a sliding two-window Welch t-test (10 runs before, 3 after), the simplest detector a nightly job
  could run.

Measured, per noise level (Gaussian, standard deviation 0.5, 1 and 2 % of the level):

- ``found``: a 3 % slowdown after 30 runs, 15 runs after it: a change point reported within 3 runs after it.
- ``at 3``: the same with only 3 runs after the step (what a nightly check sees on the third night).
- ``false/1k``: change points per 1,000 runs of stationary noise, in 200 series of 100 runs and in 2,500 series
  of 8 runs (a new host's first nights).
- ``fleet``: change points on every committed fleet series (docs/fleet/**, docs/h200; runs of one host, one
  case, one method), the planted ``*-slow-*`` runs left out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuperf.store.history import History, sqlite_url  # noqa: E402
from gpuperf.verdict import changepoints, history_changes  # noqa: E402

Detector = Callable[[np.ndarray], list[int]]
MIN_SEGMENT = changepoints.DEFAULT_MIN_SEGMENT


def committed_fleet_files(root: Path) -> list[Path]:
    """Every committed results file of unchanged code (``find docs/fleet docs/h200 -name '*.json' ! -name
    '*-slow-*' ! -name '*-clock-check.json'``): the fleet's runs and the README's run, not the planted slowdowns
    (nor the clock check, which is not a results file)."""
    files = sorted([*(root / "docs" / "fleet").rglob("*.json"), *(root / "docs" / "h200").rglob("*.json")])
    return [path for path in files if "-slow-" not in path.name and not path.name.endswith("-clock-check.json")]


def committed_fleet_series(root: Path) -> dict[history_changes.SeriesKey, list[float]]:
    """Those files' series, as ``history changes`` cuts them (through a scratch SQLite history)."""
    with tempfile.TemporaryDirectory() as scratch, History(sqlite_url(Path(scratch) / "h.sqlite")) as history:
        history.ingest(committed_fleet_files(root))
        runs = history.runs()
        grouped = history_changes.series(history.values(), runs)
    return {key: [value for _, value in points] for key, points in grouped.items()}


def _sized(x: np.ndarray, indices: Sequence[int]) -> list[int]:
    """Keep the change points whose neighbouring segments' means differ by the minimum size."""
    bounds = [0, *indices, len(x)]
    level = float(np.median(x))
    kept = []
    for position, index in enumerate(indices):
        before = x[bounds[position]:index].mean()
        after = x[index:bounds[position + 2]].mean()
        if abs(after - before) / level >= changepoints.DEFAULT_MIN_SIZE:
            kept.append(index)
    return kept


def binseg_t(x: np.ndarray) -> list[int]:
    return [point.index for point in changepoints.change_points(x)]


def pelt(x: np.ndarray, c: float = 12.0) -> list[int]:
    import ruptures

    if len(x) < 2 * MIN_SEGMENT:
        return []
    relative = x / np.median(x)
    sigma = float(np.median(np.abs(np.diff(relative)))) / 0.6745 / np.sqrt(2) or 1e-6
    breaks = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(relative).predict(
        pen=c * sigma ** 2 * np.log(len(x)))
    return _sized(x, breaks[:-1])


def window(x: np.ndarray, before: int = 10, after: int = MIN_SEGMENT, alpha: float = 1e-4) -> list[int]:
    from scipy import stats

    found: list[int] = []
    for index in range(before, len(x) - after + 1):
        if found and index - found[-1] < before:
            continue
        left, right = x[index - before:index], x[index:index + after]
        p = stats.ttest_ind(left, right, equal_var=False).pvalue
        if p < alpha and abs(right.mean() - left.mean()) / np.median(x) >= changepoints.DEFAULT_MIN_SIZE:
            found.append(index)
    return found


DETECTORS: dict[str, Detector] = {"binseg-t": binseg_t, "pelt": pelt, "window": window}


def step_found(detector: Detector, rng: np.random.Generator, noise: float, post: int,
               trials: int) -> tuple[float, float]:
    """How often the step is reported at or up to 3 runs after it, and how often within 3 runs either side."""
    step_at = 30
    hits = near = 0
    for _ in range(trials):
        level = np.r_[np.ones(step_at), np.full(post, 0.97)]
        series = 50.0 * level * (1 + noise * rng.standard_normal(len(level)))
        found = detector(series)
        hits += any(step_at <= index <= step_at + 3 for index in found)
        near += any(abs(index - step_at) <= 3 for index in found)
    return hits / trials, near / trials


def false_per_thousand(detector: Detector, rng: np.random.Generator, noise: float, series: int = 200,
                       length: int = 100) -> float:
    count = sum(len(detector(50.0 * (1 + noise * rng.standard_normal(length)))) for _ in range(series))
    return 1000 * count / (series * length)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--methods", default=",".join(DETECTORS), help="comma list of " + ", ".join(DETECTORS))
    args = parser.parse_args(argv)
    fleet = committed_fleet_series(ROOT)
    print(f"fleet: {len(fleet)} series, {sum(len(v) for v in fleet.values())} runs; trials {args.trials}")
    print("| method | noise | found, 15 after: at/after step (±3) | found, 3 after: at/after (±3) | "
          "false / 1,000 runs (100-run, 8-run series) | fleet change points | s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.methods.split(","):
        detector = DETECTORS[name]
        started = time.perf_counter()
        on_fleet = sum(len(detector(np.asarray(values))) for values in fleet.values())
        for noise in (0.005, 0.01, 0.02):
            rng = np.random.default_rng(args.seed)
            found = step_found(detector, rng, noise, 15, args.trials)
            at_three = step_found(detector, rng, noise, 3, args.trials)
            false = false_per_thousand(detector, rng, noise)
            false_short = false_per_thousand(detector, rng, noise, series=2500, length=8)
            print(f"| {name} | {100 * noise:.1f} % | {100 * found[0]:.1f} % ({100 * found[1]:.1f} %) | "
                  f"{100 * at_three[0]:.1f} % ({100 * at_three[1]:.1f} %) | {false:.2f}, {false_short:.2f} | {on_fleet} | "
                  f"{time.perf_counter() - started:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
