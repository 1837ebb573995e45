"""``python -m gpuperf`` (and the ``gpuperf`` console script): the command line's front door. Each command is a
module of ``commands/`` that adds its own parser (``COMMANDS``): ``device``, ``compare A B``, ``baseline
diff|check|seal|drop|from-runs``, ``plot``, ``fleet``, ``readme``, ``history ingest|show|changes|page``, ``bisect``
and ``ab``; what they share is ``commands/common.py``.

Argument parsing and thin commands: each reads its inputs, calls the pure modules (``diff``, ``report``,
``table``, ``gate``) and prints. Each command prints what it did; an error prints one line naming the cause
and the fix and exits 1 (2 for a malformed command line, as argparse does); so does a file-system error
(a path that cannot be read or written: ``describe_os_error``), and output cut short by a closed pipe
(``... | head -1``) ends the command quietly with 1. Ctrl-C or SIGTERM stops a command with one line and exit 2, after
its clean-up ran (``processes.interruptible``). ``compare`` also exits 1 when a case fails as it would
fail its test in the gate.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gpuperf
from gpuperf.commands.common import ERRORS as ERRORS  # re-exported: the front door prints them
from gpuperf.commands.common import EXIT_ERROR, CommandParser, describe_os_error, known_error

#: The exit code of a command stopped by Ctrl-C or SIGTERM (as pytest's for an interrupted session).
EXIT_INTERRUPTED = 2

#: An error line is cut to this many characters: it names a file, a record and a field, never a whole value.
ERROR_WIDTH = 2000


def package_version() -> str:
    """The installed distribution's version, else (an uninstalled checkout) ``gpuperf.__version__``."""
    import importlib.metadata

    try:
        return importlib.metadata.version("gpuperf")
    except importlib.metadata.PackageNotFoundError:
        return gpuperf.__version__


def _prog() -> str:
    """How the user called us: the ``gpuperf`` console script, or ``python -m gpuperf``."""
    return "gpuperf" if Path(sys.argv[0]).name == "gpuperf" else "python -m gpuperf"


#: Each command's name and, in ``--help`` order, the function that adds its parser (and its subcommands') to the
#: CLI's subparsers, by module: a command line that names a command imports that command's module alone.
COMMANDS = (("device", "gpuperf.commands.device", "add_device_command"),
            ("compare", "gpuperf.commands.compare", "add_compare_command"),
            ("baseline", "gpuperf.commands.baseline", "add_baseline_commands"),
            ("plot", "gpuperf.commands.plot", "add_plot_command"),
            ("fleet", "gpuperf.commands.fleet", "add_fleet_command"),
            ("readme", "gpuperf.commands.readme", "add_readme_command"),
            ("history", "gpuperf.commands.history", "add_history_commands"),
            ("bisect", "gpuperf.commands.bisect", "add_bisect_command"),
            ("ab", "gpuperf.commands.ab", "add_ab_command"))

def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser; given a command line that starts with a command, only that command's."""
    parser = CommandParser(prog=_prog(),
                                     description="gpuperf: GPU identity and peaks, run comparisons, baseline "
                                                 "files, plots.")
    parser.add_argument("--version", action="version", version=f"gpuperf {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = argv[0] if argv and argv[0] in {name for name, _, _ in COMMANDS} else None
    version_only = list(argv or ())[:1] == ["--version"]  # answered before any command is parsed
    for name, module, function in COMMANDS:
        if named in (None, name) and not version_only:
            add_command: Callable[[Any], None] = getattr(importlib.import_module(module), function)
            add_command(commands)
    if named is not None:  # what the command line left over is refused by this parser, with the command's code
        parser.usage_exit = getattr(commands.choices[named], "usage_exit", parser.usage_exit)
    return parser


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``| head``): stop without a word, as Python's docs advise, pointing
    stdout at /dev/null so that the interpreter's last flush cannot raise again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (in-process callers)
        pass
    return EXIT_ERROR


def _tolerant_streams() -> None:
    """Output that the stream's encoding cannot hold (``Δ`` under ``PYTHONIOENCODING=ascii``, a C locale) is written
    escaped (``\\u0394``) rather than ending the command in a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_streams()
    args = build_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
    from gpuperf.store.processes import Terminated, interruptible

    try:
        with interruptible():
            return int(args.func(args))
    except KeyboardInterrupt as exc:
        return _interrupted(exc, Terminated)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except Exception as exc:
        stopped = _interruption(exc)
        if stopped is not None:  # an import or a library's C code that turned the interruption into its own error
            return _interrupted(stopped, Terminated)
        if known_error(exc):
            print(f"gpuperf: error: {_one_line(str(exc))}", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(exc, OSError):
            print(f"gpuperf: error: {_one_line(describe_os_error(exc))}", file=sys.stderr)
            return EXIT_ERROR
        raise


def _interrupted(exc: BaseException, terminated: type[BaseException]) -> int:
    cause = "SIGTERM" if isinstance(exc, terminated) else "Ctrl-C"
    print(f"gpuperf: error: interrupted ({cause}): the command stopped and ended what it had started (worktrees, "
          "processes); run it again", file=sys.stderr)
    return EXIT_INTERRUPTED


def _interruption(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM behind an error, if one is in its chain of causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _one_line(message: str) -> str:
    """An error as one terminal line: the ids and paths it quotes are untrusted (``untrusted.terminal``)."""
    from gpuperf.untrusted import terminal

    return terminal(message, ERROR_WIDTH)
