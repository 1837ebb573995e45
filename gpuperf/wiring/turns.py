"""The turn protocol: what a check does once its first record stands, the one seam between a measuring session
and an A/B run (``gpuperf/ab/``).

A session alone (``Alone``, every session's default) confirms a regression or a too-noisy figure by measuring the
case once more (``gate.confirm``). A side of an A/B run (``gpuperf.ab.side.Turns``, set on the session's state by
that side's plugin) instead measures the case again in rounds, each in its turn on the GPU, for as long as the
coordinator asks, and keeps its first record: the rounds are judged by the paired rule, not by the baseline.
``Perf`` calls ``settle`` the same way in both, and knows of no A/B run.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gpuperf.store.records import Record
from gpuperf.verdict.gate import confirm, needs_confirmation

#: The check measured again, as a new record of the same case; ``True``: on copies of the operands in fresh memory
#: (``rotation.relocated``), as an A/B round is.
Again = Callable[[bool], Record]


class TurnProtocol(Protocol):
    """What follows a check's first record. ``paired``: the figures are judged in pairs with another process's,
    so the measurer samples each to the fixed noise target rather than to the baseline's band."""

    paired: bool

    def settle(self, test: str, first: Record, again: Again) -> Record:
        """The record that stands for ``first`` (a checked figure of ``test``, a case id)."""
        ...


class Alone:
    """A session of its own: a figure that fails or is too noisy is measured once more before it stands."""

    paired = False

    def settle(self, test: str, first: Record, again: Again) -> Record:
        return confirm(first, again(False)) if needs_confirmation(first) else first
