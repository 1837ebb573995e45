"""Hooks of the suite's own tests: what a session of them starts early, and what its measurements wait for."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

#: The background work started at the end of collection (``prebuild_early``), which a measurement waits for.
_STARTED: list[Future[Any]] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """A session that will run a file with a ``prebuild_early`` (the custom kernels' tests) starts it now: their
    modules compile in the background while the tests before the first measurement run (correctness tests)."""
    starts: set[Callable[[], Future[Any]]] = {start for item in session.items
                                              if (start := getattr(getattr(item, "module", None), "prebuild_early",
                                                                   None)) is not None}
    _STARTED.extend(start() for start in starts)


@pytest.fixture(autouse=True)
def _nothing_compiles_while_measuring(request: pytest.FixtureRequest) -> None:
    """A test that checks a figure waits until the background work is done: on an H200 a batched GEMM measured
    while the custom kernels' modules were compiling and loading had its hold time out, and came out
    ``cupti-cold-unheld``, not comparable with its entry."""
    if "perf" in request.fixturenames:
        for started in _STARTED:
            with contextlib.suppress(Exception):  # a failed build raises again where its tests build it
                started.result()
