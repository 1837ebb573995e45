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
from gpuperf.store.baseline import BaselineError, check_gpu, load_baseline
from gpuperf.store.results import load_run, refuse_repeated_runs
from gpuperf.verdict.false_alarms import false_alarms
from gpuperf.verdict.fleet import Run, fleet_spread
from gpuperf.verdict.gate import GateConfig
from gpuperf.wiring.options import RUNS


def runs_from(specs: Sequence[str]) -> list[Run]:
    """``[label=]path`` per run: the label names the host when the results file records no GPU UUID."""
    runs, given = [], []
    for spec in specs:
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
    print(report.format_fleet(runs, fleet_spread(runs), markdown=args.markdown))
    cases, selection = false_alarms(runs, baseline, GateConfig())
    print()
    print(report.format_false_alarms(cases, selection, markdown=args.markdown))
    if not any(case.pairs or case.baseline_runs for case in cases):
        against = " or against --baseline" if baseline is not None else ""
        raise CliError(f"nothing compared: no case has a clean figure in two of the {len(runs)} run(s){against}; "
                       "pass at least two runs of the same selection on one GPU model (or --baseline FILE)")
    return EXIT_OK



def add_fleet_command(commands: Any) -> None:
    fleet = commands.add_parser(
        "fleet", help="per case, how far the figure moves between hosts and between runs on one host",
        description="RUN as for baseline from-runs. Prints, per case, the hosts and runs, the median, the "
                    "host-to-host spread (relative range of the hosts' medians) and the run-to-run spread (the "
                    "widest relative range of one host's runs), widest host-to-host first.")
    RUNS.add_to(fleet.add_argument)
    fleet.add_argument("--markdown", action="store_true", help="a Markdown table (docs/fleet.md)")
    fleet.add_argument("--baseline", metavar="FILE",
                       help="also judge every run against this baselines/<gpu>.yaml (the false-alarm rate there)")
    fleet.set_defaults(func=cmd_fleet)
