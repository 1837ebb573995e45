"""pytest-benchmark, loaded only for a session that uses it. It is a dependency (``--benchmark-json`` carries the
suite's figures, ``output/benchmark_export.py``) and registers its own ``pytest11`` entry point, so every pytest
session of an environment that installs gpuperf would import it (0.05 s, a fifth of an empty session). The
plugin defers it: blocked while the entry points load, then loaded at once when the command line (with
``addopts`` and ``$PYTEST_ADDOPTS``) names one of its ``--benchmark-…`` options. A test of a session that did not
ask for it, but uses its ``benchmark`` fixture, fails with the fix: ``-p benchmark`` (in ``addopts``, say), which
loads it before gpuperf's plugin, as ``-p no:benchmark`` blocks it: both are the user's and stay so.

The entry points load in the order the environment lists its distributions, which is the file system's: in a
checkout run with ``python -m pytest`` gpuperf's own metadata comes first, in a user's virtual environment
pytest-benchmark often does. Loaded first by its entry point, it is taken out again (unregistered, its header and
its plugin line with it; only its options stay declared, doing nothing) unless the command line asks for it, so
every environment behaves alike.

Under pytest-xdist, pytest-benchmark disables itself (its workers measure nothing it could gather), so
``--benchmark-json`` would write an empty file: that pair is refused at start-up (``refuse_under_xdist``).

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
#: The plugin managers where pytest-benchmark's entry point loaded before gpuperf's (taken out unless asked for).
_loaded_first: weakref.WeakSet[Any] = weakref.WeakSet()


def asks_for_output(args: Sequence[str]) -> bool:
    return any(str(arg).startswith("--benchmark") for arg in args)


def asks_for_plugin(args: Sequence[str]) -> bool:
    """``-p benchmark`` (or ``-pbenchmark``): the user's own request to load it always."""
    args = [str(arg) for arg in args]
    return "-pbenchmark" in args or any(a == "-p" and b == BENCHMARK for a, b in zip(args, args[1:]))


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    if pluginmanager.is_blocked(BENCHMARK):
        return
    if pluginmanager.get_plugin(BENCHMARK) is None:
        pluginmanager.set_blocked(BENCHMARK)
        _deferred.add(pluginmanager)
    else:
        _loaded_first.add(pluginmanager)


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    manager = early_config.pluginmanager
    if manager in _loaded_first:
        _loaded_first.discard(manager)
        if not asks_for_output(args) and not asks_for_plugin(args):
            _take_out(manager)
        return
    if manager not in _deferred:
        return
    _deferred.discard(manager)
    if asks_for_output(args):
        manager.unblock(BENCHMARK)
        manager.load_setuptools_entrypoints("pytest11", BENCHMARK)
    else:
        manager.register(NotLoaded(), "gpuperf-benchmark-not-loaded")


def _take_out(manager: pytest.PytestPluginManager) -> None:
    """pytest-benchmark unregistered and blocked, as if gpuperf had loaded first (its ``pytest_configure`` has not
    run yet: only its options were declared), and out of the header's plugin list."""
    plugin = manager.unregister(name=BENCHMARK)
    manager.set_blocked(BENCHMARK)
    distinfo = getattr(manager, "_plugin_distinfo", None)  # pluggy's list behind the header's "plugins:" line
    if isinstance(distinfo, list):
        distinfo[:] = [(loaded, dist) for loaded, dist in distinfo if loaded is not plugin]
    manager.register(NotLoaded(), "gpuperf-benchmark-not-loaded")


def refuse_under_xdist(config: pytest.Config) -> None:
    """``--benchmark-json`` with pytest-xdist distributing the tests is a usage error, not an empty file."""
    if config.getoption("benchmark_json", None) and config.getoption("dist", "no") != "no":
        raise pytest.UsageError("gpuperf: --benchmark-json writes nothing under pytest-xdist (-n/--dist): "
                                "pytest-benchmark disables itself when xdist distributes the tests; drop -n, or read "
                                "the same figures from results/<timestamp>/results.json")


class NotLoaded:
    """Stands in for pytest-benchmark's fixture in a session that did not load it."""

    @pytest.fixture
    def benchmark(self) -> None:
        pytest.fail("pytest-benchmark is not loaded in this session: gpuperf loads it only for a session that asks "
                    "for its output (a --benchmark-… option); add -p benchmark (to addopts, say) to load it always",
                    pytrace=False)
