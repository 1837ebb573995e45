"""The command line of ``python -m gpuperf ab`` (the run itself: ``ab/coordinator.py``): its options, each checked
as it is parsed, so a bad value is a usage error (exit 4) before either side starts; an error that stops the run is
one line.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpuperf.ab import coordinator
from gpuperf.ab.coordinator import DEFAULT_TURN_TIMEOUT_S, EXIT_USAGE
from gpuperf.ab.report import EXIT_FAILED
from gpuperf.ab.paired import DEFAULT_ROUNDS_MAX, DEFAULT_THRESHOLD, MIN_ROUNDS, check_threshold
from gpuperf.commands.common import describe_os_error, known_error
from gpuperf.gitrepo import GitError
from gpuperf.untrusted import terminal


def add_ab_command(commands: Any) -> None:
    from gpuperf.wiring.argtypes import positive_float

    parser = commands.add_parser(
        "ab", help="the head against its base on one GPU, measured in turns and judged on paired rounds",
        description=(coordinator.__doc__ or "").partition("PYTEST_DONT_REWRITE")[0].rstrip(),
        formatter_class=argparse.RawDescriptionHelpFormatter, usage_exit=EXIT_USAGE)
    parser.add_argument("--base", required=True, metavar="REV", help="the base commit (the merge base of a PR)")
    parser.add_argument("--head", metavar="REV", help="the head commit (default: the working tree as it is)")
    parser.add_argument("--rounds-max", type=_rounds, default=DEFAULT_ROUNDS_MAX, metavar="N",
                        help=f"round limit per case; a case still too noisy then is NOISY (default "
                             f"{DEFAULT_ROUNDS_MAX}, at least {MIN_ROUNDS})")
    parser.add_argument("--threshold", type=_threshold, default=DEFAULT_THRESHOLD, metavar="FRACTION",
                        help=f"the slowdown that fails, as a fraction (default {DEFAULT_THRESHOLD}: "
                             f"{100 * DEFAULT_THRESHOLD:g} %%)")
    parser.add_argument("--repo", default=".", metavar="DIR", help="the git checkout of the trees")
    parser.add_argument("--out", metavar="DIR", help="where the sides' results, ab.json and summary.md go "
                                                      "(default results/ab-<timestamp>/)")
    parser.add_argument("--history", metavar="TARGET", help="append both sides' runs to this history (as pytest's "
                                                            "--history), with their commits")
    parser.add_argument("--turn-timeout", type=positive_float, default=DEFAULT_TURN_TIMEOUT_S, metavar="S",
                        help="the longest a side may hold the GPU between two requests (one test's set-up up to its "
                             f"first check, or one round) before it is stopped (default {DEFAULT_TURN_TIMEOUT_S:g})")
    parser.add_argument("--head-env", type=_assignment, action="append", default=[], metavar="KEY=VALUE",
                        help="set this in the head side's environment only (repeatable): a planted slowdown to "
                             "show the gate works, e.g. GPUPERF_SLOWDOWN=0.02 with -- perf_tests "
                             "-p tools.gpu_host.slowdown")
    parser.add_argument("selection", nargs="*", metavar="SELECTION",
                        help="what pytest runs in each tree (default perf_tests; e.g. perf_tests -k gemm)")
    parser.set_defaults(func=run_ab)


def _rounds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_ROUNDS:
        raise argparse.ArgumentTypeError(f"{text!r}: --rounds-max is a whole number of at least {MIN_ROUNDS}")
    return value


def _assignment(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: write KEY=VALUE, e.g. GPUPERF_SLOWDOWN=0.02")
    return key, value


def _threshold(text: str) -> float:
    try:
        return check_threshold(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def run_ab(args: argparse.Namespace) -> int:
    """The command; an error that stops the run is one line and exit 3, an unusable option exit 4 (1 and 2 are
    verdicts here)."""
    try:
        return coordinator.run(args)
    except coordinator.UsageError as exc:
        print(f"gpuperf: error: {terminal(str(exc), 2000)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        message = describe_os_error(exc)
    except Exception as exc:  # the errors that name their cause and fix (git, the history); others are bugs
        if not isinstance(exc, GitError) and not known_error(exc):
            raise
        message = str(exc)
    print(f"gpuperf: error: {terminal(message, 2000)}", file=sys.stderr)
    return EXIT_FAILED
