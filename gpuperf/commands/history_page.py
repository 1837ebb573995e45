"""``python -m gpuperf history page``: the trend site from the history (thin: read, build the model, write).

A subcommand of the CLI's ``history`` group, whose ``--history`` names the database.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import gc
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuperf.commands.common import require_extra
from gpuperf.trend.paths import DEFAULT_SITE
from gpuperf.wiring.options import RUN_FILTERS, add_all

EXIT_OK = 0
EXIT_ERROR = 1


class PageError(Exception):
    """The site cannot be built; the message names the cause and the fix."""


def cmd_history_page(args: argparse.Namespace) -> int:
    from gpuperf.history.database import HistoryError, resolve_target
    from gpuperf.history.schema import SchemaError

    require_extra("page", ("plotly", "jinja2", "matplotlib"), "python -m gpuperf history page")
    from gpuperf.trend.page import TrendPageError, write_site
    from gpuperf.trend.source import load_trend
    try:
        url = resolve_target(args.history, os.environ, Path.cwd())
        if url is None:
            raise PageError("--history none: there is no history to draw; name a history database")
        data = load_trend(url, gpu=args.gpu, since=args.since)
        # millions of points live until the site is written: out of the cycle collector's sight (they hold no
        # cycle), so each collection the pages' building sets off does not walk them all again (a third of the
        # build's time at 1,000 runs, more with every run), nor do the forked picture workers copy them
        gc.freeze()
        if not data.runs:
            raise PageError(f"{data.source} holds no runs{' of ' + args.gpu if args.gpu else ''}"
                            f"{' since ' + args.since if args.since else ''}; append runs with pytest perf_tests "
                            "or python -m gpuperf history ingest results/")
        site = write_site(data, args.out)
    except (HistoryError, SchemaError, TrendPageError, OSError) as exc:
        raise PageError(str(exc)) from exc
    first, last = data.time_range
    print(f"gpuperf: trend site {site.index}: {len(data.runs)} runs from {first} to {last}, "
          f"{len(data.series)} case series, {len(data.hosts)} hosts")
    return EXIT_OK


def add_page_command(history_commands: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """``page`` on the ``history`` group's subparsers (``parents``: the options every history command takes)."""
    page = history_commands.add_parser(
        "page", parents=list(parents), help="write the trend site: what needs attention, every case over its runs, filters",
        description="A static site (index.html, a page per case, plotly.min.js once) that works opened from "
                    "file:// or served by any static host; docs/trend-page.md describes it.")
    page.add_argument("--out", default=str(DEFAULT_SITE), metavar="DIR",
                      help=f"where the site goes (default {DEFAULT_SITE}); its pages are replaced")
    add_all(page.add_argument, RUN_FILTERS)
    page.set_defaults(func=cmd_history_page)
