"""pytest-benchmark, loaded only for a session that uses it. It is a dependency (``--benchmark-json`` carries the
suite's figures, ``output/benchmark_export.py``) and registers its own ``pytest11`` entry point, so every pytest
session of an environment that installs gpuperf would import it (0.05 s, a fifth of an empty session). The
plugin defers it: blocked while the entry points load, then loaded at once when the command line (with
``addopts`` and ``$PYTEST_ADDOPTS``) names one of its ``--benchmark-…`` options. A test of a session that did not
ask for it, but uses its ``benchmark`` fixture, fails with the fix: ``-p benchmark`` (in ``addopts``, say), which
loads it before gpuperf's plugin, as ``-p no:benchmark`` blocks it: both are the user's and stay so. Loaded before
gpuperf (a checkout naming the plugin in ``pytest_plugins``), it is left alone.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import pytest

#: pytest-benchmark's plugin name (its entry point's).
BENCHMARK = "benchmark"
#: The plugin managers whose pytest-benchmark this module blocked (and may load later).
_deferred: weakref.WeakSet[Any] = weakref.WeakSet()


def asks_for_output(args: Sequence[str]) -> bool:
    return any(str(arg).startswith("--benchmark") for arg in args)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    if pluginmanager.get_plugin(BENCHMARK) is None and not pluginmanager.is_blocked(BENCHMARK):
        pluginmanager.set_blocked(BENCHMARK)
        _deferred.add(pluginmanager)


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    manager = early_config.pluginmanager
    if manager not in _deferred:
        return
    _deferred.discard(manager)
    if asks_for_output(args):
        manager.unblock(BENCHMARK)
        manager.load_setuptools_entrypoints("pytest11", BENCHMARK)
    else:
        manager.register(NotLoaded(), "gpuperf-benchmark-not-loaded")


class NotLoaded:
    """Stands in for pytest-benchmark's fixture in a session that did not load it."""

    @pytest.fixture
    def benchmark(self) -> None:
        pytest.fail("pytest-benchmark is not loaded in this session: gpuperf loads it only for a session that asks "
                    "for its output (a --benchmark-… option); add -p benchmark (to addopts, say) to load it always",
                    pytrace=False)
