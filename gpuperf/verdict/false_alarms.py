"""The gate's false-alarm rate, measured from repeated runs of unchanged code (A/A), and the smallest slowdown
it would catch. Pure: runs are ``fleet.Run`` read from real runs' results files.

Two ways of asking "would the gate have gone red with nothing changed?":

- **Run against run.** For every ordered pair (A, B) of runs, each case of B is judged against an entry made
  from A's record (``check.entry_from_record``: A's figure, spreads, clock and kernels, as ``--update-baselines``
  would record them from that one run) by ``gate.decide`` itself, the rule and nothing like it. A single run
  as the baseline is the harshest reference there is: its band knows no other host.
- **Run against the baseline.** Each run judged against the committed entry, as the gate judges it.

An *alarm* is a verdict that turns the gate red: ``REGRESSED``, or ``UNRELIABLE`` because too noisy (gate mode
fails on a case without a verdict). The suite confirms a regression by measuring again before it stands; a
results file holds one figure per case, so these rates count single tries and bound the gate's from above.

Pairs grow with the square of the runs: past ``MAX_PAIRS`` ordered pairs, a seeded sample of that many (the same
pairs for every case) stands for them, so a year of nightly runs is read in seconds and the rate stays reproducible.

The smallest slowdown a judgement catches: a case judged with figure ``v`` against reference ``r`` and band
``t`` fails once its figure drops to ``r · (1 − t)``, so a slowdown ``s`` is caught when ``s > 1 − r (1 − t) / v``.
The case's figure is the largest of those over all its judgements: a slowdown that size fails on every host
pair and against the baseline, whatever the host's luck.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuperf.store.baseline import Entry
from gpuperf.verdict.check import entry_from_record
from gpuperf.verdict.fleet import Run, check_compatible
from gpuperf.verdict.gate import Context, GateConfig, is_noisy, rejudge
from gpuperf.verdict.memory_level import RunLevel, levelled, levelled_records
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status


@dataclass(frozen=True)
class Judgement:
    """One case of one run judged against one reference."""

    alarm: bool
    catches: float | None  # the smallest slowdown this judgement would fail; None without a verdict
    basis: str


@dataclass(frozen=True)
class CaseAlarms:
    """One case over every judgement: how often it raised an alarm, and the slowdown it always catches."""

    case_id: str
    pairs: int
    pair_alarms: int
    baseline_runs: int
    baseline_alarms: int
    catches: float | None
    basis: str  # how most of its judgements compared ("time" or "cycles")

    @property
    def pair_rate(self) -> float:
        return self.pair_alarms / self.pairs if self.pairs else 0.0

    @property
    def baseline_rate(self) -> float:
        return self.baseline_alarms / self.baseline_runs if self.baseline_runs else 0.0


@dataclass(frozen=True)
class SelectionAlarms:
    """The whole selection: in how many run pairs (and runs against the baseline) at least one case raised an
    alarm, which is the rate at which the gate of an unchanged tree goes red; ``pairs`` judged of ``all_pairs``."""

    cases: int
    pairs: int
    red_pairs: int
    baseline_runs: int
    red_runs: int
    all_pairs: int = 0

    @property
    def pair_rate(self) -> float:
        return self.red_pairs / self.pairs if self.pairs else 0.0

    @property
    def baseline_rate(self) -> float:
        return self.red_runs / self.baseline_runs if self.baseline_runs else 0.0


def judge(record: Record, entry: Entry, config: GateConfig, level: RunLevel | None = None) -> Judgement:
    """``record`` judged against ``entry`` by the gate's own rule, as a fresh measurement; with its run's memory
    ``level``, a levelled entry's record judged again at the end of the run too (``memory_level``)."""
    return _judgement(levelled(rejudge(record, entry, config, Context()), entry, level, config))


def judge_run(records: Mapping[str, Record], baseline: Mapping[str, Entry],
              config: GateConfig) -> dict[str, Judgement]:
    """Each record of one run that has an entry judged as the gate judges it: by its test, then, with the run's
    memory level, the levelled entries again at the end of the run (``memory_level.levelled_records``)."""
    cases = [case for case in records if case in baseline]
    decided = [rejudge(records[case], baseline[case], config, Context()) for case in cases]
    return dict(zip(cases, map(_judgement, levelled_records(decided, baseline, config))))


def _judgement(decided: Record) -> Judgement:
    alarm = decided.status in Status.FAILING or is_noisy(decided)
    catches = None
    if decided.delta_pct is not None and decided.tolerance is not None and not is_noisy(decided):
        ratio = 1.0 + decided.delta_pct / 100.0  # v / r; 0 for a figure that underflows against its reference
        catches = 0.0 if not ratio > 0 else max(0.0, 1.0 - (1.0 - decided.tolerance) / ratio)
    return Judgement(alarm=alarm, catches=catches, basis=decided.judged_on)


#: The most ordered run pairs judged; more runs are judged on a seeded sample of this many (``judged_pairs``).
MAX_PAIRS = 2000
PAIRS_SEED = 1


def judged_pairs(runs: int) -> list[tuple[int, int]]:
    """Every ordered pair of ``runs`` runs, or past ``MAX_PAIRS`` a seeded sample of that many, in order."""
    every = [(a, b) for a in range(runs) for b in range(runs) if a != b]
    return every if len(every) <= MAX_PAIRS else sorted(random.Random(PAIRS_SEED).sample(every, MAX_PAIRS))


def false_alarms(runs: Sequence[Run], baseline: Mapping[str, Entry] | None,
                 config: GateConfig) -> tuple[list[CaseAlarms], SelectionAlarms]:
    """Per case and for the selection: the A/A alarms over every ordered pair of runs and, with a baseline, of
    every run against it. Only clean records take part (``fleet.usable``): a throttled try is not a figure."""
    check_compatible(runs)
    clean = [run.clean() for run in runs]
    cases = sorted({case for records in clean for case in records})
    against = [judge_run(records, baseline, config) for records in clean] if baseline is not None else []
    red_pairs: set[tuple[int, int]] = set()
    red_runs: set[int] = set()
    results = []
    pairs = judged_pairs(len(clean))
    for case in cases:
        pair_judgements: list[Judgement] = []
        references: dict[int, Entry] = {}
        for a, b in pairs:
            reference, judged = clean[a], clean[b]
            if case in reference and case in judged:
                if a not in references:
                    references[a] = entry_from_record(reference[case])
                verdict = judge(judged[case], references[a], config)
                pair_judgements.append(verdict)
                if verdict.alarm:
                    red_pairs.add((a, b))
        baseline_judgements: list[Judgement] = []
        entry = baseline.get(case) if baseline is not None else None
        if entry is not None:
            for index, verdicts in enumerate(against):
                if case in verdicts:
                    verdict = verdicts[case]
                    baseline_judgements.append(verdict)
                    if verdict.alarm:
                        red_runs.add(index)
        every = pair_judgements + baseline_judgements
        caught = [j.catches for j in every if j.catches is not None]
        bases = Counter(j.basis for j in every if j.basis)
        results.append(CaseAlarms(
            case_id=case, pairs=len(pair_judgements), pair_alarms=sum(j.alarm for j in pair_judgements),
            baseline_runs=len(baseline_judgements), baseline_alarms=sum(j.alarm for j in baseline_judgements),
            catches=max(caught) if caught else None, basis=bases.most_common(1)[0][0] if bases else ""))
    selection = SelectionAlarms(cases=len(cases), pairs=len(pairs), red_pairs=len(red_pairs),
                                baseline_runs=len(runs) if baseline is not None else 0, red_runs=len(red_runs),
                                all_pairs=len(runs) * (len(runs) - 1))
    ordered = sorted(results, key=lambda c: (-(c.pair_rate + c.baseline_rate), -(c.catches or 0.0), c.case_id))
    return ordered, selection
