"""perf_tests/conftest.py: a session that will run a file with a ``prebuild_early`` (the custom kernels' tests)
starts it once, at the end of collection, before the first test; a session that deselected that file does not."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SUITE_CONFTEST = Path(__file__).resolve().parent.parent / "perf_tests" / "conftest.py"

BUILDS = '''
from pathlib import Path

STARTED = []


def prebuild_early():
    STARTED.append(1)
    Path("started.txt").write_text(str(len(STARTED)))


def test_a():
    assert Path("started.txt").read_text() == "1"  # started before the first test, and once


def test_b():
    assert Path("started.txt").read_text() == "1"
'''


@pytest.mark.parametrize("selection", [[], ["-k", "not test_builds"]])
def test_a_prebuild_starts_at_collection_only_for_a_selected_file(pytester: pytest.Pytester,
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
