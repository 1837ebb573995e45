"""A fleet's bands and resolutions: each entry's band chosen from its hosts' spread by leaving one host out at a
time, so that a full gate on a fresh host with no change is red at most ``TARGET_RED`` of the time, and each
entry's resolution, the smallest slowdown it catches on every host of the fleet.

**Leaving one host out.** A fresh host is one the baseline was not recorded on. For every run of every host, its
figure is compared with the median of the *other* hosts' runs (``Spread.loo``): how far a host's reading falls from
a baseline it did not make. Per entry and basis (time, or cycles for the power-capped cases the gate judges on
cycles), the root mean square of those deviations is the scale of a fresh host's reading; with ``hosts − 1``
degrees of freedom, a fresh host's deviation is taken as Student's t at that scale (the predictive law of a new
draw when the spread itself is estimated from few hosts, heavier-tailed than a normal).

**The band.** The chance that an entry with band ``b`` fails on a fresh host is ``P(T < −b / scale)``; a full gate
is red when any entry fails, ``1 − Π (1 − pᵢ)``. The bands are ``max(tolerance, k × spread, the widest slowdown
any committed run shows against the entry, t(α) × scale)`` with one ``α`` for every entry, the largest that keeps
the full gate's rate at or below the target: entries whose hosts agree stay at the tolerance and spend almost none
of it, the wide ones share the rest. In sample every committed run is green (the third term).

**The estimate** (``fleet_estimate.py``): the rate with the chosen bands and the leave-one-host-out scales, its 95 %
interval by resampling the hosts, and the honest check: the bands rebuilt without each host in turn, that host's
runs judged against them by the gate's own rule.

**The resolution.** A slowdown ``s`` on a host reading ``d`` against the entry shows as ``(1 + d)(1 − s) − 1``,
caught when below ``−band``: the entry catches ``s`` on every host once ``s ≥ 1 − (1 − band) / (1 + d)`` for the
fastest run of the fleet, each run read on the basis the gate judges it on (``false_alarms.judge``, the gate's own
rule, gives the same figure: tests/test_fleet_bands.py holds them equal entry by entry).

**A host's own level** (``level=True``): a memory-bound case judged against the run's GEMV family median deviation
(the host's memory speed that day) instead of the raw figure; computed both ways for the page, adopted only where it
lowers the resolution without raising the false-red estimate.

Pure: runs are ``fleet.Run``; no SciPy (``student_t``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpuperf.store.baseline_entry import Entry, MemoryLevel
from gpuperf.store.records import Record
from gpuperf.verdict.fleet import Run, entries_from_runs, majority_records
from gpuperf.verdict.gate import Basis, Context, GateConfig, base_tolerance, figure_at_max_clock, rejudge
from gpuperf.verdict.memory_level import LEVEL_FAMILY
from gpuperf.verdict.student_t import t_quantile, t_upper_tail

#: The expected rate of a red full gate on a fresh host with no change that the bands are chosen for.
TARGET_RED = 0.01
#: Above the widest slowdown a committed run shows: the entry's value and band are written to six digits.
IN_SAMPLE_MARGIN = 0.001


@dataclass(frozen=True)
class Spread:
    """One basis of one case over the fleet's runs: each run's host, its deviation from the median of the other
    hosts' runs (``loo``) and from the median of all (``middle``, the entry's figure: ``offsets``), and whether the
    gate judges that run on this basis (``judged``)."""

    hosts: tuple[str, ...]
    loo: tuple[float, ...]
    offsets: tuple[float, ...]
    judged: tuple[bool, ...]
    middle: float

    @property
    def judged_offsets(self) -> list[float]:
        return [offset for offset, judged in zip(self.offsets, self.judged) if judged]

    @property
    def scale(self) -> float:
        return math.sqrt(sum(d * d for d in self.loo) / len(self.loo)) if self.loo else 0.0

    def resampled_scale(self, weights: Mapping[str, int]) -> float:
        """The scale with each host counted ``weights[host]`` times (a bootstrap draw of hosts)."""
        total = sum(weights.get(host, 0) for host in self.hosts)
        if not total:
            return self.scale
        return math.sqrt(sum(weights.get(host, 0) * d * d for host, d in zip(self.hosts, self.loo)) / total)


@dataclass(frozen=True)
class CaseFleet:
    """One entry over the fleet: the hosts it rests on, and its spread on each basis its runs are judged on."""

    case_id: str
    hosts: int
    spreads: Mapping[str, Spread]
    levelled: bool = False  # its time figures taken relative to their run's GEMV level

    @property
    def dof(self) -> int:
        return max(1, self.hosts - 1)


def _figure(record: Record, basis: str) -> float | None:
    if basis == Basis.TIME:
        return record.value
    return figure_at_max_clock(record.clock_bound, record.value_at_max_clock)


def run_levels(runs: Sequence[Run], entries: Mapping[str, Entry]) -> list[float]:
    """Per run, the median deviation of its GEMV family's figures from the other hosts' medians: the host's memory
    level in that run (0 where the run has no GEMV)."""
    chosen = {case: majority_records(runs, case, entry.method) for case, entry in entries.items()
              if entry.family == LEVEL_FAMILY}
    levels = []
    for index in range(len(runs)):
        deviations = []
        for records in chosen.values():
            own = [record for at, _, record in records if at == index]
            others = [record.value for _, host, record in records if host != runs[index].host]
            if own and others:
                deviations.append(own[0].value / statistics.median(others) - 1.0)
        levels.append(statistics.median(deviations) if deviations else 0.0)
    return levels


def case_fleets(runs: Sequence[Run], entries: Mapping[str, Entry], config: GateConfig,
                levels: Sequence[float] | None = None) -> dict[str, CaseFleet]:
    """Every entry's spread over the runs, on the bases the gate judges its runs on (against the entry). With
    ``levels`` (``run_levels``), a memory-bound case's time figures are taken relative to their run's level."""
    fleets = {}
    for case, entry in entries.items():
        records = majority_records(runs, case, entry.method)
        judged_on = {index: rejudge(record, entry, config, Context()).judged_on or Basis.TIME
                     for index, _, record in records}
        levelled = levels is not None and memory_bound([record for _, _, record in records])
        spreads = {}
        for basis in sorted(set(judged_on.values())):
            points = [(index, host, figure) for index, host, record in records
                      if (figure := _figure(record, basis)) is not None]
            if levelled and basis == Basis.TIME:
                assert levels is not None
                points = [(index, host, figure / (1.0 + levels[index])) for index, host, figure in points]
            if len({host for _, host, _ in points}) < 2:
                continue
            middle = statistics.median(figure for _, _, figure in points)
            loo = tuple(figure / statistics.median(f for _, h, f in points if h != host) - 1.0
                        for _, host, figure in points)
            spreads[basis] = Spread(hosts=tuple(host for _, host, _ in points), loo=loo,
                                    offsets=tuple(figure / middle - 1.0 for _, _, figure in points),
                                    judged=tuple(judged_on[index] == basis for index, _, _ in points), middle=middle)
        if spreads:
            fleets[case] = CaseFleet(case_id=case, hosts=len({host for _, host, _ in records}), spreads=spreads,
                                     levelled=levelled)
    return fleets


def memory_bound(records: Sequence[Record]) -> bool:
    """No run found the case compute-bound (``Record.clock_bound``): its time follows the memory, not the clock."""
    return bool(records) and not any(record.clock_bound for record in records)


def fail_chance(band: float, scale: float, dof: int) -> float:
    """The chance a fresh host's reading falls below ``−band`` when its deviation is t with ``dof`` at ``scale``."""
    return t_upper_tail(band / scale, dof) if scale > 0 else 0.0


def red_rate(chances: Sequence[float]) -> float:
    """The chance a full gate is red: any entry fails."""
    return 1.0 - math.prod(1.0 - chance for chance in chances)


@dataclass(frozen=True)
class Bands:
    """Each case's band per basis, the one ``alpha`` (per-entry tail) they were chosen with, and each case's chance
    of failing on a fresh host."""

    alpha: float
    bands: Mapping[str, Mapping[str, float]]
    chances: Mapping[str, float]
    fixed: Mapping[str, float] = field(default_factory=dict)  # ``bands_at``'s, kept for the bootstrap

    @property
    def rate(self) -> float:
        return red_rate(list(self.chances.values()))


def _floor(fleet: CaseFleet, entry: Entry, basis: str, config: GateConfig, tolerance: bool = True) -> float:
    """The tolerance, k × the recorded sample spread, and just past the widest slowdown a committed run judged on
    ``basis`` shows against the entry (so every committed run is green); without ``tolerance``, the last alone."""
    widest = max([0.0, *(-offset for offset in fleet.spreads[basis].judged_offsets)]) + IN_SAMPLE_MARGIN
    if not tolerance:
        return widest
    spread = entry.spread if basis == Basis.TIME or entry.at_max_clock is None else entry.at_max_clock.spread
    return max(base_tolerance(entry, config), config.noise_k * spread, widest)


def bands_at(alpha: float, fleets: Mapping[str, CaseFleet], entries: Mapping[str, Entry],
             config: GateConfig, fixed: Mapping[str, float] | None = None) -> Bands:
    """Every case's band per basis at one per-entry tail ``alpha``, never below its floor (``_floor``); ``fixed``:
    a chance of failing a case carries whatever its band (a levelled entry's plain band, ``adopting``)."""
    bands, chances = {}, {}
    quantiles = {dof: t_quantile(alpha, dof) for dof in {fleet.dof for fleet in fleets.values()}}
    for case, fleet in fleets.items():
        per_basis = {}
        chance = 0.0
        for basis, spread in fleet.spreads.items():
            band = max(_floor(fleet, entries[case], basis, config), quantiles[fleet.dof] * spread.scale)
            per_basis[basis] = band
            chance = max(chance, fail_chance(band, spread.scale, fleet.dof))
        bands[case], chances[case] = per_basis, min(1.0, chance + (fixed or {}).get(case, 0.0))
    return Bands(alpha=alpha, bands=bands, chances=chances, fixed=dict(fixed or {}))


def choose_bands(fleets: Mapping[str, CaseFleet], entries: Mapping[str, Entry], config: GateConfig,
                 target: float = TARGET_RED, fixed: Mapping[str, float] | None = None) -> Bands:
    """The bands of the largest per-entry tail ``α`` whose full gate is red at most ``target`` (bisection on
    log α; the rate falls as α does)."""
    low, high = 1e-12, target
    if bands_at(high, fleets, entries, config, fixed).rate <= target:
        return bands_at(high, fleets, entries, config, fixed)
    for _ in range(50):
        middle = math.sqrt(low * high)
        if bands_at(middle, fleets, entries, config, fixed).rate <= target:
            low = middle
        else:
            high = middle
    return bands_at(low, fleets, entries, config, fixed)


def with_bands(entries: Mapping[str, Entry], fleets: Mapping[str, CaseFleet], bands: Bands) -> dict[str, Entry]:
    """The entries with their hosts and bands (the time band on the entry, the cycles band on its figure at max
    clock); an entry whose runs came from one host is left as it is."""
    banded = {}
    for case, entry in entries.items():
        chosen = bands.bands.get(case)
        if not chosen:
            banded[case] = entry
            continue
        free = entry.at_max_clock
        if free is not None and Basis.CYCLES in chosen:
            free = replace(free, band=chosen[Basis.CYCLES])
        time_band = chosen.get(Basis.TIME, max(chosen.values()))
        banded[case] = replace(entry, hosts=fleets[case].hosts, band=time_band, at_max_clock=free)
    return banded


def resolution(fleet: CaseFleet, bands: Mapping[str, float]) -> float:
    """The smallest slowdown the entry catches in every committed run, on the basis the gate judges that run on: a
    run reading ``d`` against the entry shows a slowdown ``s`` as ``(1 + d)(1 − s) − 1``, caught below ``−band``."""
    return max([0.0, *(1.0 - (1.0 - bands[basis]) / (1.0 + offset) for basis, spread in fleet.spreads.items()
                       for offset in spread.judged_offsets)])


def with_resolutions(entries: Mapping[str, Entry], fleets: Mapping[str, CaseFleet], bands: Bands) -> dict[str, Entry]:
    return {case: replace(entry, resolution=resolution(fleets[case], bands.bands[case]))
            if case in fleets and entry.band is not None else entry for case, entry in entries.items()}


@dataclass(frozen=True)
class FleetBaseline:
    """What ``fleet_baseline`` made: the entries, the bands' choice and the spreads it came from."""

    entries: dict[str, Entry]
    bands: Bands
    fleets: dict[str, CaseFleet]


def fleet_baseline(runs: Sequence[Run], config: GateConfig, target: float = TARGET_RED, level: bool = False,
                   tolerances: Mapping[str, float] | None = None) -> FleetBaseline:
    """The fleet's entries: ``entries_from_runs``'s medians, each with its hosts, its band chosen by leaving one
    host out and its resolution; ``tolerances``: the hand-set ones the file holds, which the bands start from."""
    entries = {case: replace(entry, tolerance=(tolerances or {}).get(case))
               for case, entry in entries_from_runs(runs).items()}
    levels = run_levels(runs, entries) if level else None
    return banded_baseline(entries, case_fleets(runs, entries, config, levels), config, target)


def banded_baseline(entries: Mapping[str, Entry], fleets: dict[str, CaseFleet], config: GateConfig,
                    target: float = TARGET_RED, fixed: Mapping[str, float] | None = None) -> FleetBaseline:
    bands = choose_bands(fleets, entries, config, target, fixed)
    return FleetBaseline(entries=with_resolutions(with_bands(entries, fleets, bands), fleets, bands), bands=bands,
                         fleets=fleets)


def adopting(plain: FleetBaseline, levelled: FleetBaseline, cases: Sequence[str], config: GateConfig,
             target: float = TARGET_RED, levels: Sequence[float] = ()) -> FleetBaseline:
    """The baseline with the GEMV level taken out of ``cases`` alone, the bands chosen again. Such an entry keeps
    its plain band and resolution, which its test judges it on, and gains its levelled ones (``MemoryLevel``), which
    the end of the run judges it on; either failing fails the gate, so its chance of a false alarm counts the plain
    band's too. ``levels``: the fleet's runs' levels, whose range bounds a run's level (``memory_level``)."""
    fleets = {case: levelled.fleets[case] if case in cases else fleet for case, fleet in plain.fleets.items()}
    entries = {case: replace(entry, band=None, resolution=None) for case, entry in plain.entries.items()}
    mixed = banded_baseline(entries, fleets, config, target, {case: plain.bands.chances[case] for case in cases})
    family = sum(entry.family == LEVEL_FAMILY for entry in plain.entries.values())
    low, high = min([0.0, *levels]), max([0.0, *levels])
    final = dict(mixed.entries)
    for case in cases:
        made, before = mixed.entries[case], plain.entries[case]
        assert made.band is not None and made.resolution is not None
        block = MemoryLevel(value=fleets[case].spreads[Basis.TIME].middle, band=made.band, resolution=made.resolution,
                            low=low, high=high, cases=family)
        final[case] = replace(made, band=before.band, resolution=before.resolution, memory_level=block)
    return replace(mixed, entries=final)


def levelled_baseline(runs: Sequence[Run], config: GateConfig, target: float = TARGET_RED,
                      tolerances: Mapping[str, float] | None = None) -> tuple[FleetBaseline, FleetBaseline, list[str],
                                                                                FleetBaseline]:
    """``(plain, levelled everywhere, the cases adopting the level, the baseline adopting it there)``: what
    ``baseline from-fleet`` records (the last) and the page compares."""
    plain = fleet_baseline(runs, config, target, tolerances=tolerances)
    levelled_all = fleet_baseline(runs, config, target, level=True, tolerances=tolerances)
    gains = level_gains(plain, levelled_all)
    levels = run_levels(runs, plain.entries)
    return plain, levelled_all, gains, adopting(plain, levelled_all, gains, config, target, levels)


def level_gains(plain: FleetBaseline, levelled: FleetBaseline) -> list[str]:
    """The memory-bound entries whose resolution the run's own level lowers while their chance of failing a fresh
    host does not rise: where adopting it would narrow bands honestly."""
    gains = []
    for case, entry in levelled.entries.items():
        before = plain.entries.get(case)
        if (before is None or entry.resolution is None or before.resolution is None
                or entry.resolution >= before.resolution or Basis.TIME not in levelled.fleets.get(
                    case, CaseFleet(case, 0, {})).spreads):
            continue
        if levelled.bands.chances.get(case, 0.0) <= plain.bands.chances.get(case, 0.0):
            gains.append(case)
    return sorted(gains)


def most_that_can_catch(choices: Sequence[Mapping[str, CaseFleet]], entries: Mapping[str, Entry], must_catch: float,
                        config: GateConfig, target: float = TARGET_RED, tolerance: bool = True) -> int:
    """A bound: the most entries that could catch ``must_catch`` on every host with a fresh host's full gate red at
    most ``target``, whatever the split of that budget between entries. An entry catches it only with a band of at
    most ``1 − (1 − must_catch)(1 + d)`` for its fastest run ``d`` on each basis, never below its floor (with
    ``tolerance`` False, bands are allowed below the tolerance down to the widest committed slowdown); its chance of
    failing a fresh host at that band is the least over ``choices`` (the spreads with and without the level). The
    entries are taken cheapest first while the full gate's rate stays within ``target``."""
    chances = []
    for case, entry in entries.items():
        options = []
        for fleets in choices:
            fleet = fleets.get(case)
            if fleet is None:
                continue
            needed = {basis: 1.0 - (1.0 - must_catch) * (1.0 + max([0.0, *spread.judged_offsets]))
                      for basis, spread in fleet.spreads.items()}
            if all(band >= _floor(fleet, entry, basis, config, tolerance) for basis, band in needed.items()):
                options.append(max(fail_chance(needed[basis], spread.scale, fleet.dof)
                                   for basis, spread in fleet.spreads.items()))
        if options:
            chances.append(min(options))
    taken: list[float] = []
    for chance in sorted(chances):
        if red_rate([*taken, chance]) > target:
            break
        taken.append(chance)
    return len(taken)
