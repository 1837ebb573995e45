"""Hooks of the suite's own tests: what a session of them starts early."""

from __future__ import annotations

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    """A session that will run a file with a ``prebuild_early`` (the custom kernels' tests) starts it now: their
    modules compile in the background while the files before theirs run."""
    starts = {getattr(getattr(item, "module", None), "prebuild_early", None) for item in session.items}
    for start in starts - {None}:
        start()  # type: ignore[misc]
