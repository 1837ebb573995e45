"""One side of an A/B run (``python -m gpuperf ab``): the pytest process takes its turns on the GPU.

The ``ab`` command (the coordinator, ``coordinator.py``) runs the base and the head tree in two pytest processes
on one GPU, each with this module as a plugin (``-p gpuperf.ab.side``), and lets only one of them run at a time: a
process holds the turn from the moment it is granted until it next asks. Each process says which suite tests it
collected, asks before each suite test (its fixtures, its body and its teardown run in its turn), reports each
checked figure and measures that case again while the coordinator answers ``again`` (``messages.py``). Its one tie
to the measuring session is the turn protocol (``wiring/turns.py``): ``Turns`` is what follows each check's first
record on this side.

A side waits for its turn as long as the coordinator lives: the coordinator stops a side that holds the GPU
too long, and its end (even killed) closes the socket. A coordinator that went away ends the session with one
line naming the cause, never a hang.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from gpuperf.ab.messages import AGAIN, END, HELLO, ONLY_ENV, ROUND, SIDE_ENV, SOCKET_ENV, START, THRESHOLD_ENV
from gpuperf.ab.paired import DEFAULT_THRESHOLD
from gpuperf.store.records import Record
from gpuperf.wiring.containment import carried
from gpuperf.wiring.turns import Again


class TurnError(RuntimeError):
    """The turn-taking failed (the coordinator cannot be reached or went away); the message names it."""


class Turns:
    """The side's end of the conversation with the coordinator (``connection``: a connected stream socket), and the
    turn protocol of this side's session: each check is measured again in rounds, never confirmed alone."""

    def __init__(self, connection: socket.socket, side: str, threshold: float = DEFAULT_THRESHOLD) -> None:
        self.side = side
        #: Each round is sampled to the run's threshold: its figure's interval within the stopping rule's fraction
        #: of it, as a gate case is to its band (``gate.round_stopping_band``).
        self.round_band: float | None = threshold
        self._socket = connection
        self._reader = connection.makefile("r", encoding="utf-8")
        self._keys: dict[str, int] = {}  # checks of one case id within the current test

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Turns | None:
        """The side's turns when ``ab`` started this process (``$GPUPERF_AB_SOCKET`` set), else ``None``."""
        path = environ.get(SOCKET_ENV)
        if not path:
            return None
        side = environ.get(SIDE_ENV, "")
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(path)
        except OSError as exc:
            raise TurnError(f"cannot reach the A/B coordinator at {path} ({exc}): ${SOCKET_ENV} is set by "
                            "python -m gpuperf ab for the processes it starts; unset it to run pytest alone") from exc
        return cls(connection, side, float(environ.get(THRESHOLD_ENV) or DEFAULT_THRESHOLD))

    def hello(self, tests: Sequence[str], checking: Sequence[str] = ()) -> None:
        """Tell the coordinator this process's suite tests (case ids), in the order they will run, and which of
        them check a figure (use ``perf``)."""
        self._send({"kind": HELLO, "side": self.side, "pid": os.getpid(), "tests": list(tests),
                    "checking": list(checking)})

    def start(self, test: str) -> None:
        """Wait for the turn to run ``test`` (its set-up, body and teardown)."""
        self._keys = {}
        self._ask({"kind": START, "test": test})

    def rounds(self, test: str, first: Record, again: Callable[[], Record]) -> int:
        """Report ``first`` (a checked figure of ``test``) and measure again (``again``) while the coordinator
        asks for another round; the number of rounds this side measured. A record that cannot be carried reaches
        the coordinator as its ``ERROR`` row (``containment.carried``)."""
        occurrence = self._keys.get(first.case_id, 0)
        self._keys[first.case_id] = occurrence + 1
        key = first.case_id if occurrence == 0 else f"{first.case_id}@{occurrence + 1}"
        record, measured = first, 1
        try:
            while self._ask({"kind": ROUND, "test": test, "key": key, "record": carried(record)[0]}) == AGAIN:
                record, measured = again(), measured + 1
        except TurnError as exc:
            pytest.exit(f"gpuperf ab: {exc}", returncode=pytest.ExitCode.INTERRUPTED)
        return measured

    def settle(self, test: str, first: Record, again: Again) -> Record:
        """``first`` stands; its rounds, each on operands in fresh memory, go to the coordinator."""
        self.rounds(test, first, lambda: again(True))
        return first

    def end(self) -> None:
        """This process is finished with the GPU (its turn is given up for good)."""
        try:
            self._send({"kind": END})
        except TurnError:
            pass  # the coordinator already went away: nothing waits for this side
        finally:
            self._reader.close()
            self._socket.close()

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._socket.sendall((json.dumps(message) + "\n").encode())
        except OSError as exc:
            raise TurnError(f"the A/B coordinator went away ({exc}); see the ab command's output") from exc

    def _ask(self, message: dict[str, Any]) -> str:
        self._send(message)
        try:
            line = self._reader.readline()
        except OSError as exc:
            raise TurnError(f"the A/B coordinator went away ({exc}); see the ab command's output") from exc
        if not line:
            raise TurnError("the A/B coordinator closed the connection; see the ab command's output")
        answer: str = json.loads(line)["answer"]
        return answer


def checks_a_figure(item: pytest.Item) -> bool:
    """Whether a test checks a figure (uses the ``perf`` fixture): the only tests an A/B side runs."""
    return "perf" in getattr(item, "fixturenames", ())


class SideHooks:
    """The pytest hooks of an A/B run's side (registered by the plugin when ``ab`` started the process):
    ``suite_test`` tells the suite's tests (those using its fixtures) from the others, which take no turn."""

    def __init__(self, turns: Turns, suite_test: Callable[[pytest.Item], bool],
                 only: frozenset[str] | None = None) -> None:
        self.turns = turns
        self.suite_test = suite_test
        self.only = only  # a confirming pass's case ids (``$GPUPERF_AB_ONLY``); None: every test that checks

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """A side spends the GPU on the paired verdict only: a test that checks no figure (a correctness test, a
        unit test) is deselected here, and left to the suite's own test run; both trees' sides drop the same. A
        confirming pass's side keeps only the tests of its cases."""
        from gpuperf.wiring.case_ids import case_id_of

        def kept(item: pytest.Item) -> bool:
            return checks_a_figure(item) and (self.only is None or case_id_of(item.nodeid) in self.only)

        dropped = [item for item in items if not kept(item)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if kept(item)]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from gpuperf.wiring.case_ids import case_id_of

        tests = [case_id_of(item.nodeid) for item in session.items if self.suite_test(item)]
        checking = [case_id_of(item.nodeid) for item in session.items if checks_a_figure(item)]
        self._take(lambda: self.turns.hello(tests, checking))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.suite_test(item):
            from gpuperf.wiring.case_ids import case_id_of

            self._take(lambda: self.turns.start(case_id_of(item.nodeid)))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.turns.end()

    @staticmethod
    def _take(step: Callable[[], None]) -> None:
        """A failed turn-taking ends the session with its one line."""
        try:
            step()
        except TurnError as exc:
            pytest.exit(f"gpuperf ab: {exc}", returncode=pytest.ExitCode.INTERRUPTED)


@pytest.hookimpl(trylast=True)  # after the gpuperf plugin has read its options
def pytest_configure(config: pytest.Config) -> None:
    """This process is a side of an A/B run: the plugin is armed at start-up, and each check's rounds are taken in
    turns with the other side's (``state.turns``)."""
    from gpuperf.wiring.arming import arm
    from gpuperf.wiring.roles import uses_suite
    from gpuperf.wiring.stash import STATE

    arm(config)
    turns = start_side(config, os.environ, uses_suite)
    if turns is not None:
        config.stash[STATE].turns = turns


def start_side(config: pytest.Config, environ: Mapping[str, str],
               suite_test: Callable[[pytest.Item], bool]) -> Turns | None:
    """This process's turns when ``ab`` started it (its hooks registered), else ``None``."""
    try:
        turns = Turns.from_env(environ)
    except TurnError as exc:
        raise pytest.UsageError(f"gpuperf ab: {exc}") from exc
    if turns is None:
        return None
    if getattr(config, "workerinput", None) is not None or config.getoption("numprocesses", None):
        turns.end()
        raise pytest.UsageError("gpuperf ab: each side of an A/B run is one pytest process on one GPU; drop -n "
                                "(pytest-xdist) from the selection")
    only = environ.get(ONLY_ENV)
    config.pluginmanager.register(SideHooks(turns, suite_test, frozenset(json.loads(only)) if only else None),
                                  "gpuperf-ab-side")
    return turns
