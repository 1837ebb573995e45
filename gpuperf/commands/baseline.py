"""``python -m gpuperf baseline diff|check|seal|drop|from-runs``: working with baseline files, each subcommand
with its own parser.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuperf.commands.common import EXIT_ERROR, EXIT_OK, FIGURES, CliError, other_gpu_line
from gpuperf.commands.fleet import runs_from
from gpuperf.output import diff, report
from gpuperf.output.fleet_report import resolution_summary
from gpuperf.untrusted import markdown_text, terminal
from gpuperf.output.results import load_figures
from gpuperf.store.baseline import (BaselineError, BaselineFile, Integrity, check_file_name, load_baseline,
                                    update_baseline)
from gpuperf.store.baseline_maintenance import drop_entries, seal_baseline
from gpuperf.verdict.check import baseline_header
from gpuperf.verdict.fleet import entries_from_runs, with_clock_figures
from gpuperf.verdict.fleet_bands import TARGET_RED, levelled_baseline
from gpuperf.verdict.fleet_resolution import classify
from gpuperf.verdict.gate import GateConfig
from gpuperf.verdict.gate_config import DEFAULT_MUST_CATCH
from gpuperf.wiring.argtypes import non_negative_float
from gpuperf.wiring.options import ALLOW_OTHER_GPU, MUST_CATCH, RUNS

#: ``baseline diff``: changes beyond ±this many percent are counted in the summary line.
DEFAULT_THRESHOLD_PCT = 5.0


def cmd_baseline_diff(args: argparse.Namespace) -> int:
    old, new = load_figures(args.old), load_figures(args.new)
    other_gpu = other_gpu_line(old, new, args.allow_other_gpu)
    rows = diff.diff_entries(old.entries, new.entries)
    old_name, new_name = args.names or (args.old, args.new)
    shown = diff.select_rows(rows, args.min_delta)
    summary = report.diff_summary(rows, args.threshold)
    if other_gpu:
        print(f"{markdown_text(other_gpu, None)}\n" if args.markdown else terminal(other_gpu, None))
    if args.markdown:
        print(f"**{markdown_text(old_name)} → {markdown_text(new_name)}**: {summary}\n")
        print(report.format_diff(shown, markdown=True) if shown else "_no differences_")
    else:
        print(terminal(f"{old_name} → {new_name}", None))
        print(report.format_diff(shown) if shown else "no differences")
        print(summary)
    nothing = diff.nothing_compared(rows)
    if nothing:
        raise CliError(nothing)
    return EXIT_OK


def describe_sealed(baseline: BaselineFile) -> str:
    """``N entries, digest 1a2b3c4d5e6f…``: what a good file's seal covers."""
    integrity = Integrity.of(baseline.entries)
    noun = "entry" if integrity.entries == 1 else "entries"
    return f"{integrity.entries} {noun}, digest {integrity.sha256[:12]}…"


def check_baseline_file(path: Path) -> tuple[bool, str]:
    """Whether ``path`` loads as a baseline, and its line for ``baseline check`` (the problem if not)."""
    try:
        baseline = load_baseline(path)
        if baseline is not None:
            check_file_name(path, baseline.header)
    except BaselineError as exc:
        return False, str(exc)
    except OSError as exc:
        return False, f"{path}: cannot be read ({exc.strerror or exc}); pass a baselines/<gpu-slug>.yaml file"
    if baseline is None:
        return False, f"{path}: no such baseline file; check the path (baselines/<gpu-slug>.yaml)"
    fleet = classify(baseline.entries, DEFAULT_MUST_CATCH, GateConfig().cap)
    resolved = f"; {resolution_summary(fleet)}" if len(fleet.unknown) < fleet.entries else ""
    return True, f"{path}: ok ({describe_sealed(baseline)}){resolved}"


def cmd_baseline_check(args: argparse.Namespace) -> int:
    damaged = 0
    for name in args.files:
        ok, line = check_baseline_file(Path(name))
        print(line)
        damaged += not ok
    if damaged:
        print(f"gpuperf: error: {damaged} of {len(args.files)} baseline file(s) cannot be used; each line above "
              "names the problem and the fix", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def cmd_baseline_seal(args: argparse.Namespace) -> int:
    path = Path(args.file)
    written = seal_baseline(path)
    baseline = load_baseline(path)
    if baseline is None:
        raise CliError(f"{path}: disappeared while it was being sealed; restore it from version control "
                       f"(git checkout -- {path})")
    if written:
        print(f"{path}: sealed ({describe_sealed(baseline)}); only the header's integrity field was added: "
              f"review with git diff {path} and commit it")
    else:
        print(f"{path}: already sealed ({describe_sealed(baseline)}); nothing written")
    return EXIT_OK


def cmd_baseline_drop(args: argparse.Namespace) -> int:
    path = Path(args.file)
    dropped = drop_entries(path, list(args.cases))
    for case in dropped:
        print(terminal(f"{path}: dropped {case}", None))
    print(f"{path}: {len(dropped)} entr{'y' if len(dropped) == 1 else 'ies'} dropped and the file re-sealed; review "
          f"with git diff {path} and commit it")
    return EXIT_OK


def cmd_baseline_from_runs(args: argparse.Namespace) -> int:
    runs = runs_from(args.runs)
    path = Path(args.file)
    if args.add_clock_figures:
        existing = load_baseline(path)
        entries = with_clock_figures(existing.entries if existing else {}, runs)
    else:
        entries = entries_from_runs(runs)
    if not entries:
        raise CliError("no case was measured cleanly in any of the runs: nothing to record")
    newest = runs[-1]
    recorded = datetime.now(timezone.utc).isoformat(timespec="seconds")
    header = baseline_header(newest.info, [r for run in runs for r in run.records.values()], recorded)
    changes = update_baseline(path, header, entries)
    hosts = len({run.host for run in runs})
    print(f"{path}: {len(entries)} entries from {len(runs)} runs on {hosts} GPU{'s' if hosts != 1 else ''} "
          "(old → new):")
    print(report.format_changes(changes))
    return EXIT_OK



def cmd_baseline_from_fleet(args: argparse.Namespace) -> int:
    runs = runs_from(args.runs)
    path = Path(args.file)
    config = GateConfig()
    existing = load_baseline(path)
    tolerances = {case: entry.tolerance for case, entry in (existing.entries if existing else {}).items()
                  if entry.tolerance is not None}
    made = levelled_baseline(runs, config, tolerances=tolerances)[3]
    if not made.entries:
        raise CliError("no case was measured cleanly in any of the runs: nothing to record")
    recorded = datetime.now(timezone.utc).isoformat(timespec="seconds")
    header = baseline_header(runs[-1].info, [r for run in runs for r in run.records.values()], recorded)
    changes = update_baseline(path, header, made.entries)
    hosts = len({run.host for run in runs})
    levelled = sum(entry.memory_level is not None for entry in made.entries.values())
    print(f"{path}: {len(made.entries)} entries from {len(runs)} runs on {hosts} GPU{'s' if hosts != 1 else ''}, "
          f"each band chosen by leaving one host out (a fresh host's full gate red "
          f"{100 * made.bands.rate:.2f} % of the time at most {100 * TARGET_RED:g} %), {levelled} judged also with "
          "the run's memory level taken out (old → new):")
    print(report.format_changes(changes))
    print(resolution_summary(classify(made.entries, args.must_catch, config.cap)))
    return EXIT_OK


def add_baseline_commands(commands: Any) -> None:
    """``baseline`` and its subcommands, on the CLI's subparsers."""
    baseline = commands.add_parser("baseline", help="work with baseline files")
    sub = baseline.add_subparsers(dest="baseline_command", required=True, metavar="COMMAND")
    for add in (_add_diff, _add_check, _add_seal, _add_drop, _add_from_runs, _add_from_fleet):
        add(sub)


def _add_diff(sub: Any) -> None:
    diff_command = sub.add_parser(
        "diff", help="old → new table of two baselines, or of a results file against a baseline",
        description=f"A and B are each {FIGURES}.")
    diff_command.add_argument("old", metavar="A", help="the old figures")
    diff_command.add_argument("new", metavar="B", help="the new figures")
    diff_command.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request body)")
    diff_command.add_argument("--min-delta", type=non_negative_float, default=0.0, metavar="PCT",
                              help="hide cases whose |Δ| is below PCT percent (default: show all)")
    diff_command.add_argument("--threshold", type=non_negative_float, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                              help=f"count changes beyond ±PCT percent in the summary line (default "
                                   f"{DEFAULT_THRESHOLD_PCT:g})")
    diff_command.add_argument("--names", nargs=2, metavar=("OLD", "NEW"),
                              help="how to call A and B in the output (e.g. 'baselines/x.yaml@HEAD' for a "
                                   "temporary copy)")
    ALLOW_OTHER_GPU.add_to(diff_command.add_argument)
    diff_command.set_defaults(func=cmd_baseline_diff)


def _add_check(sub: Any) -> None:
    check = sub.add_parser(
        "check", help="validate baseline files (CPU only): schema, values, units, duplicate keys, encoding, "
                      "integrity",
        description="Runs the checks of loading on each FILE and prints one line per file; exits 1 when any "
                    "cannot be used.")
    check.add_argument("files", nargs="+", metavar="FILE", help="baselines/*.yaml files")
    check.set_defaults(func=cmd_baseline_check)


def _add_seal(sub: Any) -> None:
    seal = sub.add_parser(
        "seal", help="add the integrity field to a baseline recorded before gpuperf wrote one (legacy files "
                     "only)",
        description="Checks everything else, then writes the header's integrity field atomically, changing no "
                    "measured figure. A file that is already sealed is left as it is; a damaged one is refused. "
                    "New and re-recorded files are sealed by pytest perf_tests --update-baselines.")
    seal.add_argument("file", metavar="FILE", help="a baselines/*.yaml file without an integrity field")
    seal.set_defaults(func=cmd_baseline_seal)


def _add_drop(sub: Any) -> None:
    drop = sub.add_parser(
        "drop", help="remove entries: stale ones (no test produces them) or ones that can no longer be recorded",
        description="Removes the named entries under the file's lock, atomically, and re-seals the file; every "
                    "other entry is kept as it is. A name that is not an entry is refused.")
    drop.add_argument("file", metavar="FILE", help="a baselines/*.yaml file")
    drop.add_argument("cases", nargs="+", metavar="CASE", help="entry keys (case ids, with #ratio where it has one)")
    drop.set_defaults(func=cmd_baseline_drop)


def _add_from_runs(sub: Any) -> None:
    from_runs = sub.add_parser(
        "from-runs", help="record entries as the median of several runs (several hosts of one GPU model)",
        description="Each RUN is a results.json or results/<timestamp>/ directory written by a pytest perf_tests "
                    "run on the GPU model of FILE, optionally as LABEL=PATH to name its host when the results do "
                    "not record the GPU's UUID. Per case, the entry's value is the median of the runs' clean "
                    "figures (same method), with runs and run_spread (their relative range), which the gate takes "
                    "as a floor of the band. Written like --update-baselines: locked, atomic, sealed; other "
                    "entries and hand-set tolerances are kept.")
    from_runs.add_argument("file", metavar="FILE", help="the baselines/<gpu>.yaml to write")
    RUNS.add_to(from_runs.add_argument)
    from_runs.add_argument("--add-clock-figures", action="store_true",
                           help="keep the time figures of the entries FILE has and add to each its figure at max "
                                "clock (cycles per call) from the runs; cases FILE lacks get whole entries")
    from_runs.set_defaults(func=cmd_baseline_from_runs)


def _add_from_fleet(sub: Any) -> None:
    from_fleet = sub.add_parser(
        "from-fleet", help="record a fleet's baseline: the median of several hosts' runs, each entry's band chosen "
                           "by leaving one host out, and its resolution",
        description="RUN as for from-runs (@FILE for the runs a file lists, as baselines/<gpu>.runs does). Each "
                    "entry holds the median of the runs (as from-runs), the number of hosts, its band (chosen from "
                    "the hosts' spread by leaving one host out at a time, so that a full gate on a fresh host with "
                    f"no change is red at most {100 * TARGET_RED:g} times in 100) and its resolution (the smallest "
                    "slowdown it catches on every host); a memory-bound entry whose resolution the run's GEMV "
                    "level lowers without raising its chance of a false alarm also holds memory_level, judged at "
                    "the end of a run. Written like --update-baselines: locked, atomic, sealed; "
                    "hand-set tolerances are kept (and the bands start from them). docs/fleet.md says how.")
    from_fleet.add_argument("file", metavar="FILE", help="the baselines/<gpu>.yaml to write")
    RUNS.add_to(from_fleet.add_argument)
    MUST_CATCH.add_to(from_fleet.add_argument)
    from_fleet.set_defaults(func=cmd_baseline_from_fleet)
