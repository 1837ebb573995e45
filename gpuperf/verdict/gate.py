"""The gate: the one rule from a measured figure and its baseline entry to a status, and from statuses to
the outcome of a test and of a run.

Everything that decides lives here, pure (no CuPy, no pytest):

- **Tolerance.** ``effective = min(max(tolerance, k × recorded spread, recorded run spread), cap)``; the run
  spread is that of a baseline recorded from several runs (``fleet.py``), zero otherwise. Only the *recorded* spread
  widens the band, and never past the cap (``--max-tolerance``, default twice the tolerance). The spread of
  the measurement being judged never widens it: a slowdown that also adds noise would otherwise widen its
  own gate. A measurement noisier than any entry may be recorded with (``k × spread > cap``) is
  re-measured and, if still too noisy, is ``UNRELIABLE`` (noisy), never ``PASS``.
- **Comparison.** Higher is better for every gated metric. A figure that is not a positive finite number
  (NaN, inf, zero, negative) is an ``ERROR``, never a verdict.
- **Confirmation.** A ``REGRESSED`` or noisy first result is measured again; of the two, the better figure
  among the clean verdicts stands (a transient slowdown passes, a real one is confirmed twice).
- **Status order** (what needs a person first) and which statuses are verdicts.
- **Outcome policy** of one test (fail / skip / pass); a run's in gate mode is evidence, ``accounting.run_failures``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

from gpuperf.measure.kernel_records import SAME_KERNELS, describe_change, ncu_command
from gpuperf.measure.measurement import Method
from gpuperf.measure.stats import Band
from gpuperf.store.baseline import Entry
from gpuperf.store.records import Reason, Record
from gpuperf.untrusted import escaped
from gpuperf.verdict.gate_config import GateConfig as GateConfig, Policy  # the configuration's home
from gpuperf.vocabulary import Basis as Basis, Status  # Basis: re-exported, the gate's word

#: Display and counting order: what needs a person first.
STATUS_ORDER: tuple[str, ...] = (
    Status.REGRESSED, Status.ANOMALY, Status.ERROR, Status.UNRELIABLE, Status.NOT_COMPARABLE,
    Status.NOT_RECORDED, Status.NO_BASELINE, Status.IMPROVED, Status.UPDATED, Status.DRY_RUN, Status.PASS,
)
#: Statuses that are a verdict on a baselined case: the case was measured and compared.
VERDICTS = frozenset({Status.PASS, Status.IMPROVED, Status.REGRESSED, Status.ANOMALY, Status.UPDATED})
#: What a dry run's accounting counts as accounted for: a verdict, or a case that would get one on the GPU.
DRY_VERDICTS = VERDICTS | {Status.DRY_RUN}
#: Statuses that do not fail the test but deserve a look.
FLAGGED = frozenset({Status.UNRELIABLE, Status.NOT_COMPARABLE, Status.NOT_RECORDED, Status.NO_BASELINE,
                     Status.IMPROVED})
#: How far below the GPU's maximum SM clock a case's calls may run (now, or when its entry was recorded) and
#: still be judged on time. Beyond it the case ran at the power limit: its time is a property of the host's
#: power state as much as of the kernel, so it is judged on cycles per call (``Basis``). Set from the H200
#: runs (evidence/clock.md, "The rule"): the FP32 cases that never reach the power limit ran within 1.4 % of
#: 1980 MHz, the power-capped GEMMs 8–32 % below it.
CLOCK_MOVED = 0.02


def valid_figure(value: float | None) -> bool:
    """A figure that can be judged: a positive finite number."""
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def base_tolerance(entry: Entry, config: GateConfig) -> float:
    """The entry's hand-set tolerance, else ``--tolerance``."""
    return entry.tolerance if entry.tolerance is not None else config.tolerance


def entry_cap(entry: Entry, config: GateConfig) -> float:
    """The cap of this entry's band: ``--max-tolerance``, or twice the tolerance it is judged with (so a
    tolerance set by hand in the file is never silently cut by a cap derived from ``--tolerance``)."""
    return config.cap_for(base_tolerance(entry, config))


def needed_tolerance(entry: Entry, config: GateConfig) -> float:
    """The band an entry asks for before the cap: its tolerance, widened by its recorded sample spread and,
    for an entry recorded from several runs, by how far those runs' figures ranged (``fleet.py``); for a fleet's
    entry, by the band chosen from its hosts' spread instead (``fleet_bands.py``), which that range only bounds."""
    floor = entry.band if entry.band is not None else entry.run_spread
    return max(base_tolerance(entry, config), config.noise_k * entry.spread, floor)


def band_cap(entry: Entry, config: GateConfig) -> float:
    """The cap of the band: ``entry_cap``, or a fleet's entry's band where that is wider. The band was chosen from
    the hosts' measured spread so that a fresh host is red at most one gate in a hundred; cutting it to the cap
    would make that host's readings false alarms. What such an entry cannot catch is stated (its resolution)."""
    return max(entry_cap(entry, config), entry.band or 0.0)


def effective_tolerance(entry: Entry, config: GateConfig) -> float:
    """``min(max(tolerance, k × recorded spread, recorded run spread or fleet band), cap)``; the spread of the run
    being judged never enters."""
    return min(needed_tolerance(entry, config), band_cap(entry, config))


def too_noisy(spread: float | None, config: GateConfig, cap: float | None = None) -> bool:
    """A measurement noisier than any entry may be recorded with: its own spread, scaled like a recorded one,
    would need a band wider than the cap. Such a figure says more about the machine than about the kernel.

    The threshold is the cap rather than the entry's own band on purpose: sample spreads wander between runs
    (a power-capped GEMM's IQR went 1.7 % → 7 % → 1.7 % on one H200), and a rule at the entry's band would
    turn every second run of such a case into a coin toss, while the median it is judged on stays precise."""
    return spread is not None and config.noise_k * spread > (config.cap if cap is None else cap)


@dataclass(frozen=True)
class Comparison:
    status: str  # Status.PASS | IMPROVED | REGRESSED | ERROR
    baseline: float
    delta: float  # (measured - baseline) / baseline; NaN when the figure is not valid
    tolerance: float


def compare(value: float, entry: Entry, config: GateConfig, basis: str = Basis.TIME) -> Comparison:
    """Higher is better for every gated metric (TFLOPS, GB/s, ratios). ``basis`` cycles compares the figures
    at max clock, with the band their own spreads give."""
    reference = entry if basis == Basis.TIME else clock_free_entry(entry)
    tolerance = effective_tolerance(reference, config)
    if not valid_figure(value) or not valid_figure(reference.value):
        return Comparison(Status.ERROR, reference.value, math.nan, tolerance)
    delta = (value - reference.value) / reference.value
    status = Status.REGRESSED if delta < -tolerance else Status.IMPROVED if delta > tolerance else Status.PASS
    return Comparison(status, reference.value, delta, tolerance)


def clock_free_entry(entry: Entry) -> Entry:
    """The entry as its figure at max clock: that value, and the spreads its cycles were recorded with."""
    if entry.at_max_clock is None:
        raise ValueError("the entry has no figure at max clock")
    free = entry.at_max_clock
    return replace(entry, value=free.value, spread=free.spread, run_spread=free.run_spread,
                   band=free.band if entry.band is not None else None)


def clock_drop(clock_mhz: float | None, max_clock_mhz: float | None) -> float:
    """How far below the maximum a clock ran, as a fraction (0 when either is unknown)."""
    if not clock_mhz or not max_clock_mhz:
        return 0.0
    return max(0.0, 1.0 - clock_mhz / max_clock_mhz)


def figure_at_max_clock(clock_bound: bool | None, value_at_max_clock: float | None) -> float | None:
    """A record's figure at max clock, where it has one: a clock-bound case's (``Record.clock_bound``: compute-bound
    by the roofline), else ``None``. A memory-bound call's time does not follow the SM clock, so its cycles scaled
    to the maximum clock give a figure no clock would (FP16 GEMV opN 16384² read 4824 GB/s "at max clock", above the
    H200's 4814 GB/s memory peak). The one statement of that rule: the verdict, the run tables, the fleet's spreads
    and the history all read the figure at max clock through here. The record and its baseline entry keep every
    traced case's cycles as a figure at max clock (``check.clock_free``), so an entry recorded today can be read on
    cycles by any host, and by a rule that later reads more cases on cycles, without re-recording it."""
    return value_at_max_clock if clock_bound is True and valid_figure(value_at_max_clock) else None


def own_basis(clock_bound: bool | None, value_at_max_clock: float | None, call_clock_mhz: float | None,
              max_clock_mhz: float | None) -> str:
    """What a record is judged on by itself (its entry's clock aside): ``Basis.CYCLES`` where it has a figure at max
    clock (``figure_at_max_clock``) and its calls ran more than ``CLOCK_MOVED`` below the maximum clock, else
    ``Basis.TIME``. The history judges each run on it (``judge_basis`` adds the entry's clock and kernels)."""
    if figure_at_max_clock(clock_bound, value_at_max_clock) is None:
        return Basis.TIME
    return Basis.CYCLES if clock_drop(call_clock_mhz, max_clock_mhz) > CLOCK_MOVED else Basis.TIME


def judge_basis(record: Record, entry: Entry, kernels: str) -> str:
    """``Basis.CYCLES`` for a clock-bound case (``Record.clock_bound``: compute-bound by the roofline) whose calls
    ran below the maximum clock (now or when recorded: ``CLOCK_MOVED``), when both sides have a figure at max
    clock and the kernels are the same (``kernels`` is ``describe_change``'s text); otherwise ``Basis.TIME``.
    A memory-bound call is not judged on cycles: its time does not follow the SM clock, so its cycles would. A changed kernel is judged on time: a new kernel that burns more power
    runs at a lower clock, and that is a real slowdown."""
    if (figure_at_max_clock(record.clock_bound, record.value_at_max_clock) is None or entry.at_max_clock is None
            or kernels != SAME_KERNELS):
        return Basis.TIME
    return Basis.CYCLES if clock_moved(record.call_clock_mhz, entry, record.max_clock_mhz) else Basis.TIME


def clock_moved(call_clock_mhz: float | None, entry: Entry, max_clock_mhz: float | None) -> bool:
    """Whether the calls ran more than ``CLOCK_MOVED`` below the maximum clock, now or when ``entry`` was recorded."""
    recorded = entry.at_max_clock.clock_mhz if entry.at_max_clock is not None else None
    return max(clock_drop(call_clock_mhz, max_clock_mhz), clock_drop(recorded, max_clock_mhz)) > CLOCK_MOVED


def stopping_band(entry: Entry | None, config: GateConfig, clock_bound: bool | None,
                  max_clock_mhz: float | None) -> Band:
    """The bands the verdict will judge a case within, for the stopping rule (``stats.Band``): its entry's
    effective tolerance on time (without an entry, the configured tolerance) and, for a clock-bound case whose
    entry has a figure at max clock, the band of that figure, read when the calls' clock moved (``judge_basis``'s
    rule, the kernels taken to be the same: a kernel change is rare, and then its time is simply less precise)."""
    if entry is None:
        return Band(time=config.tolerance)
    time = effective_tolerance(entry, config)
    if clock_bound is not True or entry.at_max_clock is None:
        return Band(time=time)
    return Band(time=time, cycles=effective_tolerance(clock_free_entry(entry), config),
                on_cycles=partial(clock_moved, entry=entry, max_clock_mhz=max_clock_mhz))


def round_stopping_band(threshold: float, clock_bound: bool | None, max_clock_mhz: float | None) -> Band:
    """The bands an A/B round is sampled to: the A/B threshold on time and, for a clock-bound case, on its figure at
    max clock, read when the calls' clock moved (the paired rule's basis, ``own_basis``). No entry enters: the two
    trees may hold other baselines, and the paired verdict reads none."""
    if clock_bound is not True:
        return Band(time=threshold)
    return Band(time=threshold, cycles=threshold,
                on_cycles=lambda clock: clock_drop(clock, max_clock_mhz) > CLOCK_MOVED)


#: ``Record.extra`` key: how the kernels of a case differ from its baseline entry's, when they do.
KERNEL_CHANGE = "kernel_change"


def comparable_methods(recorded: str, measured: str) -> bool:
    """Figures taken by different methods are not compared (an unheld batch, another flush, another clock)."""
    return not recorded or recorded == measured


@dataclass(frozen=True)
class Context:
    """What the verdict needs besides the figures: the mode, where to point the user, what changed."""

    update: bool = False  # --update-baselines: record, don't gate
    gpu_slug: str = ""
    record_command: str = "pytest perf_tests --update-baselines"
    version_changes: tuple[str, ...] = ()  # "driver 570.86.15 → 580.159.04", since the baseline was recorded


def _join(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


def decide(record: Record, entry: Entry | None, config: GateConfig, context: Context,
           findings: Sequence[str] = (), unreliable_reason: str = "") -> Record:
    """The status and note of one measured case (``record`` carries the figure and its spread); how its kernels
    differ from the entry's, when they do, travels in ``extra[KERNEL_CHANGE]``."""
    change = describe_change(entry.kernels, record.kernels) if entry is not None else ""
    decided = _decide(record, entry, config, context, findings, unreliable_reason, change)
    if change and change != SAME_KERNELS:
        decided = replace(decided, extra={**decided.extra, KERNEL_CHANGE: change})
    return decided


def rejudge(record: Record, entry: Entry, config: GateConfig, context: Context, findings: Sequence[str] = (),
            unreliable_reason: str = "") -> Record:
    """``record`` judged afresh against ``entry`` (another run's figure, another baseline): the verdict it carries
    (status, note, band, basis) is dropped first, so only what ``decide`` says now stands."""
    fresh = replace(record, status=Status.PASS, note="", baseline=None, delta_pct=None, tolerance=None,
                    judged_on="", reliable=not unreliable_reason, reason=Reason.NONE, unreliable_reason="")
    return decide(fresh, entry, config, context, findings, unreliable_reason)


def with_profile_hint(record: Record) -> Record:
    """A failing case's note, ended by a ready profiling command for its dominant kernel (when its kernels are
    known). Applied last, after every other note, so the command is the note's end."""
    if record.status not in Status.FAILING or not record.kernels:
        return record
    return replace(record, note=_join(record.note, f"profile it: {ncu_command(record.kernels, record.nodeid)}"))


def _without_entry(record: Record, entry: Entry | None, context: Context) -> Record | None:
    """The record of a case its entry cannot judge (none, or one of another metric), else ``None``: the same
    words whether the figure was measured or not (``decide_dry``)."""
    if entry is None:
        return replace(record, status=Status.NO_BASELINE, note=_join(
            f"no baseline for this case on {context.gpu_slug}: record it with {context.record_command}", record.note))
    if entry.metric != record.metric:
        return replace(record, status=Status.NOT_COMPARABLE, note=_join(
            f"not comparable: the baseline holds {entry.metric}, this case measures {record.metric}; re-record "
            f"it with {context.record_command}", record.note))
    return None


def decide_dry(record: Record, entry: Entry | None, context: Context) -> Record:
    """A dry run's record (``record`` has no figure: nothing was launched): judged as far as it can be without one,
    so a missing entry or one of another metric reads as it would on the GPU; else ``DRY_RUN``."""
    unjudgeable = _without_entry(record, entry, context)
    if unjudgeable is not None or entry is None:
        return unjudgeable or record
    return replace(record, status=Status.DRY_RUN, note=_join(
        f"dry run: not launched; its baseline entry ({entry.value:.4g} {entry.unit}) would judge it", record.note))


def _decide(record: Record, entry: Entry | None, config: GateConfig, context: Context,
            findings: Sequence[str], unreliable_reason: str, kernels: str) -> Record:
    """``kernels``: how the case's kernels compare with the entry's (``describe_change``), for the note."""
    note = record.note
    if not valid_figure(record.value):
        return replace(record, status=Status.ERROR, note=_join(
            f"measured {record.value!r} {record.unit}: not a positive finite number, so no verdict (a timing "
            "or work-count fault; run the case alone with -k to see it)", note))
    if findings:
        return replace(record, status=Status.ANOMALY, note=_join(*findings, note))
    if unreliable_reason:
        return replace(record, status=Status.UNRELIABLE, reliable=False, reason=Reason.THROTTLED,
                       unreliable_reason=unreliable_reason, note=_join(f"unreliable: {unreliable_reason}", note))
    if context.update:
        return _recorded(record, entry, config, context)
    unjudgeable = _without_entry(record, entry, context)
    if unjudgeable is not None or entry is None:
        return unjudgeable or record
    if not comparable_methods(entry.method, record.method):
        untraced = Method.traced(entry.method) and not Method.traced(record.method)
        why = ("kernel tracing (CUPTI) was unavailable in this run, so the call was timed with events (the run "
               "header says why)" if untraced else
               f"re-record it with {context.record_command} if the method change is intended")
        return replace(record, status=Status.NOT_COMPARABLE, note=_join(
            f"not comparable: recorded by method {entry.method}, measured by {record.method}; {why}", note))
    basis = judge_basis(record, entry, kernels)
    judged_value = record.value if basis == Basis.TIME else record.value_at_max_clock
    result = compare(judged_value or math.nan, entry, config, basis)
    if result.status == Status.ERROR:
        return replace(record, status=Status.ERROR, baseline=entry.value, note=_join(
            f"baseline value {result.baseline!r} is not a positive finite number, so no verdict: restore the "
            "baseline from version control, then re-record", note))
    base = replace(record, baseline=entry.value, delta_pct=100 * result.delta, tolerance=result.tolerance,
                   judged_on=basis)
    cap = entry_cap(entry, config)
    spread = record.rel_iqr if basis == Basis.TIME else record.cycles_rel_iqr
    if too_noisy(spread, config, cap):
        return replace(base, status=Status.UNRELIABLE, reliable=False, reason=Reason.NOISY, note=_join(
            f"noisy: {'cycles ' if basis == Basis.CYCLES else ''}spread {100 * (spread or 0):.1f} % would need "
            f"a band above the cap {100 * cap:.1f} %; judged against {100 * result.tolerance:.1f} % it could "
            "pass or fail by chance (another process, throttling?)", note))
    versions = f"versions changed since the baseline: {', '.join(context.version_changes)}" \
        if context.version_changes else ""
    clock = _join(_clock_note(record, entry, result, basis, kernels), resolution_note(entry, config))
    if result.status == Status.REGRESSED:
        return replace(base, status=Status.REGRESSED, note=_join(
            f"{100 * -result.delta:.1f} % below baseline{' at max clock' if basis == Basis.CYCLES else ''} "
            f"(tolerance {100 * result.tolerance:.1f} %)", clock, kernels, versions, note))
    if result.status == Status.IMPROVED:
        return replace(base, status=Status.IMPROVED, note=_join(
            f"improved {100 * result.delta:.1f} %{' at max clock' if basis == Basis.CYCLES else ''} — update "
            f"the baseline: {context.record_command}", clock, kernels, versions, note))
    return replace(base, status=Status.PASS, note=_join(clock, note))


def resolution_note(entry: Entry, config: GateConfig) -> str:
    """A fleet's entry that cannot catch the stated slowdown (``--must-catch``) on every host says so in its note."""
    if entry.resolution is None or entry.resolution <= config.must_catch:
        return ""
    levelled = entry.memory_level.resolution if entry.memory_level is not None else None
    if levelled is not None and levelled < entry.resolution:
        return (f"resolution {100 * entry.resolution:.1f} % here, {100 * levelled:.1f} % with the run's memory level "
                "taken out (judged at the end of a run that measured the GEMVs)"
                + ("" if levelled <= config.must_catch else "; a smaller slowdown than that is the A/B gate's"))
    return (f"resolution {100 * entry.resolution:.1f} % (a smaller slowdown than that is not caught on every host: "
            "the A/B gate's)")


def _clock_note(record: Record, entry: Entry, result: Comparison, basis: str, kernels: str) -> str:
    """What the clock did to a case judged on cycles, and why a kernel change was judged on time."""
    if basis == Basis.TIME:
        moved = entry.at_max_clock is not None and \
            clock_drop(record.call_clock_mhz, record.max_clock_mhz) > CLOCK_MOVED
        if moved and kernels and kernels != SAME_KERNELS:
            return "judged on time, not cycles: the kernels changed, and a kernel that burns more power is slower"
        return ""
    free = entry.at_max_clock
    assert free is not None
    time_delta = (record.value - entry.value) / entry.value if valid_figure(entry.value) else math.nan
    drop = clock_drop(record.call_clock_mhz, record.max_clock_mhz)
    then = f", {free.clock_mhz:.0f} MHz when recorded" if free.clock_mhz else ""
    only_clock = "; the time drop is only the clock" if time_delta < -result.tolerance and \
        result.status != Status.REGRESSED else ""
    return (f"judged on cycles: host ran at {record.call_clock_mhz or 0:.0f} MHz, {100 * drop:.0f} % below max"
            f"{then}; time {100 * time_delta:+.1f} %, cycles {100 * result.delta:+.1f} %{only_clock}")


def _recorded(record: Record, entry: Entry | None, config: GateConfig, context: Context) -> Record:
    """``--update-baselines``: an entry is written only if its own spread fits under the cap."""
    delta = 100 * (record.value - entry.value) / entry.value if entry else None
    spread = record.rel_iqr or 0.0
    if record.clock_bound and valid_figure(record.value_at_max_clock) and record.cycles_rel_iqr is not None:
        spread = min(spread, record.cycles_rel_iqr)  # such a case is judged on cycles whenever its clock moves
    if config.noise_k * spread > config.cap:
        return replace(record, status=Status.NOT_RECORDED, baseline=entry.value if entry else None,
                       delta_pct=delta, note=_join(
                           f"not recorded: spread {100 * spread:.1f} % would need a band of "
                           f"{100 * config.noise_k * spread:.1f} %, above the cap {100 * config.cap:.1f} %; "
                           "fix its method (longer or more stable samples) or mark the case slow with the "
                           "reason in its case table", record.note))
    return replace(record, status=Status.UPDATED, baseline=entry.value if entry else None, delta_pct=delta)


def is_noisy(record: Record) -> bool:
    """Too noisy to judge (re-measured before it stands), as opposed to measured while throttled or shared."""
    return record.status == Status.UNRELIABLE and record.reason == Reason.NOISY


def needs_confirmation(record: Record) -> bool:
    """A regression, or a measurement too noisy to judge, is measured again before it stands."""
    return record.status == Status.REGRESSED or is_noisy(record)


def confirm(first: Record, second: Record) -> Record:
    """The standing result of a measurement and its re-measurement.

    Of the tries that are a verdict (PASS, IMPROVED, REGRESSED), the better figure stands: a transient
    slowdown passes, a regression must show twice (or once, with the other try unable to say otherwise: too
    noisy, throttled, not comparable). With no verdict in either try, the second stands (``UNRELIABLE``).
    """
    judged = [r for r in (first, second) if r.status in (Status.PASS, Status.IMPROVED, Status.REGRESSED)]
    chosen = max(judged, key=_standing) if judged else second
    tries = f"re-measured: first {first.value:.4g} {first.unit} ({first.status}), " \
            f"second {second.value:.4g} ({second.status})"
    return replace(chosen, note=_join(chosen.note, tries))


def _standing(record: Record) -> float:
    """How well a try did against its baseline: its judged Δ (time or cycles), else its figure."""
    return record.delta_pct if record.delta_pct is not None else record.value


def outcome(records: Sequence[Record], policy: Policy) -> tuple[str, str]:
    """``("fail" | "skip" | "pass", message)`` for one test from the records of its checks."""
    # every line escaped: a note quotes kernel names and ids the suite did not write
    failing = [r for r in records if r.status in Status.FAILING]
    if failing:
        return "fail", "\n".join(escaped(failure_line(r)) for r in failing)
    unmeasured = [r for r in records if r.status in (Status.UNRELIABLE, Status.NOT_COMPARABLE)]
    if unmeasured and policy.on_unreliable != "pass":
        return policy.on_unreliable, "\n".join(escaped(f"{r.status} {r.case_id}: {r.note}") for r in unmeasured)
    improved = [r for r in records if r.status == Status.IMPROVED] if policy.strict else []
    if improved:
        return "fail", "\n".join(escaped(f"--strict-baselines: {r.case_id}: {r.note}") for r in improved)
    missing = [r for r in records if r.status == Status.NO_BASELINE]
    if missing and policy.missing != "pass":
        return policy.missing, "\n".join(escaped(f"{r.case_id}: {r.note}") for r in missing)
    return "pass", ""


def failure_line(record: Record) -> str:
    if record.status == Status.REGRESSED and record.baseline is not None and record.delta_pct is not None:
        return (f"REGRESSED {record.case_id}: {record.value:.4g} {record.unit} vs baseline {record.baseline:.4g} "
                f"({record.delta_pct:+.1f} %, tolerance {100 * (record.tolerance or 0):.1f} %); {record.note}")
    figure = f"{record.value:.4g} {record.unit}" if valid_figure(record.value) else "no figure"
    return f"{record.status} {record.case_id}: {figure}; {record.note}"


def status_rank(status: str) -> int:
    try:
        return STATUS_ORDER.index(status)
    except ValueError:
        return len(STATUS_ORDER)
