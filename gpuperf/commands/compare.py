"""``python -m gpuperf compare A B``: run B judged against run A with the gate's own rule (``diff.compare_runs``);
exits 1 when a case fails as it would fail its test.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from gpuperf.commands.common import EXIT_ERROR, EXIT_OK, FIGURES, CliError, other_board_line, other_gpu_line
from gpuperf.output import diff, report
from gpuperf.untrusted import markdown_text, terminal
from gpuperf.output.results import Figures, load_figures
from gpuperf.store.baseline import version_changes
from gpuperf.store.results import refuse_repeated_runs
from gpuperf.wiring.options import ALLOW_OTHER_GPU, GATE_OPTIONS, add_all, gate_config


def cmd_compare(args: argparse.Namespace) -> int:
    try:
        config = gate_config(vars(args))
    except ValueError as exc:
        raise CliError(f"{exc}; pass --max-tolerance at least --tolerance") from exc
    a, b = load_figures(args.a), load_figures(args.b)
    if a.run is not None and b.run is not None:
        refuse_repeated_runs([(args.a, a.run, list(a.records.values())), (args.b, b.run, list(b.records.values()))])
    other_gpu = other_gpu_line(a, b, args.allow_other_gpu) or other_board_line(a, b)
    changed = version_changes(a.versions, b.versions)
    rows = diff.compare_runs(a.entries, b.records, config, changed, _record_command(a, args.b), b.peaks)
    a_name, b_name = args.names or (args.a, args.b)
    gate = (f"tolerance {100 * config.tolerance:g} %, noise k {config.noise_k:g}, "
            f"cap {100 * config.cap:g} %")
    summary = report.comparison_summary(rows)
    if args.markdown:
        print(f"**B ({markdown_text(b_name)}) against A ({markdown_text(a_name)})**: {summary} ({gate})\n")
        for line in filter(None, (other_gpu, f"Versions differ: {', '.join(changed)}" if changed else "")):
            print(f"{markdown_text(line, None)}\n")
        print(report.format_diff(rows, markdown=True, old="A", new="B", verdicts=True) if rows else "_no cases_")
    else:
        print(terminal(f"B ({b_name}) against A ({a_name}): {gate}", None))
        if other_gpu:
            print(terminal(other_gpu, None))
        if changed:
            print(terminal(f"versions differ: {', '.join(changed)}", None))
        print(report.format_diff(rows, old="A", new="B", verdicts=True) if rows else "no cases")
        print(summary)
    nothing = diff.nothing_compared(rows)
    if nothing:
        raise CliError(nothing)
    return EXIT_ERROR if diff.failing(rows) else EXIT_OK


def _record_command(a: Figures, b_path: str) -> str:
    """What an IMPROVED row of ``compare`` suggests: re-record the baseline A is, or record one from run B."""
    if a.baseline is not None:
        return "pytest perf_tests --update-baselines"
    slug = a.gpu_slug or "<gpu-slug>"
    target = shlex.quote(f"baselines/{slug}.yaml") if a.gpu_slug else f"baselines/{slug}.yaml"
    return f"python -m gpuperf baseline from-runs {target} {shlex.quote(b_path)} (if B is the new normal)"



def add_compare_command(commands: Any) -> None:
    compare = commands.add_parser(
        "compare", help="judge run B against run A with the gate's rule (two hosts, or before/after a change)",
        description=f"A and B are each {FIGURES}. Every case of B is judged against A's figure as the gate "
                    "judges a run against its baseline (REGRESSED, PASS, IMPROVED, UNRELIABLE when too noisy, "
                    "NOT_COMPARABLE, ...; ANOMALY for a figure above the GPU's peak); cases only one side has are "
                    "listed as such. Exits 1 when a case fails as it would fail its test (REGRESSED, ANOMALY, "
                    "ERROR) or when no case has a figure on both sides (nothing compared), 0 otherwise.")
    compare.add_argument("a", metavar="A", help="the reference figures (the baseline's role)")
    compare.add_argument("b", metavar="B", help="the figures judged against A")
    add_all(compare.add_argument, GATE_OPTIONS)
    compare.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request body)")
    compare.add_argument("--names", nargs=2, metavar=("A", "B"), help="how to call A and B in the output")
    ALLOW_OTHER_GPU.add_to(compare.add_argument)
    compare.set_defaults(func=cmd_compare)
