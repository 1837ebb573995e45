"""The command line of ``python -m gpuperf bisect`` (the bisection itself: ``history/bisect.py``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from typing import Any

from gpuperf.history import bisect
from gpuperf.history.bisect import MEASURE_ENV, RESULTS_ENV, run_bisect
from gpuperf.verdict import gate_config
from gpuperf.wiring.argtypes import fraction, positive_float


def add_bisect_command(commands: Any) -> None:
    parser = commands.add_parser(
        "bisect", help="find the commit that slowed a case: git bisect run with the suite as the oracle",
        description=(bisect.__doc__ or "").partition("PYTEST_DONT_REWRITE")[0].rstrip(),  # less pytest's marker
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--good", required=True, metavar="REV", help="a commit where the case was fast")
    parser.add_argument("--bad", required=True, metavar="REV", help="a later commit where it is slow")
    parser.add_argument("-k", required=True, metavar="CASE", help="the case: its id, or a part naming one case")
    parser.add_argument("--repo", default=".", metavar="DIR", help="the git checkout of the tree under test")
    parser.add_argument("--out", metavar="DIR", help="where steps, logs and bisect.json go (default "
                                                      "results/bisect-<timestamp>/)")
    parser.add_argument("--tolerance", type=fraction, default=None,
                        help=f"allowed slowdown against the good commit (default {gate_config.DEFAULT_TOLERANCE})")
    parser.add_argument("--history", metavar="TARGET", help="where each step is recorded (as pytest's --history)")
    parser.add_argument("--measure-command", metavar="CMD",
                        help=f"a shell command measuring the case instead of pytest (also ${MEASURE_ENV}); it "
                             f"runs in the commit's worktree and writes a results.json under ${RESULTS_ENV}")
    parser.add_argument("--measure-timeout", type=positive_float, default=bisect.MEASURE_TIMEOUT_S, metavar="S",
                        help="wall seconds one measurement of a commit may take; past it, the measuring command and "
                             f"all it started are stopped and the commit skipped (default {bisect.MEASURE_TIMEOUT_S})")
    parser.set_defaults(func=run_bisect)
