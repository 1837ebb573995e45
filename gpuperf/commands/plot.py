"""``python -m gpuperf plot PATH``: throughput and roofline PNGs from a run or a baseline (the ``plot`` extra).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpuperf.commands.common import EXIT_OK, CliError, require_extra


def cmd_plot(args: argparse.Namespace) -> int:
    require_extra("plot", ("matplotlib",), "python -m gpuperf plot")
    from gpuperf.output.plot import plot_roofline, plot_throughput, records_from_baseline
    from gpuperf.output.results import load_figures

    figures = load_figures(args.path)
    path = figures.path
    if figures.baseline is not None:
        records = records_from_baseline(figures.baseline.header, figures.baseline.entries)
        default_out = path.parent / f"{path.stem}-plots"
    else:
        records = list(figures.records.values())
        default_out = path if path.is_dir() else path.parent
    if not any(r.flops and r.bytes for r in records):
        raise CliError(f"{path}: no case carries FLOP/byte counts (ratio entries only, or ids without a "
                       "shape such as 4096x4096x4096), so there is nothing to plot")
    out = Path(args.out) if args.out else default_out
    if out.exists() and not out.is_dir():
        raise CliError(f"{out}: already exists and is not a folder; --out names the folder the PNGs go into")
    written = plot_throughput(records, out, gpu=figures.gpu, peaks=figures.peaks)
    written.append(plot_roofline(records, figures.peaks, out, gpu=figures.gpu))
    if figures.peaks is None:
        print(f"note: {path} records no peaks, so the plots have no ceilings", file=sys.stderr)
    for png in written:
        print(png)
    return EXIT_OK


def add_plot_command(commands: Any) -> None:
    from gpuperf.store.results import RESULTS_JSON

    plot = commands.add_parser("plot", help="throughput and roofline PNGs from a run or a baseline")
    plot.add_argument("path", metavar="PATH", help=f"results/<timestamp>/, its {RESULTS_JSON}, or a baselines/*.yaml")
    plot.add_argument("--out", metavar="DIR",
                      help="where the PNGs go (default: the results directory, or <baseline>-plots/ beside "
                           "a baseline file)")
    plot.set_defaults(func=cmd_plot)
