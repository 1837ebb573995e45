"""What the commands of ``python -m gpuperf`` share: the error they raise for ``main`` to print (and the
other errors that name their fix, ``ERRORS``; a file-system error in one line, ``describe_os_error``), the exit
codes, the words for a set of figures, the header line of a comparison across GPU models, and the check that a
command's optional packages (an extra of pyproject.toml) are installed.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from gpuperf.store.os_errors import describe_os_problem

if TYPE_CHECKING:  # a command that compares has it loaded; the others need not import it
    from gpuperf.output.results import Figures

EXIT_OK = 0
EXIT_ERROR = 1
#: A malformed command line (argparse's own code), for every command whose exit codes do not give 2 a meaning.
EXIT_USAGE = 2
FIGURES = "a baselines/*.yaml, a results.json or a results/<timestamp>/ directory"

#: The errors that name their cause and the fix, by the module that defines each: ``main`` prints one as a line
#: and exits 1. Only a module that was imported can have raised its error, so none is imported to look.
ERRORS = (("gpuperf.commands.common", "CliError"), ("gpuperf.store.reading", "InputError"),
          ("gpuperf.store.results", "ResultsError"), ("gpuperf.store.baseline_entry", "BaselineError"),
          ("gpuperf.verdict.fleet", "FleetError"), ("gpuperf.store.history_target", "HistoryError"),
          ("gpuperf.history.schema", "SchemaError"), ("gpuperf.history.rows", "HistoryInputError"),
          ("gpuperf.history.bisect", "BisectError"), ("gpuperf.gitrepo", "GitError"),
          ("gpuperf.commands.history_page", "PageError"))


class CommandParser(argparse.ArgumentParser):
    """argparse's parser with the exit code of a malformed command line a parameter (``usage_exit``): 2 as argparse
    has it, except where a command gives 2 another meaning (``ab``: missing evidence). Its sub-commands' parsers are
    of this class too (``add_parser(..., usage_exit=N)``)."""

    def __init__(self, *args: Any, usage_exit: int = EXIT_USAGE, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.usage_exit = usage_exit

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_exit, f"{self.prog}: error: {message}\n")


class CliError(Exception):
    """A user-facing failure: the message names the cause and the fix."""


def require_extra(extra: str, modules: tuple[str, ...], purpose: str) -> None:
    """Refuse, naming the install command, a command whose extra is not installed: before it starts, not as an
    ImportError half way through (``purpose``: what needs the packages, e.g. ``python -m gpuperf plot``)."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        from gpuperf.install.command import install_command

        raise CliError(f"{purpose} needs {' and '.join(missing)}, not installed here: {install_command(extra)}")


def other_gpu_line(a: Figures, b: Figures, allowed: bool) -> str:
    """The header line of a comparison across GPU models (``--allow-other-gpu``), ``""`` for one model; a
    comparison across models that was not asked for is refused: its deltas measure the hardware."""
    if not a.gpu_slug or not b.gpu_slug or a.gpu_slug == b.gpu_slug:
        return ""
    models = f"A is {a.gpu or a.gpu_slug} ({a.gpu_slug}), B is {b.gpu or b.gpu_slug} ({b.gpu_slug})"
    if not allowed:
        raise CliError(f"{models}: figures of two GPU models differ by the hardware, not by a change; compare "
                       "runs of one model, or pass --allow-other-gpu to compare them anyway")
    return f"GPU models differ ({models}; --allow-other-gpu): the deltas include the hardware's difference"


def other_board_line(a: Figures, b: Figures) -> str:
    """The header line of a comparison of two boards of one model, ``""`` for one board (or one that is not known):
    two H200s differ by a few per cent on some cases (docs/fleet.md), which a delta then includes."""
    if not a.gpu_uuid or not b.gpu_uuid or a.gpu_uuid == b.gpu_uuid or a.gpu_slug != b.gpu_slug:
        return ""
    return (f"A and B ran on different GPUs (A {a.gpu_uuid[:12]}, B {b.gpu_uuid[:12]}, both {a.gpu_slug}): each "
            "delta includes how the two boards differ; to judge a change, compare runs of one GPU (python -m gpuperf "
            "ab) or judge B against a baseline recorded from a fleet (docs/fleet.md)")


def known_error(exc: Exception) -> bool:
    """Whether ``exc`` is one of ``ERRORS``: its message names the cause and the fix, so it is printed as it is."""
    return isinstance(exc, tuple(getattr(sys.modules[module], name) for module, name in ERRORS
                                 if module in sys.modules))


def describe_os_error(exc: OSError) -> str:
    """One line for a file-system error: the path, the cause and the fix (``store.os_errors``)."""
    return describe_os_problem(exc)
