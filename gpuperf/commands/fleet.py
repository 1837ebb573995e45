"""``python -m gpuperf fleet RUN…``: how far each case's figure moves between hosts and between runs on one
host, and the gate's A/A false-alarm rate over those runs; ``runs_from`` also feeds ``baseline from-runs``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuperf.commands.common import EXIT_OK, CliError
from gpuperf.output import report
from gpuperf.output.fleet_report import Bound, Missed, Ways, format_bands, resolution_summary
from gpuperf.store.baseline import BaselineError, check_gpu, load_baseline
from gpuperf.store.results import load_run, refuse_repeated_runs
from gpuperf.verdict.false_alarms import false_alarms
from gpuperf.verdict.fleet import Run, fleet_spread
from gpuperf.verdict.fleet_bands import levelled_baseline, most_that_can_catch
from gpuperf.verdict.fleet_estimate import estimates
from gpuperf.verdict.fleet_resolution import cannot_catch, cause, classify
from gpuperf.verdict.gate import GateConfig
from gpuperf.wiring.options import MUST_CATCH, RUNS


def expand_lists(specs: Sequence[str]) -> list[str]:
    """The run arguments with each ``@FILE`` replaced by the runs that file lists, one a line (``#`` starts a
    comment): a fleet's runs named in one place (``baselines/<gpu>.runs``), for ``baseline from-fleet`` and
    ``fleet`` alike."""
    expanded = []
    for spec in specs:
        if not spec.startswith("@"):
            expanded.append(spec)
            continue
        try:
            text = Path(spec[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"{spec[1:]}: cannot read the list of runs ({exc}); pass @FILE naming a text file of "
                           "results paths, one a line") from None
        listed = [line.split("#", 1)[0].strip() for line in text.splitlines()]
        if not any(listed):
            raise CliError(f"{spec[1:]}: lists no run; write one results path a line")
        expanded += [line for line in listed if line]
    return expanded


def runs_from(specs: Sequence[str]) -> list[Run]:
    """``[label=]path`` per run: the label names the host when the results file records no GPU UUID; ``@FILE``
    for the runs a file lists (``expand_lists``)."""
    runs, given = [], []
    for spec in expand_lists(specs):
        label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        info, records = load_run(path)
        given.append((path, info, records))
        runs.append(Run.of(info, records, label or path))
    refuse_repeated_runs(given)
    return runs


def cmd_fleet(args: argparse.Namespace) -> int:
    runs = runs_from(args.runs)
    baseline = None
    if args.baseline:
        loaded = load_baseline(Path(args.baseline))
        if loaded is None:
            raise CliError(f"{args.baseline}: no such baseline file; pass a baselines/<gpu>.yaml")
        if runs:
            try:
                check_gpu(loaded, runs[0].info.gpu_slug)
            except BaselineError as exc:
                raise CliError(str(exc)) from None
        baseline = loaded.entries
    if args.bands:
        print(bands_section(runs, args.must_catch, markdown=args.markdown))
        return EXIT_OK
    print(report.format_fleet(runs, fleet_spread(runs), markdown=args.markdown))
    cases, selection = false_alarms(runs, baseline, GateConfig())
    print()
    print(report.format_false_alarms(cases, selection, markdown=args.markdown))
    if not any(case.pairs or case.baseline_runs for case in cases):
        against = " or against --baseline" if baseline is not None else ""
        raise CliError(f"nothing compared: no case has a clean figure in two of the {len(runs)} run(s){against}; "
                       "pass at least two runs of the same selection on one GPU model (or --baseline FILE)")
    if baseline is not None:
        print()
        print(resolution_summary(classify(baseline, args.must_catch, GateConfig().cap)))
    return EXIT_OK


def bands_section(runs: Sequence[Run], must_catch: float, markdown: bool = False) -> str:
    """evidence/fleet.md's generated section: the leave-one-host-out estimate of the baseline ``baseline from-fleet``
    records, and of the two ways it chooses between (no level; the level in every memory-bound entry), with what
    each catches, and the recorded entries that cannot catch ``must_catch``."""
    config = GateConfig()
    plain, levelled, gains, recorded = levelled_baseline(runs, config)
    missed = [Missed(case, found, recorded.entries[case].hosts, cause(recorded.fleets[case], recorded.entries[case]))
              for case, found in cannot_catch(recorded.entries, must_catch)]
    choices = (plain.fleets, levelled.fleets)
    bound = Bound(most_that_can_catch(choices, plain.entries, must_catch, config),
                  most_that_can_catch(choices, plain.entries, must_catch, config, tolerance=False), len(plain.entries))
    return format_bands(
        estimates(runs, config),
        Ways(classify(recorded.entries, must_catch, config.cap), classify(plain.entries, must_catch, config.cap),
             classify(levelled.entries, must_catch, config.cap)), gains, missed, bound, markdown=markdown)


def add_fleet_command(commands: Any) -> None:
    fleet = commands.add_parser(
        "fleet", help="per case, how far the figure moves between hosts and between runs on one host",
        description="RUN as for baseline from-runs. Prints, per case, the hosts and runs, the median, the "
                    "host-to-host spread (relative range of the hosts' medians) and the run-to-run spread (the "
                    "widest relative range of one host's runs), widest host-to-host first.")
    RUNS.add_to(fleet.add_argument)
    fleet.add_argument("--markdown", action="store_true", help="a Markdown table (docs/fleet.md)")
    fleet.add_argument("--baseline", metavar="FILE",
                       help="also judge every run against this baselines/<gpu>.yaml (the false-alarm rate there) and "
                            "say what its entries catch on every host")
    fleet.add_argument("--bands", action="store_true",
                       help="instead: the leave-one-host-out estimate of a fresh host's red gates with the baseline "
                            "baseline from-fleet records from these runs (the run's GEMV level taken out where it "
                            "helps), without the level and with it everywhere, and the entries that cannot catch "
                            "--must-catch (docs/fleet.md)")
    MUST_CATCH.add_to(fleet.add_argument)
    fleet.set_defaults(func=cmd_fleet)
