"""How often a fleet's baseline would be red on a fresh host with no change: the rate its bands were chosen for,
that rate's 95 % interval by resampling the hosts (``BOOTSTRAP`` draws, seeded, so the page is reproducible), and the
honest check, each host's runs judged by the gate's own rule against the baseline rebuilt without that host
(``estimates``: for the baseline ``baseline from-fleet`` records, the host's memory level taken out where it adopts it,
and for the two ways it chooses between).

Pure: runs are ``fleet.Run``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuperf.store.records import Record
from gpuperf.verdict.false_alarms import judge, judge_run
from gpuperf.verdict.fleet import Run
from gpuperf.store.baseline_entry import Entry
from gpuperf.verdict.fleet_bands import (TARGET_RED, FleetBaseline, fail_chance, levelled_baseline, red_rate,
                                         run_levels)
from gpuperf.verdict.gate import Basis, GateConfig

#: Hosts resampled for the estimate's interval, and the seed that makes the page reproducible.
BOOTSTRAP = 400
SEED = 51


@dataclass(frozen=True)
class Estimate:
    """The expected rate of a red full gate on a fresh host, its 95 % interval over resampled hosts, and the
    held-out check: of ``held_out_runs`` runs, ``held_out_red`` red against bands made without their host."""

    rate: float
    low: float
    high: float
    held_out_runs: int
    held_out_red: int
    hosts: int

    @property
    def held_out_bound(self) -> float:
        """The one-sided 95 % upper bound on the red rate from the held-out count (exact binomial)."""
        return binomial_upper(self.held_out_red, self.held_out_runs)


def binomial_upper(successes: int, trials: int, confidence: float = 0.95) -> float:
    """Clopper–Pearson's one-sided upper bound: the ``p`` whose chance of at most ``successes`` in ``trials`` is
    ``1 − confidence`` (bisection on the binomial distribution function)."""
    if trials <= 0 or successes >= trials:
        return 1.0

    def at_most(p: float) -> float:
        return sum(math.comb(trials, k) * p ** k * (1 - p) ** (trials - k) for k in range(successes + 1))

    low, high = 0.0, 1.0
    for _ in range(100):
        middle = (low + high) / 2
        if at_most(middle) > 1 - confidence:
            low = middle
        else:
            high = middle
    return high


def bootstrap_interval(baseline: FleetBaseline, draws: int = BOOTSTRAP, seed: int = SEED) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the red rate with the bands as chosen and each entry's scale recomputed
    over hosts drawn with replacement."""
    hosts = sorted({host for fleet in baseline.fleets.values() for spread in fleet.spreads.values()
                    for host in spread.hosts})
    draw = random.Random(seed)
    rates = []
    for _ in range(draws):
        weights: dict[str, int] = {}
        for host in draw.choices(hosts, k=len(hosts)):
            weights[host] = weights.get(host, 0) + 1
        chances = []
        for case, fleet in baseline.fleets.items():
            chosen = baseline.bands.bands[case]
            chances.append(min(1.0, baseline.bands.fixed.get(case, 0.0) + max(
                fail_chance(chosen[basis], spread.resampled_scale(weights), fleet.dof)
                for basis, spread in fleet.spreads.items())))
        rates.append(red_rate(chances))
    rates.sort()
    return rates[int(0.025 * (draws - 1))], rates[int(math.ceil(0.975 * (draws - 1)))]


def estimates(runs: Sequence[Run], config: GateConfig, target: float = TARGET_RED,
              tolerances: Mapping[str, float] | None = None) -> tuple[Estimate, Estimate, Estimate]:
    """The estimate of the baseline ``baseline from-fleet`` records (``levelled_baseline``: the level adopted where it
    helps), and of the two ways it chooses between (no level; the level in every memory-bound entry). Held out: the
    baselines rebuilt without each host in turn, once for all three, and that host's runs judged by the gate's rule
    (the recorded one's levelled entries also at the end of the run, ``memory_level``)."""
    plain, everywhere, _, recorded = levelled_baseline(runs, config, target, tolerances)
    red = [0, 0, 0]
    for host in sorted({run.host for run in runs}):
        others = [run for run in runs if run.host != host]
        if len({run.host for run in others}) < 2:
            continue
        made_plain, made_everywhere, _, made = levelled_baseline(others, config, target, tolerances)
        levels = run_levels(runs, made_everywhere.entries)
        for index, run in enumerate(runs):
            if run.host == host:
                red[0] += _red_recorded(run, made.entries, config)
                red[1] += _red(run, made_plain, 0.0, config)
                red[2] += _red(run, made_everywhere, levels[index], config)
    hosts = len({run.host for run in runs})

    def estimate_of(baseline: FleetBaseline, count: int) -> Estimate:
        low, high = bootstrap_interval(baseline)
        return Estimate(rate=baseline.bands.rate, low=low, high=high, held_out_runs=len(runs), held_out_red=count,
                        hosts=hosts)

    return estimate_of(recorded, red[0]), estimate_of(plain, red[1]), estimate_of(everywhere, red[2])


def _red_recorded(run: Run, made: Mapping[str, Entry], config: GateConfig) -> bool:
    judged = {case: record for case, record in run.clean().items()
              if case in made and record.method == made[case].method}
    return any(verdict.alarm for verdict in judge_run(judged, made, config).values())


def _red(run: Run, made: FleetBaseline, level: float, config: GateConfig) -> bool:
    return any(_alarm(record, made, case, level, config) for case, record in run.clean().items()
               if case in made.entries and record.method == made.entries[case].method)


def _alarm(record: Record, made: FleetBaseline, case: str, level: float, config: GateConfig) -> bool:
    entry, fleet = made.entries[case], made.fleets.get(case)
    verdict = judge(record, entry, config)
    if fleet is None or not fleet.levelled or verdict.basis != Basis.TIME or Basis.TIME not in fleet.spreads:
        return verdict.alarm
    return record.value / (1.0 + level) / fleet.spreads[Basis.TIME].middle - 1.0 < -made.bands.bands[case][Basis.TIME]
