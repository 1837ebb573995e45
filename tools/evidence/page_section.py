"""What the tools that write a page's generated section share (tools/evidence/stopping_table.py,
tools/evidence/custom_builds.py, tools/evidence/sensitivity_table.py): a ``--page`` option, the section printed or
written between the page's markers (atomically), and bad input as one line naming the fix, exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from gpuperf.output.readme import ReadmeError, replace_section
from gpuperf.store.atomic import write_atomically


def parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """The tool's parser, with ``--page``; the tool adds its inputs."""
    made = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    made.add_argument("--page", help="rewrite this page's generated section instead of printing it")
    return made


Build = Callable[[argparse.Namespace], str]


def run(made: argparse.ArgumentParser, argv: list[str] | None, build: Build, markers: tuple[str, str],
        errors: tuple[type[Exception], ...], done: Build) -> int:
    """Parse ``argv``, ``build`` the section, print it or rewrite ``--page``'s section between ``markers``; exit 0,
    or 2 with one line when ``build`` raises one of ``errors`` or the page cannot be rewritten."""
    args = made.parse_args(argv)
    caught: tuple[type[Exception], ...] = (*errors, ReadmeError, OSError)
    try:
        section = build(args)
        if args.page is None:
            print(section)
            return 0
        page = Path(args.page)
        write_atomically(page, replace_section(page.read_text(encoding="utf-8"), section, *markers))
    except caught as exc:
        print(f"{made.prog}: {exc}", file=sys.stderr)
        return 2
    print(f"{args.page}: {done(args)}")
    return 0
