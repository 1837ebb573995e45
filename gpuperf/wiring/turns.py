"""The turn protocol: what a check does once its first record stands, the one seam between a measuring session
and an A/B run (``gpuperf/ab/``).

A session alone (``Alone``, every session's default) confirms a regression or a too-noisy figure by measuring the
case once more, on its operands moved to fresh memory (``gate.confirm``). A side of an A/B run
(``gpuperf.ab.side.Turns``, set on the session's state by that side's plugin) instead measures the case again in
rounds, each in its turn on the GPU, for as long as the coordinator asks, and keeps its first record: the rounds are
judged by the paired rule, not by the baseline.
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
    """What follows a check's first record. ``round_band``: where the figures are judged in pairs with another
    process's (an A/B side), the threshold of that verdict, which the measurer samples each round to instead of a
    baseline's band; ``None`` for a session of its own."""

    round_band: float | None

    def settle(self, test: str, first: Record, again: Again) -> Record:
        """The record that stands for ``first`` (a checked figure of ``test``, a case id)."""
        ...


class Alone:
    """A session of its own: a figure that fails or is too noisy is measured once more before it stands, on copies
    of its operands in fresh memory. A process keeps a buffer's placement for good, and placement moves a
    memory-bound call: by 2.5 % for a GEMV in the A/B runs (evidence/ab.md); a Llama-3-70B decode projection's 940 MB
    weight read at 211–221 µs a call in eight processes on the H200 and at 239 µs in two, one of them on a host
    whose next process read 219 µs (docs/fleet.md). Measured again where it was, such a slow process repeats
    itself and stands as a regression; measured again elsewhere, a slower kernel is still slower."""

    round_band: float | None = None

    def settle(self, test: str, first: Record, again: Again) -> Record:
        return confirm(first, again(True)) if needs_confirmation(first) else first
