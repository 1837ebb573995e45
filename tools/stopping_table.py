"""Render the stopping rule's table (per family: samples, GPU time, interval reached ÷ band) from results files.

    python3 tools/stopping_table.py RUN...                            # print the Markdown section
    python3 tools/stopping_table.py RUN... --page docs/measuring.md   # rewrite the page's section

Each RUN is a results.json (or the results directory holding it) of a ``python3 -m pytest perf_tests`` run whose
records carry ``extra.sampling`` (tools/stopping_rule_device.sh writes them on one GPU; run it on three). The
section lies between ``gpuperf.output.stopping_table``'s START and END markers. Exit 0 when done, 2 when the input
or the page is wrong (the message names the fix).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuperf.output.readme import ReadmeError  # noqa: E402
from gpuperf.output.stopping_table import StoppingError, replace_stopping_section, stopping_section  # noqa: E402
from gpuperf.store.atomic import write_atomically  # noqa: E402
from gpuperf.store.results import ResultsError, load_run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/stopping_table.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="results.json of a run, or its results directory")
    parser.add_argument("--page", help="rewrite this page's generated section instead of printing it")
    args = parser.parse_args(argv)
    try:
        runs = [load_run(Path(run)) for run in args.runs]
        section = stopping_section(runs, args.runs)
        if args.page is None:
            print(section)
            return 0
        page = Path(args.page)
        write_atomically(page, replace_stopping_section(page.read_text(encoding="utf-8"), section))
    except (ResultsError, StoppingError, ReadmeError, OSError) as exc:
        print(f"tools/stopping_table.py: {exc}", file=sys.stderr)
        return 2
    print(f"{args.page}: stopping section rewritten from {len(args.runs)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
