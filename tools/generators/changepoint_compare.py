"""Which change-point method the history uses: three candidates measured on synthetic and real series.

    PYTHONPATH=$PWD python3 tools/generators/changepoint_compare.py [--trials 1000] [--series 1000] [--seed 1]

Candidates, each reporting only changes of at least ``changepoints.DEFAULT_MIN_SIZE`` with ≥ 3 runs a side:

- ``binseg-t``: ``gpuperf.history.changepoints`` (binary segmentation + t-test with a pruning pass, as Otava).
- ``pelt``: PELT from ``ruptures`` (L2 cost, penalty ``c · σ² · ln n``, σ from the median absolute difference of
  consecutive runs), the penalised fit asv's step detection also solves.
- ``window``: a sliding two-window Welch t-test (10 runs before, 3 after), the simplest detector a nightly job
  could run.

Measured, per noise level (Gaussian, standard deviation 0.5, 1 and 2 % of the level):

- ``found by the 3rd run``: a 3 % slowdown after 30 (or 100) stationary runs, checked after each of the 3 runs
  that follow it, placed at most one run early, with a 95 % confidence interval (Clopper-Pearson), and placed at
  the step or after it; the bounds of ``tools/generators/changepoint_bound.py`` for false change points (3 nights'
  false-alarm rates together, 3/1,000) beside it: the t-test with 30 or 100 runs before, and the level and σ known.
- ``found, 15 after``: the series continued 15 runs, the step placed within 3 runs after it.
- ``false / 1,000 runs``: change points in stationary series of 100 runs checked after every run (a run of
  consecutive alarms counted once), with a 95 % confidence interval (Poisson, exact), and looking at each whole
  series once.
- ``fleet``: change points on every committed fleet series (evidence/fleet/**, evidence/h200; runs of one host, one
  case, one method), the planted ``*-slow-*`` runs left out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpuperf.history.database import History, sqlite_url  # noqa: E402
from gpuperf.history import changepoints  # noqa: E402
from gpuperf.history import changes as history_changes  # noqa: E402
from tools.generators.changepoint_bound import FALSE_RATE, change_point_bound, t_test_bound  # noqa: E402

Detector = Callable[[np.ndarray], list[int]]
MIN_SEGMENT = changepoints.DEFAULT_MIN_SEGMENT
RUNS_AFTER = 3
NOISES = (0.005, 0.01, 0.015, 0.02)
#: The false-alarm rate the bounds allow a detector on the 3 nights after the step
#: (tools/generators/changepoint_bound.py).
UNION = RUNS_AFTER * FALSE_RATE


def committed_fleet_files(root: Path) -> list[Path]:
    """Every committed results file of unchanged code (``find evidence/fleet evidence/h200 -name '*.json' ! -name
    '*-slow-*' ! -name '*-clock-check.json'``): the fleet's runs and the README's run, not the planted slowdowns
    (nor the clock check, which is not a results file)."""
    files = sorted([*(root / "evidence" / "fleet").rglob("*.json"), *(root / "evidence" / "h200").rglob("*.json")])
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


#: Student's t degrees of freedom of the noise (``--student-t``): heavy tails; 0 for Gaussian noise.
TAILS = [0]


def draws(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` draws of noise of standard deviation 1: Gaussian, or Student's t scaled to it."""
    df = TAILS[0]
    if not df:
        return rng.standard_normal(count)
    return np.asarray(rng.standard_t(df, count) / np.sqrt(df / (df - 2)), dtype=float)


def fleet_tails(fleet: dict[history_changes.SeriesKey, list[float]], shortest: int = 6) -> tuple[int, float]:
    """``(figures, share beyond 3 standard deviations)`` of the fleet series of ≥ ``shortest`` runs, each
    standardised by its own mean and standard deviation: how heavy the real run-to-run noise's tails are."""
    scores = [(values - values.mean()) / values.std(ddof=1) for values in map(np.asarray, fleet.values())
              if len(values) >= shortest and values.std(ddof=1) > 0]
    joined = np.concatenate(scores) if scores else np.zeros(0)
    return len(joined), float(np.mean(np.abs(joined) > 3)) if len(joined) else 0.0


#: The detector's settings: its defaults, or (``--tail-alpha``) another false-alarm rate of the last runs' test.
SETTINGS = [changepoints.Settings()]


def binseg_t(x: np.ndarray) -> list[int]:
    """``history changes``' detector: segmentation, the last runs' t-tests and, in a young series, the gate's
    rule (the synthetic series record no sample spread: the gate's narrowest band)."""
    return [point.index for point in changepoints.change_points(x.tolist(), SETTINGS[0])]


def binseg_t_without_gate(x: np.ndarray) -> list[int]:
    """The same without the gate's rule for young series: the change-point detector alone."""
    return [point.index for point in changepoints.change_points(x.tolist(), SETTINGS[0]) if not point.by_gate]


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


DETECTORS: dict[str, Detector] = {"binseg-t": binseg_t, "binseg-t-without-gate": binseg_t_without_gate, "pelt": pelt,
                                  "window": window}


def step_found(detector: Detector, rng: np.random.Generator, noise: float, post: int,
               trials: int) -> tuple[float, float]:
    """How often the step is reported at or up to 3 runs after it, and how often within 3 runs either side."""
    step_at = 30
    hits = near = 0
    for _ in range(trials):
        level = np.r_[np.ones(step_at), np.full(post, 0.97)]
        series = 50.0 * level * (1 + noise * draws(rng, len(level)))
        found = detector(series)
        hits += any(step_at <= index <= step_at + 3 for index in found)
        near += any(abs(index - step_at) <= 3 for index in found)
    return hits / trials, near / trials


def found_by_third_run(detector: Detector, rng: np.random.Generator, noise: float, trials: int,
                       step_at: int = 30, step: float = 0.03) -> tuple[float, float]:
    """How often a ``step`` slowdown after ``step_at`` runs is reported by a check run after each of the 3 runs
    that follow it (it sees 1, then 2, then 3 runs of the new level): placed at the step or after it, and placed
    at most one run early."""
    hits = early = 0
    for _ in range(trials):
        level = np.r_[np.ones(step_at), np.full(RUNS_AFTER, 1 - step)]
        series = 50.0 * level * (1 + noise * draws(rng, len(level)))
        found = [index for seen in range(1, RUNS_AFTER + 1) for index in detector(series[:step_at + seen])]
        hits += any(step_at <= index for index in found)
        early += any(step_at - 1 <= index for index in found)
    return hits / trials, early / trials


def alarm_episodes(detector: Detector, series: np.ndarray, first: int = 3) -> int:
    """Change points a check run after every run of ``series`` raises: the nights on which it reports one, a run
    of consecutive such nights counted once."""
    episodes, alarmed = 0, False
    for night in range(first, len(series) + 1):
        now = bool(detector(series[:night]))
        episodes += now and not alarmed
        alarmed = now
    return episodes


def false_change_points(detector: Detector, rng: np.random.Generator, noise: float, series: int = 200,
                        length: int = 100, nightly: bool = False) -> int:
    """False change points in ``series`` stationary series of ``length`` runs: of each whole series at once, or
    (``nightly``) as a check after every run raises them (``alarm_episodes``)."""
    count = 0
    for _ in range(series):
        values = 50.0 * (1 + noise * draws(rng, length))
        count += alarm_episodes(detector, values) if nightly else len(detector(values))
    return count


def false_per_thousand(detector: Detector, rng: np.random.Generator, noise: float, series: int = 200,
                       length: int = 100, nightly: bool = False) -> float:
    """``false_change_points`` per 1,000 runs."""
    return 1000 * false_change_points(detector, rng, noise, series, length, nightly) / (series * length)


def rate_interval(count: int, runs: int) -> tuple[float, float]:
    """The exact (Garwood) 95 % confidence interval of a Poisson rate, per 1,000 runs, from ``count`` events."""
    from scipy import stats

    low = float(stats.chi2.ppf(0.025, 2 * count)) / 2 if count else 0.0
    high = float(stats.chi2.ppf(0.975, 2 * count + 2)) / 2
    return 1000 * low / runs, 1000 * high / runs


def share_interval(hits: int, trials: int) -> tuple[float, float]:
    """The Clopper-Pearson 95 % confidence interval of a proportion."""
    from scipy import stats

    interval = stats.binomtest(hits, trials).proportion_ci(confidence_level=0.95)
    return float(interval.low), float(interval.high)


def _found_cell(share: tuple[float, float], trials: int) -> str:
    """Found placed at most one run early, with its interval, and (in brackets) placed at the step or after."""
    low, high = share_interval(round(share[1] * trials), trials)
    return f"{100 * share[1]:.1f} % [{100 * low:.1f}, {100 * high:.1f}] ({100 * share[0]:.1f} %)"


def _row(name: str, detector: Detector, noise: float, args: argparse.Namespace, fleet_cell: str) -> str:
    """One noise level's row of the table, every measurement drawn from one generator seeded ``args.seed``."""
    rng = np.random.default_rng(args.seed)
    third = found_by_third_run(detector, rng, noise, args.trials)
    third_long = found_by_third_run(detector, rng, noise, args.trials, step_at=100)
    found = step_found(detector, rng, noise, 15, args.trials)
    runs = 100 * args.series
    nightly = false_change_points(detector, rng, noise, args.series, nightly=True)
    whole = false_change_points(detector, rng, noise, args.series)
    low, high = rate_interval(nightly, runs)
    return (f"| {name} | {100 * noise:.1f} % | {_found_cell(third, args.trials)} | "
            f"{_found_cell(third_long, args.trials)} | {100 * t_test_bound(0.03, noise, 30, false_rate=UNION):.1f} % / "
            f"{100 * t_test_bound(0.03, noise, 100, false_rate=UNION):.1f} % / "
            f"{100 * change_point_bound(0.03, noise):.1f} % | "
            f"{100 * found[0]:.1f} % ({100 * found[1]:.1f} %) | {1000 * nightly / runs:.2f} [{low:.2f}, {high:.2f}] "
            f"({nightly}), {1000 * whole / runs:.2f} | {fleet_cell} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000, help="step trials per noise level and measurement")
    parser.add_argument("--series", type=int, default=1000, help="stationary 100-run series per noise level")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--methods", default="binseg-t-without-gate,binseg-t",
                        help="comma list of " + ", ".join(DETECTORS))
    parser.add_argument("--noises", default=",".join(map(str, NOISES)), help="comma list of relative noise levels")
    parser.add_argument("--tail-alpha", type=float, default=changepoints.DEFAULT_TAIL_ALPHA,
                        help="the last runs' test's false-alarm rate per run (the calibration of the default)")
    parser.add_argument("--student-t", type=int, default=0, metavar="DF",
                        help="Student's t noise of DF > 2 degrees of freedom (heavy tails) instead of Gaussian")
    args = parser.parse_args(argv)
    if args.student_t and args.student_t <= 2:
        parser.error("--student-t needs more than 2 degrees of freedom (a finite standard deviation)")
    TAILS[0] = args.student_t
    SETTINGS[0] = changepoints.Settings(tail_alpha=args.tail_alpha)
    fleet = committed_fleet_series(ROOT)
    print(f"fleet: {len(fleet)} series, {sum(len(v) for v in fleet.values())} runs; seed {args.seed}, {args.trials} "
          f"step trials per noise level and column, {args.series} stationary series of 100 runs per noise level; "
          f"the last runs' test at {args.tail_alpha:g} per run; "
          + (f"Student's t noise, {args.student_t} degrees of freedom" if args.student_t else "Gaussian noise"))
    figures, beyond = fleet_tails(fleet)
    print(f"fleet figures in series of ≥ 6 runs: {figures}, {100 * beyond:.2f} % beyond 3 standard deviations "
          "(Gaussian noise: 0.27 %)")
    print("| method | noise | found by the 3rd run after it, placed at most a run early [95 % CI] (at the step or "
          "after), 30 runs before | the same, 100 runs before | bound: t-test 30 / 100 runs before / level and σ known "
          "| found, 15 after (±3) | false / "
          "1,000 runs: nightly check [95 % CI] (count), whole series | fleet: change points, nightly alarms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.methods.split(","):
        detector = DETECTORS[name]
        on_fleet = sum(len(detector(np.asarray(values))) for values in fleet.values())
        fleet_nightly = sum(alarm_episodes(detector, np.asarray(values)) for values in fleet.values())
        for noise in map(float, args.noises.split(",")):
            print(_row(name, detector, noise, args, f"{on_fleet}, {fleet_nightly}"), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
