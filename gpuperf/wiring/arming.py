"""When the plugin wakes up. In every session it only declares its options, reads them and points the case tables'
loader at the project's; the run's machinery (the session state, the GPU pool, the run-wide hooks of
``lifecycle.py``, and with them the baseline store, the gate and PyYAML) loads, *arms*, only once the session is
known to be a suite's: at start-up when the project keeps baselines or one of the plugin's options is given,
else when the first test that asks for a GPU fixture is collected (or, on an xdist controller, when the first report of one arrives).
A repository that merely has gpuperf installed pays for its options and nothing more.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from gpuperf.wiring.stash import CASE_PROPERTY, OPTIONS, POOL, RECORD_PROPERTY, STATE


def armed(config: pytest.Config) -> bool:
    return STATE in config.stash


def selected_gpus(spec: str) -> list[int]:
    """The GPU indices a ``--gpu`` value selects (``all`` asks CUDA how many there are)."""
    if spec == "all":
        from gpuperf.measure.device import device_count

        return list(range(device_count()))
    return [int(part) for part in spec.split(",")]


def arm(config: pytest.Config, late: bool = False) -> None:
    """Build the session's state and GPU pool (a pool set by the project's conftest stays) and register the
    run-wide hooks; ``late``: the session has started already, so its start-up checks run now."""
    if armed(config):
        return
    from gpuperf.wiring.fixtures import GpuPool
    from gpuperf.wiring.lifecycle import SessionHooks
    from gpuperf.wiring.session import SessionState

    config.stash[STATE] = SessionState(config.stash[OPTIONS])
    if POOL not in config.stash:
        config.stash[POOL] = GpuPool()
    hooks = SessionHooks(config, selected_gpus)
    config.pluginmanager.register(hooks, "gpuperf-session")
    if late:
        hooks.start_up()


class ArmOnReport:
    """On an xdist controller, which collects nothing: the first report of a perf test (a worker measured it) arms
    the plugin, and the run-wide hooks take that report too."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        names = {name for name, _ in report.user_properties}
        if armed(self.config) or names.isdisjoint({CASE_PROPERTY, RECORD_PROPERTY}):
            return
        arm(self.config, late=True)
        hooks = self.config.pluginmanager.get_plugin("gpuperf-session")
        if hooks is not None:
            hooks.pytest_runtest_logreport(report)


def check_results_dir(directory: Path | None) -> None:
    """``--results-dir`` must be writable at start-up, not found unwritable after the whole run."""
    if directory is None:
        return
    existing = directory
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
    except OSError as exc:  # a parent that cannot even be looked into
        raise pytest.UsageError(f"gpuperf: --results-dir {directory}: {existing} cannot be read "
                                f"({exc.strerror or exc}); choose a writable directory, or --results-dir none to "
                                "write no results files") from exc
    problem = ""
    if not existing.is_dir():
        problem = f"{existing} is not a directory"
    else:
        try:
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as exc:
            problem = f"{existing} is not writable ({exc.strerror or exc})"
    if problem:
        raise pytest.UsageError(f"gpuperf: --results-dir {directory}: {problem}; choose a writable directory, "
                                "or --results-dir none to write no results files")
