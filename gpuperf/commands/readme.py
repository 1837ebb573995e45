"""``python -m gpuperf readme RESULTS``: a results page's generated section rewritten from a run.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from gpuperf.commands.common import EXIT_OK, CliError
from gpuperf.store.reading import MIB

README_LIMIT = 8 * MIB
RESULTS_PAGE = "evidence/results-h200.md"


def cmd_readme(args: argparse.Namespace) -> int:
    from gpuperf.output import readme
    from gpuperf.store.atomic import write_atomically
    from gpuperf.store.reading import InputError, read_text
    from gpuperf.store.results import load_run

    run, records = load_run(Path(args.results))
    _refuse_impossible(Path(args.results), run, records)
    readme_path = Path(args.readme)
    try:
        text = read_text(readme_path, README_LIMIT, "a README", "pass --readme PATH")
    except FileNotFoundError as exc:
        raise CliError(f"{readme_path} does not exist: pass --page PATH") from exc
    except InputError as exc:
        raise CliError(str(exc)) from None
    missing = [image for image in args.images if not Path(image).is_file()]
    if missing:
        raise CliError(f"{', '.join(missing)}: no such image; make it with python -m gpuperf plot, or fix the path")
    images = [os.path.relpath(image, readme_path.parent) for image in args.images]  # as links from the page
    section = readme.results_section(run, records, images, str(args.results))
    try:
        page = readme.replace_section(text, section)
    except readme.ReadmeError as exc:
        raise CliError(f"{readme_path}: {exc}") from exc
    _check_page(readme_path, page, section)
    write_atomically(readme_path, page)
    print(f"{readme_path}: results section rewritten from {args.results} ({len(records)} cases)")
    return EXIT_OK


def _refuse_impossible(path: Path, run: Any, records: Any) -> None:
    """A figure that ``compare`` calls impossible (above the GPU's peak, ``check.figure_anomalies``), whatever
    status its file gives it, is not published: the page would show a speed the GPU cannot reach."""
    from gpuperf.verdict.check import figure_anomalies

    peaks = run.extra.get("peaks") if isinstance(run.extra, dict) else None
    for index, record in enumerate(records):
        findings = figure_anomalies(record, peaks if isinstance(peaks, dict) else None)
        if findings:
            raise CliError(f"{path}: records[{index}] ({record.case_id}): {findings[0]}, though its status is "
                           f"{record.status}: a figure the GPU cannot reach is not published; re-run the suite "
                           "(pytest perf_tests) or restore the file")


def _check_page(path: Path, page: str, section: str) -> None:
    """The page as the next ``readme`` would read it (within ``README_LIMIT``, one pair of markers), before it
    replaces the page on disk: a write that its own reader would refuse is not made."""
    from gpuperf.output import readme

    size = len(page.encode("utf-8", "surrogatepass"))
    if size > README_LIMIT:
        raise CliError(f"{path}: not written: the page would hold {size / MIB:.1f} MiB, more than the "
                       f"{README_LIMIT // MIB} MiB a page may hold for readme to read it again; pass a run with "
                       "fewer cases")
    try:
        readme.replace_section(page, section)
    except readme.ReadmeError as exc:
        raise CliError(f"{path}: not written: the section would break the page's markers, so readme could not "
                       f"rewrite it again ({exc}); pass a results path without them") from None


def add_readme_command(commands: Any) -> None:
    section = commands.add_parser("readme", help="rewrite a results page's generated section from a run")
    section.add_argument("results", metavar="RESULTS", help="results/<timestamp>/ or its results.json")
    section.add_argument("--page", "--readme", dest="readme", default=RESULTS_PAGE, metavar="PAGE",
                         help=f"the Markdown page to rewrite (default {RESULTS_PAGE})")
    section.add_argument("--images", nargs="*", default=[], metavar="PNG",
                         help="plots to show, as paths from here (the page links them relative to itself)")
    section.set_defaults(func=cmd_readme)
