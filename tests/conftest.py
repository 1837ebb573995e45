"""Shared set-up of the CPU tests: the two tiers and the Hypothesis profiles.

The README's ``python3 -m pytest tests`` runs the fast tier on ``FAST_TIER_WORKERS`` pytest-xdist workers (when the
command line names the whole folder and no ``-n``): the in-process end-to-end runs, property tests at the
``fast`` profile's example count, scale and timing checks at small sizes. Tests marked ``long`` (every test that
takes a second or more on the 2-core machine, such as an end-to-end run in fresh processes or the browser; the same
checks at full size: big histories, the browser's timing, statistical calibration over many runs) are deselected
unless ``-m`` names the marker; ``.ci/run`` runs them after the fast tier, with every property test again at the
``long`` profile, on two workers: ``python3 -m pytest tests -m "(long or hypothesis) and not serial"
--hypothesis-profile=long -n 2``, then the few marked ``serial`` (a limit of wall-clock time, judged with no second
worker beside them) on one process: ``python3 -m pytest tests -m "long and serial"``.
"""

from __future__ import annotations

import fcntl
import gc
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

# pytester's in-process runs forget the modules first imported inside them; SQLAlchemy (imported by the plugin's
# history append at a session's end) does not survive being imported a second time into one process, so it is
# imported once here, before any in-process run; nor does NumPy (imported by the history store). The modules a
# session loads at its end (the report, the history append and its store) are imported once here too, rather than
# compiled again in each of the few hundred in-process runs (where PYTHONDONTWRITEBYTECODE is set, from source).
import numpy  # noqa: F401
import pytest
import sqlalchemy  # noqa: F401
from hypothesis import HealthCheck, settings

import gpuperf.output.report  # noqa: F401
import gpuperf.history.database  # noqa: F401
import gpuperf.store.results  # noqa: F401
import gpuperf.wiring.history_append  # noqa: F401

LONG = "long"
SERIAL = "serial"
REPO = Path(__file__).resolve().parents[1]
#: Workers of the README's command: its fast tier takes twice as long on one process (docs/ci.md).
FAST_TIER_WORKERS = 2


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``python3 -m pytest tests`` runs on ``FAST_TIER_WORKERS`` workers unless the command line says otherwise
    (``-n 0`` for one process); a run of some files, the long tier (serial, for its timing checks), a collection
    or a debugging session stays in this process."""
    whole = [Path(arg).resolve() for arg in config.args] == [Path(__file__).resolve().parent]
    if (whole and getattr(config.option, "numprocesses", 0) is None and not hasattr(config, "workerinput")
            and LONG not in (config.getoption("-m") or "") and not config.option.collectonly
            and not config.getoption("usepdb", False)):
        config.option.numprocesses = FAST_TIER_WORKERS

#: Python caches compiled modules in ``__pycache__`` (git-ignored), and pytest its rewritten test modules and
#: plugin packages there too, unless bytecode is not to be written ($PYTHONDONTWRITEBYTECODE, as on the CI
#: machine): then every process these tests start (xdist's workers, pytester's sessions, whose in-process runs
#: import the harness's modules afresh, the CLI's subprocesses) compiles all of it again: a sixth of the fast
#: tier's time on the 2-core machine. The cache is kept regardless, here and in every process started from here.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

#: Examples per property test. No deadline (a shared CI core stalls), no example database (the runs are the
#: same on every machine), and fixtures that are function-scoped are fine: the tests reset what they use.
_COMMON = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
settings.register_profile("fast", max_examples=20, **_COMMON)  # type: ignore[arg-type]
settings.register_profile(LONG, max_examples=500, **_COMMON)  # type: ignore[arg-type]
settings.load_profile("fast")


@pytest.fixture(autouse=True, scope="session")
def _child_sessions() -> Iterator[None]:
    """Every pytest session and command these tests start (pytester's, xdist's workers, the tools') runs with
    exactly these settings from the environment (a developer's own were this session's): no Hypothesis plugin,
    whose terminal summary imports all of Hypothesis (0.4–0.8 s a session here) for sessions that use none of it,
    and no history unless the test names one (``--history``, or ``$GPUPERF_HISTORY`` set again): the default
    appends every run to a new SQLite file, a schema made per session (a fifth of tests/test_plugin.py's time).
    The tests of the default history delete the variable."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")
        patch.setenv("GPUPERF_HISTORY", "none")
        yield


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{LONG}: the long tier (full-size scale, timing and calibration checks); "
                                       f"deselected unless -m names it")
    config.addinivalue_line("markers", f"{SERIAL}: a long test judged on wall-clock time; .ci/run runs these on one "
                                       f"process, after the rest of the long tier has run on two workers")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if LONG in (config.getoption("-m") or ""):
        return
    dropped = [item for item in items if item.get_closest_marker(LONG) is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.get_closest_marker(LONG) is None]


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (every module, the items, Hypothesis, SQLAlchemy) lives to the end: frozen out of the
    garbage collector's reach (gc.freeze), its full collections, and the five at the session's end, scan only what
    the tests make, not the ~220,000 objects collection left (a tenth of a second each here)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def committed_site(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The trend site of the committed H200 runs, built once by the documented rebuild
    (tools/evidence/trend_screenshot.py, without its browser step): the CLI's checks read it, the browser's open it.
    Once per run: xdist's workers share the run's temporary folder, where the first to need the site builds it under a
    lock (4 s of CPU)."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent  # the run's, above each worker's own
    work, done = shared / "committed-trend", shared / "committed-trend.done"
    with (shared / "committed-trend.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(work, ignore_errors=True)  # what a failed build left
            tool = REPO / "tools" / "evidence" / "trend_screenshot.py"
            result = subprocess.run([sys.executable, str(tool), "--no-screenshot", "--work", str(work)], cwd=REPO,
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stderr
            done.touch()
    return work / "site"
