"""perf_tests/conftest.py: a session that will run a file with a ``prebuild_early`` (the custom kernels' tests)
starts it once, at the end of collection, before the first test; every test that checks a figure waits until it is
done (a measurement taken while modules compiled had its hold time out on an H200), the others do not; a session
that deselected that file starts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITE_CONFTEST = Path(__file__).resolve().parent.parent / "perf_tests" / "conftest.py"

BUILDS = '''
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

GO = threading.Event()
STARTED = []


def _build():
    GO.wait(5)
    Path("built.txt").write_text("yes")
    return 1


def prebuild_early():
    STARTED.append(ThreadPoolExecutor(1).submit(_build))
    Path("started.txt").write_text(str(len(STARTED)))
    return STARTED[0]


@pytest.fixture
def perf():
    return None


def test_correct():
    assert Path("started.txt").read_text() == "1"  # started before the first test, and once
    assert not Path("built.txt").exists()  # a test that checks no figure does not wait
    GO.set()


def test_perf(perf):
    assert Path("built.txt").read_text() == "yes"  # one that checks a figure waits for the build
'''


@pytest.mark.parametrize("selection", [[], ["-k", "not test_builds"]])
def test_a_prebuild_starts_at_collection_and_measurements_wait_for_it(pytester: pytest.Pytester,
                                                                      selection: list[str]) -> None:
    pytester.makeconftest(SUITE_CONFTEST.read_text())
    pytester.makepyfile(test_builds=BUILDS, test_other="def test_c():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *selection)
    if selection:
        result.assert_outcomes(passed=1, deselected=2)
        assert not (pytester.path / "started.txt").exists()
    else:
        result.assert_outcomes(passed=3)
        assert (pytester.path / "started.txt").read_text() == "1"
