"""Whose turn it is on the GPU in an A/B run, and when a case has enough rounds: the coordinator's decisions,
pure (no sockets, no processes), so they are tested with scripted messages.

Two sides, ``base`` and ``head``, each a pytest process (``messages.py`` says what they send). A side
that was answered runs, holding the GPU, until its next request; the next turn is granted only when neither side
runs. Rules, in order (``next_grant``):

1. A side waiting at a round of a case that already has its verdict is told ``done``.
2. Both sides at the same case: rounds alternate A B B A … (``_alternate``) until ``paired.enough``, then both
   are told ``done``; a SLOWER, FASTER or NOISY case is left ``unconfirmed``: the command measures it again in a
   fresh pair of processes (``paired.confirm``), since what the two processes differ by repeats in their rounds.
3. A side at a case the other side cannot measure any more (not in its tests, passed, finished, crashed) is
   told ``done``: the case is ``UNPAIRED``, measured on that side only.
4. A side at a case the other side has still to reach waits: the other side is let start its next test.
5. Both sides at different cases that each may still reach (the trees check in another order): the base's case
   is closed unpaired, so neither waits for ever.
6. Both at the start of a test: the one whose test the other will not run goes first; else the base.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gpuperf.measure.kernel_records import SAME_KERNELS, describe_change
from gpuperf.store.records import Record
from gpuperf.ab.messages import AGAIN, DONE, END, GO, HELLO, ROUND, START
from gpuperf.ab.paired import (DEFAULT_ROUNDS_MAX, DEFAULT_THRESHOLD, CaseVerdict, RoundFigure, Verdict, confirm,
                               enough, judge, needs_confirmation, pair, unpaired)

BASE, HEAD = "base", "head"
SIDES = (BASE, HEAD)


@dataclass
class Side:
    """What the coordinator knows of one side's process."""

    name: str
    tests: list[str] = field(default_factory=list)  # its suite tests, in running order (``hello``)
    checking: list[str] = field(default_factory=list)  # those of them that check a figure (use ``perf``)
    waiting: dict[str, Any] | None = None  # the request it waits on an answer to; None while it runs
    finished: bool = False
    lost: str = ""  # why it finished without saying so (crashed, stalled)
    position: int = -1  # the index in ``tests`` of the test it started last

    def index(self, test: str) -> int | None:
        return self.tests.index(test) if test in self.tests else None

    def at(self, kind: str) -> bool:
        return self.waiting is not None and self.waiting["kind"] == kind


@dataclass
class Case:
    """One checked figure of a test (``key``: its case id, ``#ratio`` included) and its rounds on both sides."""

    key: str
    test: str
    rounds: dict[str, list[Record]] = field(default_factory=lambda: {BASE: [], HEAD: []})
    measured: dict[str, list[Record]] = field(default_factory=lambda: {BASE: [], HEAD: []})  # every round
    verdict: CaseVerdict | None = None
    unconfirmed: bool = False  # SLOWER, FASTER or NOISY: to measure again in a fresh pair of processes

    @property
    def kernel_change(self) -> str:
        """``describe_change`` of the base's kernels to the head's (first rounds), empty where either is unknown."""
        base, head = self.measured[BASE], self.measured[HEAD]
        return describe_change(base[0].kernels, head[0].kernels) if base and head else ""


class Schedule:
    def __init__(self, threshold: float = DEFAULT_THRESHOLD, rounds_max: int = DEFAULT_ROUNDS_MAX) -> None:
        self.threshold = threshold
        self.rounds_max = rounds_max
        self.sides = {name: Side(name) for name in SIDES}
        self.cases: dict[str, Case] = {}

    # -- what the sides say --------------------------------------------------------------------------------

    def receive(self, side_name: str, message: dict[str, Any]) -> None:
        side = self.sides[side_name]
        kind = message["kind"]
        if kind == HELLO:
            side.tests = [str(test) for test in message["tests"]]
            side.checking = [str(test) for test in message.get("checking", ())]
            return
        if kind == END:
            side.finished, side.waiting = True, None
            return
        if kind == START:
            index = side.index(message["test"])
            side.position = side.position if index is None else index
        elif kind == ROUND:
            case = self.cases.setdefault(message["key"], Case(message["key"], message["test"]))
            record = Record.from_dict(message["record"])
            case.rounds[side_name].append(record)
            case.measured[side_name].append(record)
        side.waiting = message

    def lose(self, side_name: str, why: str) -> None:
        """The side ended without saying so (its process exited, or it held its turn too long)."""
        side = self.sides[side_name]
        if not side.finished:
            side.finished, side.waiting, side.lost = True, None, why

    @property
    def finished(self) -> bool:
        return all(side.finished for side in self.sides.values())

    def running(self) -> list[str]:
        """The sides that hold (or are starting to take) the GPU: neither waiting nor finished."""
        return [side.name for side in self.sides.values() if not side.finished and side.waiting is None]

    # -- whose turn ----------------------------------------------------------------------------------------

    def next_grant(self) -> tuple[str, str] | None:
        """``(side, answer)`` to send now, or ``None`` while a side runs (or both are finished)."""
        if self.running():
            return None
        waiting = [side for side in self.sides.values() if side.waiting is not None]
        if not waiting:
            return None
        for side in waiting:
            if side.at(ROUND) and self._case(side).verdict is not None:
                return self._grant(side, DONE)
        base, head = self.sides[BASE], self.sides[HEAD]
        if base.at(ROUND) and head.at(ROUND) and self._case(base) is self._case(head):
            return self._alternate(self._case(base))
        for side in waiting:
            if side.at(ROUND) and not self._may_reach(self._other(side), self._case(side)):
                self._close(self._case(side), f"measured on the {side.name} side only: "
                                              f"{self._why_not(self._other(side), self._case(side))}")
                return self._grant(side, DONE)
        for side in waiting:
            if side.at(ROUND) and self._other(side).at(START):
                return self._grant(self._other(side), GO)
        if base.at(ROUND) and head.at(ROUND):
            self._close(self._case(base), "the two trees check their cases in another order, so this one could "
                                          "not be measured in turns")
            return self._grant(base, DONE)
        starting = [side for side in waiting if side.at(START)]
        if len(starting) == 1:
            return self._grant(starting[0], GO)
        base_test, head_test = str(base.waiting and base.waiting["test"]), str(head.waiting and head.waiting["test"])
        if base_test == head_test or not self._may_reach_test(head, base_test):
            return self._grant(base, GO)
        if not self._may_reach_test(base, head_test):
            return self._grant(head, GO)
        return self._grant(base, GO)

    def _alternate(self, case: Case) -> tuple[str, str]:
        """The next round of a case both sides are at: A B B A …, until the rule has enough."""
        base_method, head_method = case.measured[BASE][0].method, case.measured[HEAD][0].method
        if base_method != head_method:
            self._close(case, f"not comparable: measured by {base_method} on the base side, by {head_method} on "
                              "the head (one side without CUPTI? see the sides' run headers)")
            return self._grant(self.sides[BASE], DONE)
        on_base, on_head = len(case.rounds[BASE]), len(case.rounds[HEAD])
        if on_base == on_head:
            paired = pair([RoundFigure.from_record(r) for r in case.rounds[BASE]],
                          [RoundFigure.from_record(r) for r in case.rounds[HEAD]],
                          same_kernels=case.kernel_change == SAME_KERNELS)
            # the limit counts rounds measured, not rounds paired: a side without a valid figure must end too
            if on_base >= self.rounds_max or enough(paired, self.threshold, self.rounds_max):
                case.verdict = judge(paired, self.threshold)
                case.unconfirmed = needs_confirmation(case.verdict)
                return self._grant(self.sides[BASE], DONE)
            return self._grant(self.sides[BASE if on_base % 2 == 0 else HEAD], AGAIN)
        return self._grant(self.sides[BASE if on_base < on_head else HEAD], AGAIN)

    def _grant(self, side: Side, answer: str) -> tuple[str, str]:
        side.waiting = None
        return side.name, answer

    def _case(self, side: Side) -> Case:
        assert side.waiting is not None
        return self.cases[side.waiting["key"]]

    def _other(self, side: Side) -> Side:
        return self.sides[HEAD if side.name == BASE else BASE]

    def _may_reach(self, other: Side, case: Case) -> bool:
        """Whether ``other`` may still measure ``case`` in its turn: it has not measured it, and the case's test is
        still ahead of it (or is the one it is in)."""
        return not case.measured[other.name] and self._may_reach_test(other, case.test)

    def _may_reach_test(self, other: Side, test: str) -> bool:
        index = other.index(test)
        return not other.finished and index is not None and index >= other.position

    def _why_not(self, other: Side, case: Case) -> str:
        if other.lost:
            return f"the {other.name} side {other.lost}"
        if case.test not in other.tests:
            return f"the {other.name} tree has no test {case.test}"
        return f"the {other.name} side did not check it in its test"

    def _close(self, case: Case, why: str) -> None:
        case.verdict = unpaired(why)

    # -- the outcome ---------------------------------------------------------------------------------------

    def verdicts(self) -> list[tuple[Case, CaseVerdict]]:
        """Every case with its verdict; a case left open (a side ended in its rounds) is unpaired."""
        out = []
        for case in self.cases.values():
            if case.verdict is None:
                lost = [side for side in self.sides.values() if side.lost]
                case.verdict = unpaired(f"the {lost[0].name} side {lost[0].lost} during its rounds" if lost else
                                        "its rounds were not finished")
            out.append((case, case.verdict))
        return out

    def unconfirmed(self) -> list[Case]:
        """The cases ``paired.needs_confirmation`` names, to be measured again in a fresh pair of processes."""
        return [case for case in self.cases.values() if case.unconfirmed]

    def settle(self, confirming: Schedule) -> None:
        """Each unconfirmed case's standing verdict, from its first series and ``confirming`` (the fresh pair
        of processes' schedule): ``paired.confirm``; a case that pass did not judge keeps its first series, saying
        why."""
        for case in self.unconfirmed():
            assert case.verdict is not None
            second = confirming.cases.get(case.key)
            if second is None or second.verdict is None or second.verdict.status == Verdict.UNPAIRED:
                why = second.verdict.note if second is not None and second.verdict is not None else "not measured"
                case.verdict = replace(case.verdict, note=f"{case.verdict.note}; its re-measurement in a fresh pair of "
                                                          f"processes gave no verdict ({why})")
            else:
                case.verdict = confirm(case.verdict, second.verdict)
            case.unconfirmed = False

    def unmeasured_tests(self) -> dict[str, list[str]]:
        """Per side, the tests it collected to check a figure that gave none (skipped, failed before a check)."""
        def measured(name: str) -> set[str]:
            return {case.test for case in self.cases.values() if case.measured[name]}

        return {name: [test for test in side.checking if test not in measured(name)]
                for name, side in self.sides.items()}
