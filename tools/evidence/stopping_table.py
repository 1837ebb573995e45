"""Render the stopping rule's table (per family: samples, GPU time, interval reached ÷ band) from results files.

    python3 tools/evidence/stopping_table.py RUN...                            # print the Markdown section
    python3 tools/evidence/stopping_table.py RUN... --page evidence/measuring.md   # rewrite the page's section

Each RUN is a results.json (or the results directory holding it) of a ``python3 -m pytest perf_tests`` run whose
records carry ``extra.sampling`` (tools/gpu_host/stopping_rule_device.sh writes them on one GPU; run it on three). The
section lies between ``gpuperf.output.stopping_table``'s START and END markers. Exit 0 when done, 2 when the input
or the page is wrong (the message names the fix).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpuperf.output.stopping_table import END, START, StoppingError, stopping_section  # noqa: E402
from gpuperf.store.results import ResultsError, load_run  # noqa: E402
from tools.evidence import page_section  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = page_section.parser("tools/evidence/stopping_table.py", __doc__)
    parser.add_argument("runs", nargs="+", metavar="RUN", help="results.json of a run, or its results directory")
    return page_section.run(parser, argv,
                            lambda args: stopping_section([load_run(Path(run)) for run in args.runs], args.runs),
                            (START, END), (ResultsError, StoppingError),
                            lambda args: f"stopping section rewritten from {len(args.runs)} runs")


if __name__ == "__main__":
    sys.exit(main())
