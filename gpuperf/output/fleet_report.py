"""What a fleet's baseline can catch, in words and tables: the resolution summary (``baseline from-fleet``,
``fleet``, the gate's start), and the leave-one-host-out page section (``fleet --bands``, evidence/fleet.md).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuperf.output import table
from gpuperf.output.table import Column
from gpuperf.store.baseline import Change, Entry
from gpuperf.untrusted import markdown_text, terminal
from gpuperf.verdict.fleet_bands import TARGET_RED
from gpuperf.verdict.fleet_estimate import Estimate
from gpuperf.verdict.fleet_resolution import Cause, Resolutions, cannot_catch

#: Where a slowdown finer than an entry's resolution is judged.
AB_COMMAND = "python -m gpuperf ab"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f} %"


def resolution_summary(resolutions: Resolutions) -> str:
    """One line: how many entries catch the stated slowdown on every host, how many only a larger one, how many
    only one beyond the cap (the A/B gate's)."""
    parts = [f"resolution: {len(resolutions.catches)} of {resolutions.entries} entries catch a "
             f"{_pct(resolutions.must_catch)} slowdown on every host"]
    if resolutions.larger:
        parts.append(f"{len(resolutions.larger)} only a larger one (up to {_pct(resolutions.larger[0][1])})")
    if resolutions.ab_only:
        parts.append(f"{len(resolutions.ab_only)} only one beyond the cap {_pct(resolutions.cap)} (up to "
                     f"{_pct(resolutions.ab_only[0][1])}): the A/B gate judges those ({AB_COMMAND})")
    if resolutions.unknown:
        parts.append(f"{len(resolutions.unknown)} recorded on one host, without a resolution")
    return "; ".join(parts)


def resolution_banner(path: Path, entries: Mapping[str, Entry], must_catch: float) -> list[str]:
    """The start-of-run lines when entries of the baseline cannot catch ``must_catch`` on every host (none when
    every entry can, or none has a resolution)."""
    missed = cannot_catch(entries, must_catch)
    if not missed:
        return []
    widest = ", ".join(f"{table.short_case(case)} {_pct(found)}" for case, found in missed[:3])
    return [terminal(f"gpuperf: RESOLUTION: {len(missed)} of {len(entries)} entries of {path} cannot catch a "
                     f"{_pct(must_catch)} slowdown on every host of the fleet that recorded them (widest: {widest}); "
                     f"a smaller slowdown of those is the A/B gate's ({AB_COMMAND}); --must-catch sets the slowdown",
                     None)]


def held_lines(path: str, held: Sequence[Change]) -> list[str]:
    """What ``--update-baselines`` on one host would have changed in a fleet's entries, which it keeps: each entry's
    old → new figure and how many hosts the old and the new entry rest on, and the command that re-records the
    fleet."""
    if not held:
        return []
    from gpuperf.output.report import format_changes

    hosts = max(change.old.hosts for change in held if change.old is not None)
    slug = Path(path).stem
    return [f"gpuperf: kept {len(held)} fleet entr{'y' if len(held) == 1 else 'ies'} of {path} (each resting on up "
            f"to {hosts} hosts): the new entries would rest on this 1 host, whose spread must not narrow a fleet's "
            "band; what they would change (old → new):", format_changes(held),
            f"gpuperf: to move the fleet's entries, add this run's results to baselines/{slug}.runs and re-record: "
            f"python -m gpuperf baseline from-fleet {path} @baselines/{slug}.runs"]


@dataclass(frozen=True)
class Missed:
    """One entry that cannot catch the stated slowdown, with its cause (``fleet_resolution.cause``)."""

    case_id: str
    resolution: float
    hosts: int
    cause: Cause


MISSED_COLUMNS: tuple[Column[Missed], ...] = (
    Column("case", "left", lambda m: table.short_case(m.case_id), lambda m: table.code_span(table.short_case(m.case_id))),
    Column("judged on", "left", lambda m: m.cause.basis),
    Column("resolution", "right", lambda m: _pct(m.resolution)),
    Column("band", "right", lambda m: _pct(m.cause.band)),
    Column("fastest host reads", "right", lambda m: f"{100 * m.cause.fastest:+.1f} %"),
    Column("fresh-host scale", "right", lambda m: _pct(m.cause.scale)),
    Column("hosts", "right", lambda m: str(m.hosts)),
)


def _estimate_line(name: str, estimate: Estimate) -> str:
    return (f"{name}: expected red full gates per 100 fresh-host runs {100 * estimate.rate:.2f} (95 % interval over "
            f"resampled hosts {100 * estimate.low:.2f}–{100 * estimate.high:.2f}); held out, {estimate.held_out_red} "
            f"of {estimate.held_out_runs} runs red against bands made without their host (one-sided 95 % bound "
            f"{100 * estimate.held_out_bound:.1f} per 100)")


@dataclass(frozen=True)
class Ways:
    """The resolutions three ways: as recorded (the host's memory level taken out where it lowers the entry's
    resolution without raising its chance of a false alarm), with no level, and with every memory-bound entry
    levelled."""

    recorded: Resolutions
    plain: Resolutions
    levelled: Resolutions


@dataclass(frozen=True)
class Bound:
    """The most entries that could catch the stated slowdown on every host within the red-gate target, whatever the
    split of the budget (``fleet_bands.most_that_can_catch``): with bands no narrower than the tolerance, and with
    bands down to the widest committed slowdown; of ``entries``."""

    at_tolerance: int
    below_tolerance: int
    entries: int


def format_bands(estimates: tuple[Estimate, Estimate, Estimate], resolutions: Ways, gains: Sequence[str],
                 missed: Sequence[Missed], bound: Bound, markdown: bool = False) -> str:
    """The page section: the estimate and the resolution summary each way, and the entries that cannot catch the
    stated slowdown as recorded, with their causes."""
    recorded, plain, levelled = estimates
    lines = [
        f"{recorded.hosts} hosts, {recorded.held_out_runs} runs.",
        _estimate_line(f"As recorded, the run's GEMV level taken out of the {len(gains)} memory-bound entries where it "
                       "lowers the resolution without raising the entry's chance of a false alarm (judged both ways, "
                       "each a failure)", recorded) + ". " + resolution_summary(resolutions.recorded) + ".",
        _estimate_line("With no level taken out", plain) + ". " + resolution_summary(resolutions.plain) + ".",
        _estimate_line("With each run's GEMV level taken out of every memory-bound entry", levelled) + ". "
        + resolution_summary(resolutions.levelled) + ".",
        f"Bound: whatever the split of the 1-in-{round(1 / TARGET_RED)} budget between entries, with or without the "
        f"level, at most {bound.at_tolerance} of {bound.entries} entries could catch a "
        f"{_pct(resolutions.recorded.must_catch)} slowdown on every host with bands no narrower than the tolerance, "
        f"and at most {bound.below_tolerance} with bands allowed down to the widest slowdown a committed run shows.",
    ]
    text = (lambda line: markdown_text(line, None)) if markdown else (lambda line: terminal(line, None))
    render = table.render_markdown if markdown else table.render_text
    separator = "\n\n" if markdown else "\n"
    return separator.join(map(text, lines)) + "\n\n" + render(MISSED_COLUMNS, missed)
