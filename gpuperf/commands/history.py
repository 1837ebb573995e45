"""``python -m gpuperf history ingest|show|changes``: the history's commands (thin: read, ask the pure modules,
print). ``changes`` exits 1 when a slowdown's first slow run is among a series' last ``--last`` runs;
``history page`` comes from ``history_page.py``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from gpuperf.commands.history_page import add_page_command
from gpuperf.history.backfill import selected_files
from gpuperf.history.database import History, HistoryError, resolve_target
from gpuperf.history.guard import damage_told
from gpuperf.history.engine import removed_unless_kept
from gpuperf.history import changes as history_changes
from gpuperf.history import offsets as host_offsets
from gpuperf.history.changepoints import DEFAULT_MIN_SIZE, DEFAULT_TAIL_HISTORY, DEFAULT_TAIL_RUNS, PLACEMENT_CONFIDENCE
from gpuperf.verdict.gate import Basis
from gpuperf.history.rows import RunSummary, started_instant
from gpuperf.history.changes import Change
from gpuperf.untrusted import terminal
from gpuperf.wiring.argtypes import positive_int
from gpuperf.wiring.options import HISTORY_TARGET, HISTORY_TARGET_AFTER, RUN_FILTERS, add_all

EXIT_OK = 0
EXIT_FOUND = 1
#: ``history changes --last``: runs of a series in which a slowdown's first run must lie to fail the check.
DEFAULT_LAST = 5
#: ``history show PART``: how many of the cases a part matches are listed when it names more than one.
LISTED_CASES = 20


def target_of(args: argparse.Namespace) -> str:
    """The history URL the command names."""
    url = resolve_target(args.history, os.environ, Path.cwd())
    if url is None:
        raise HistoryError("--history none: these commands need a history; name one with --history or "
                           "$GPUPERF_HISTORY")
    return url


@contextmanager
def reading(args: argparse.Namespace, check_aside: bool = False) -> Iterator[History]:
    """The history the command names, opened read-only: it is never made, migrated or changed. ``check_aside``:
    its pages are checked while the command reads, and found whole before the ``with`` block is left (a command
    that tells nothing inside it: ``History``'s ``check_aside``)."""
    with History(target_of(args), create=False, check_aside=check_aside) as history:
        yield history


def damage_is_told(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command``, whose history, damaged or edited by hand, is told as one line (``damage_told``) wherever
    its rows are read or shown."""
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        with damage_told(target_of(args)):
            return command(args)
    return run


def selected_runs(history: History, args: argparse.Namespace) -> dict[int, RunSummary]:
    """The runs ``--gpu`` and ``--since`` select; none is an error that says what the history holds."""
    runs = history.runs(gpu=args.gpu, since=args.since)
    if runs:
        return runs
    every = history.runs()
    if not every:
        raise HistoryError(f"the history {history.where} holds no runs; add some with python -m gpuperf history "
                           "ingest results/ (or run pytest perf_tests with this --history)")
    models = sorted({run.gpu_slug for run in every.values()})
    raise HistoryError(f"no run of the history {history.where} matches"
                       f"{' --gpu ' + args.gpu if args.gpu else ''}{' --since ' + args.since if args.since else ''}; "
                       f"it holds {len(every)} runs of {', '.join(models)}, the last started "
                       f"{list(every.values())[-1].started}: fix the filter")


def cmd_ingest(args: argparse.Namespace) -> int:
    """Files are found before the history is opened, and a history this command made is removed again when it
    fails or adds no run: a failed ingest leaves no new file behind."""
    url = target_of(args)
    paths = [Path(path) for path in args.paths]
    selected = selected_files(paths, args.exclude)
    with removed_unless_kept(url) as kept, damage_told(url):  # a damaged history is one line, as for a reader
        with History(url, create=True) as history:
            report = history.ingest(paths, exclude=args.exclude, selected=selected)
        kept[0] = bool(report.added)
    for path in report.added:  # the files held already are counted below, not listed: a nightly backfill holds most
        print(terminal(f"added {path}", None))
    for _path, reason in report.refused:
        print(terminal(f"refused {reason}", None))
    if report.ab_runs:
        print(terminal(f"left out {len(report.ab_runs)} files of A/B runs (each folder holding an ab.json: "
                       "python -m gpuperf ab --history appends its runs)", None))
    print(terminal(f"gpuperf: {len(report.added)} runs added, {len(report.present)} already present, "
                   f"{len(report.refused)} files refused ({history.where})", None))
    return EXIT_FOUND if report.refused else EXIT_OK


def _case(history: History, pattern: str) -> str:
    cases = history.case_ids(pattern)
    if len(cases) == 1:
        return cases[0]
    if not cases:
        raise HistoryError(f"no case matching {pattern!r} in the history {history.where}; "
                           "python -m gpuperf history ingest results/ adds runs")
    print(terminal(f"{len(cases)} cases match {pattern!r}:", None), file=sys.stderr)
    for case in cases[:LISTED_CASES]:  # a line each: an error is one line, so the list is printed before it
        print(f"  {terminal(case, None)}", file=sys.stderr)
    if len(cases) > LISTED_CASES:
        print(f"  … and {len(cases) - LISTED_CASES} more", file=sys.stderr)
    raise HistoryError(f"{len(cases)} cases match {pattern!r}; name one of those listed above (a longer part of "
                       "its id, or the whole id)")


def _short_host(host: str) -> str:
    return host[:12] if host.startswith("GPU-") else host


@damage_is_told
def cmd_show(args: argparse.Namespace) -> int:
    with reading(args) as history:
        case = _case(history, args.case)
        runs = selected_runs(history, args)
        rows = [row for row in history.values(case=case) if row[2] in runs]
        if not rows:
            raise HistoryError(f"{case} has no run among those selected{' (--gpu ' + args.gpu + ')' if args.gpu else ''}"
                               f"{' (--since ' + args.since + ')' if args.since else ''}; widen the filter")
        units = history.record_data(case, rows[-1][2])
        times = {method: history.time_figures(case, method or "", [row[2] for row in rows])
                 for method in {row[1] for row in rows}}
        offsets = _offsets_by_run(history_changes.series(rows, runs, history.series_classes()), runs)
    unit = terminal(str((units or {}).get("unit", "")))
    print(terminal(case, None))
    header = ("run", "started (UTC)", "kind", "GPU", "host", "host offset", "commit", "driver / CUDA / cuBLAS / CuPy",
              "method", f"judged ({unit})" if unit else "judged", "basis", "measured", "status")
    lines: list[tuple[str, ...]] = [header]
    order = {pk: position for position, pk in enumerate(runs)}
    previous: dict[tuple[str, str], str] = {}
    for _, method, run_pk, value, status, at_max_clock in sorted(rows, key=lambda row: order[row[2]]):
        run = runs[run_pk]
        measured = times[method].get(run_pk)
        series_of = (run.gpu_slug, method or "")
        moved = series_of in previous and previous[series_of] != run.host  # a change of host at this point
        previous[series_of] = run.host
        cells = (run.run_id[:10], utc_time(run.started), run.kind, run.gpu_slug,
                 ("→ " if moved else "") + _short_host(run.host), _offset_text(offsets.get((run_pk, method or ""))),
                 run.commit,
                 run.versions, method, "—" if value is None else f"{value:.5g}", Basis.CYCLES if at_max_clock else
                 Basis.TIME, "—" if measured is None else f"{measured:.5g}", status)
        lines.append(tuple(terminal(cell) for cell in cells))  # every cell but the figures comes from a results file
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    print(f"gpuperf: {len(rows)} runs of this case (→ host: another than the run before's; host offset: how it reads "
          "this case against its GPU model's other hosts, removed before change points are judged)")
    return EXIT_OK


def _offsets_by_run(grouped: Mapping[history_changes.SeriesKey, history_changes.Points],
                    runs: Mapping[int, RunSummary]) -> dict[tuple[int, str], history_changes.HostOffset]:
    """Each run's host's offset for the case, by run pk and method."""
    return {(pk, key.method): points.host_offsets[runs[pk].host]
            for key, points in grouped.items() for pk in points.pks.tolist()}


def _offset_text(offset: history_changes.HostOffset | None) -> str:
    if offset is None:
        return "—"
    return f"{100 * offset.offset:+.1f} %" + (" (class)" if offset.from_class else "")


def utc_time(started: str) -> str:
    """A run's start time in UTC to the second (``2026-11-30 12:49:51``): runs that started with other offsets
    read in the order they ran (their ``started`` as written where it is no time)."""
    instant = started_instant(started)
    return instant[:10] + " " + instant[11:19] if instant is not None else started[:25]


def _run_text(run: RunSummary) -> str:
    return f"run {run.run_id[:10]} ({utc_time(run.started)[:10]}, commit {run.commit})"


def describe_change(change: Change, unit: str = "") -> str:
    point = change.point
    how = " by the gate's rule" if point.by_gate else " in the last runs" if point.recent else ""
    basis = f" at max clock" if change.time_before is not None else ""
    parts = [f"{100 * point.relative:+.1f} %{basis}{how} ({point.before:.4g} → {point.after:.4g}"
             f"{' ' + unit if unit else ''})"]
    if change.time_before is not None and change.time_after is not None:
        parts.append(f"measured {100 * (change.time_after - change.time_before) / change.time_before:+.1f} % "
                     f"({change.time_before:.4g} → {change.time_after:.4g})")
    parts.append(f"between {_run_text(change.before)} and {_run_text(change.after)}")
    earliest, latest = change.earliest or change.before, change.latest or change.after
    if (earliest.pk, latest.pk) != (change.before.pk, change.after.pk):
        parts.append(f"could lie anywhere from after {_run_text(earliest)} to {_run_text(latest)}")
    parts.append(f"culprit in commits {earliest.commit}..{latest.commit} ({PLACEMENT_CONFIDENCE})")
    parts.append(f"{change.runs_since} run{'s' if change.runs_since != 1 else ''} since")
    if change.versions_changed:
        parts.append(f"versions changed: {change.versions_changed}")
    if change.kernels_changed:
        parts.append(f"kernels changed: {change.kernels_changed}")
    if change.basis_changed:
        parts.append(f"basis changed: {change.basis_changed}")
    if change.host_changed:
        parts.append(f"host changed: {_short_host(change.before.host)} ({100 * change.before_offset:+.1f} %) → "
                     f"{_short_host(change.after.host)} ({100 * change.after_offset:+.1f} %), offsets removed")
    return "; ".join(parts)


def _starts(groups: Sequence[tuple[str, str, int]]) -> list[int]:
    starts, total = [], 0
    for _, _, count in groups:
        starts.append(total)
        total += count
    return starts


def _concat(parts: list[np.ndarray], like: np.ndarray) -> np.ndarray:
    return np.concatenate(parts) if parts else like[:0]


@damage_is_told
def cmd_changes(args: argparse.Namespace) -> int:
    with reading(args, check_aside=True) as history:
        runs = selected_runs(history, args)
        groups, pks, values, bases = history.series_columns()
        if args.case:
            selected = [(start, group) for start, group in zip(_starts(groups), groups) if args.case in group[0]]
            if not selected:
                raise HistoryError(f"no case of the history {history.where} contains {args.case!r}; "
                                   "python -m gpuperf history show PART lists the cases a part names")
            groups = [group for _, group in selected]
            pks = _concat([pks[start:start + group[2]] for start, group in selected], pks)
            values = _concat([values[start:start + group[2]] for start, group in selected], values)
            bases = _concat([bases[start:start + group[2]] for start, group in selected], bases)
        grouped = history_changes.series_from_columns(groups, pks, values, bases, runs, history.series_classes())
        if not grouped:
            raise HistoryError(f"the runs selected from the history {history.where} hold no judged figure "
                               f"{'of a case containing ' + repr(args.case) + ' ' if args.case else ''}"
                               "(every record ERROR, UNRELIABLE or ANOMALY); widen --gpu/--since/--case")
        changes = history_changes.find_changes(
            grouped, runs, spreads_of=lambda key, pks: history.spreads(key.case_id, key.method, pks))
        changes = history_changes.with_kernels(changes, history.kernels_at(history_changes.around_pks(changes)))
        changes = history_changes.with_time_figures(
            changes, grouped, lambda key, pks: history.time_figures(key.case_id, key.method, pks))
    for host in host_offsets.hosts_reading_differently(history_changes.offset_rows(grouped), DEFAULT_MIN_SIZE):
        print(terminal(f"HOST {_short_host(host.host)} on {host.gpu_slug} reads {host.cases} cases "
                       f"{100 * host.low:+.1f} … {100 * host.high:+.1f} % (of {host.of} with an offset of its own) "
                       "against the "
                       f"model's other hosts (furthest: {host.example}): a host's offset, removed before change "
                       "points are judged, not a change", None))
    for change in changes:
        key = change.key
        print(terminal(f"{'SLOWDOWN' if change.slowdown else 'speed-up'} {key.case_id} [{key.method}] on "
                       f"{key.gpu_slug} host {_short_host(key.host)}: {describe_change(change)}", None))
    recent = history_changes.recent_slowdowns(changes, args.last)
    print(f"gpuperf: {len(changes)} change points in {len(grouped)} series over {len(runs)} runs; "
          f"{len(recent)} slowdown{'s' if len(recent) != 1 else ''} in a series' last {args.last} runs")
    return EXIT_FOUND if recent else EXIT_OK


def add_history_commands(commands: Any) -> None:
    """``history`` and its subcommands, on the CLI's subparsers."""
    history = commands.add_parser("history", help="every run's figures over time: ingest, show, changes, page")
    HISTORY_TARGET.add_to(history.add_argument)
    target = argparse.ArgumentParser(add_help=False)
    HISTORY_TARGET_AFTER.add_to(target.add_argument)
    sub = history.add_subparsers(dest="history_command", required=True, metavar="COMMAND")
    ingest = sub.add_parser("ingest", parents=[target], help="backfill from results.json files and folders of them",
                            description="Adds each results file named or found under a folder (results/, "
                                        "evidence/fleet/); a run already present is left alone. Exits 1 when a file "
                                        "was refused (it is named with the reason); the others are still added.")
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="leave out files whose name matches GLOB (e.g. '*-slow-*'); may be repeated")
    ingest.set_defaults(func=cmd_ingest)
    show = sub.add_parser("show", parents=[target],
                          help="one case's series: run, date, host, commit, versions, value, status")
    show.add_argument("case", metavar="CASE", help="a case id, or a part of one that names a single case")
    _filters(show)
    show.set_defaults(func=cmd_show)
    changes = sub.add_parser(
        "changes", parents=[target], help="change points per case and GPU model over its hosts; exit 1 on a recent slowdown",
        description="Per series (a case, its method and a GPU model, in run order over its hosts, each host's "
                    "offset for the case removed; hosts that read differently are named as such) the change points "
                    "of the figure the gate judges (at max clock where a run is judged on cycles, the measured "
                    "figure beside it; binary segmentation with a t-test, docs/history.md), with their size, the "
                    "runs and the commit range that bracket them and every version, kernel or basis change among "
                    "the runs they could have been placed at. An empty selection is an error. Exits 1 when a "
                    "slowdown's first slow run is among a series' last --last runs (a nightly check). A slowdown "
                    f"in a series' last {DEFAULT_TAIL_RUNS} runs is named at once: by a t-test against the "
                    f"runs before them when there are {DEFAULT_TAIL_HISTORY} or more, else by the gate's rule "
                    "against at least 2 of them.")
    _filters(changes)
    changes.add_argument("--case", metavar="TEXT", help="only cases whose id contains TEXT")
    changes.add_argument("--last", type=positive_int, default=DEFAULT_LAST, metavar="K",
                         help=f"fail on a slowdown among a series' last K runs (default {DEFAULT_LAST})")
    changes.set_defaults(func=cmd_changes)
    add_page_command(sub, [target])


def _filters(parser: argparse.ArgumentParser) -> None:
    add_all(parser.add_argument, RUN_FILTERS)
