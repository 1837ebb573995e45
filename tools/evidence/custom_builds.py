"""Render the custom kernels' build tables from a results file of the builds selection.

    python3 tools/evidence/custom_builds.py RESULTS.json                              # print the Markdown section
    python3 tools/evidence/custom_builds.py RESULTS.json --page evidence/custom-kernels.md  # rewrite the page's section

RESULTS.json (or the results directory holding it) comes from ``python3 -m pytest perf_tests -m builds``: every
build of the custom kernels' catalogues timed by the suite's own loop, each against cuBLAS on the same shape in
the same run (``perf_tests/test_custom_builds.py``). The section lies between ``gpuperf.output.custom_builds``'s
START and END markers; tests/test_custom_builds_doc.py renders the committed file and compares it with the page.
Exit 0 when done, 2 when the input or the page is wrong (the message names the fix).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpuperf.output.custom_builds import END, START, BuildsError, builds_section  # noqa: E402
from gpuperf.store.results import ResultsError, load_run  # noqa: E402
from tools.evidence import page_section  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = page_section.parser("tools/evidence/custom_builds.py", __doc__)
    parser.add_argument("results", help="results.json of a -m builds run, or its results directory")
    parser.add_argument("--source", help="the results file as the page names it (default: as given)")

    def build(args: argparse.Namespace) -> str:
        run, records = load_run(Path(args.results))
        return builds_section(run, records, args.source or args.results)

    return page_section.run(parser, argv, build, (START, END), (ResultsError, BuildsError),
                            lambda args: f"builds section rewritten from {args.results}")


if __name__ == "__main__":
    sys.exit(main())
