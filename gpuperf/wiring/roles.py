"""What kind of pytest process and session this is, as the plugin, its arming and the run-wide hooks ask it: a
test of the suite (one asking for a GPU fixture), a suite's session known at start-up, an xdist worker, a project
that keeps baselines. Apart from ``arming.py`` and ``lifecycle.py`` so that each asks here and neither asks the
other.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import pytest

from gpuperf.wiring.options import PYTEST_OPTIONS
from gpuperf.wiring.stash import OPTIONS

#: The fixtures that make a test one of the suite's: only such tests arm the plugin, are deselected as slow, or
#: have their out-of-memory error rewritten, so the plugin leaves every other test of a repository as it is.
SUITE_FIXTURES = frozenset({"gpu", "gpu_index", "stream", "cublas_handle", "flush_mode", "measure", "perf"})


def uses_suite(node: pytest.Item | pytest.Metafunc) -> bool:
    """Whether a test (an item, or the function being parametrized) asks for one of the suite's fixtures."""
    return not SUITE_FIXTURES.isdisjoint(getattr(node, "fixturenames", ()))


def is_suite(config: pytest.Config) -> bool:
    """Known at start-up to be a suite's session: the project keeps baselines, or the command line gives one of
    the plugin's options (whose start-up checks, of ``--gpu`` and ``--history``, then run before any test)."""
    return keeps_baselines(config) or any(config.getoption(option.dest) not in (None, False, option.default)
                                          for option in PYTEST_OPTIONS)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def keeps_baselines(config: pytest.Config) -> bool:
    """Whether this project is a gpuperf suite although nothing tells yet (a perf file skipped at collection, an
    xdist controller that sees only ids): ``--gate`` was given or its baseline directory exists. A repository
    that merely has gpuperf installed, even under ``$CI``, is then left alone."""
    return bool(config.getoption("--gate")) or config.stash[OPTIONS].baseline_dir.is_dir()
