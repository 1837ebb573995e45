"""A session with ``--history none`` never loads the database layer: SQLAlchemy's import (a quarter of a second) is
the history's cost, paid only by a session that has one."""

from __future__ import annotations

import json

import pytest

from test_history_cli import project  # noqa: F401  (the fixture: a git project with the fake-timed plugin)

pytest_plugins = ["pytester"]

REPORT = """
import json, sys

def pytest_unconfigure(config):
    with open("modules.json", "w") as out:
        json.dump(sorted(name for name in sys.modules if name.split(".")[0] == "sqlalchemy")[:3], out)
"""


@pytest.mark.long
@pytest.mark.parametrize("history", ["none", "hist.sqlite"])  # the second: the control
def test_only_a_session_with_a_history_imports_sqlalchemy(project: pytest.Pytester, history: str) -> None:  # noqa: F811
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + REPORT)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--missing-baseline=pass", "--history", history)
    result.assert_outcomes(passed=2, deselected=1)
    loaded = json.loads((project.path / "modules.json").read_text())
    if history == "none":
        assert loaded == [] and (project.path / "results").is_dir()
        results = sorted((project.path / "results").glob("*/results.json"))
        assert json.loads(results[-1].read_text())["run"]["extra"]["provenance"]["git_commit"]
    else:
        assert loaded and (project.path / "hist.sqlite").exists()


HYPOTHESIS_REPORT = """

def pytest_unconfigure(config):
    with open("hypothesis.json", "w") as out:
        json.dump({"imported": "hypothesis" in sys.modules,
                   "plugin": config.pluginmanager.get_plugin("hypothesispytest") is not None}, out)
"""

USES_HYPOTHESIS = """
from hypothesis import given, strategies as st


@given(st.integers())
def test_property(n):
    assert n == n
"""


@pytest.mark.long
@pytest.mark.parametrize("with_property", [False, True])
def test_a_measuring_session_without_hypothesis_tests_never_imports_it(project: pytest.Pytester,  # noqa: F811
                                                                      with_property: bool) -> None:
    """Hypothesis's pytest plugin imports the library at the terminal summary (1.3 s on an H200 host); a measuring
    session whose tests never imported it leaves the plugin out, one with a Hypothesis test keeps it and its report."""
    pytest.importorskip("_hypothesis_pytestplugin")
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + REPORT + HYPOTHESIS_REPORT)
    if with_property:
        (project.path / "test_property.py").write_text(USES_HYPOTHESIS)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--missing-baseline=pass", "--history", "none")
    result.assert_outcomes(passed=3 if with_property else 2, deselected=1)
    seen = json.loads((project.path / "hypothesis.json").read_text())
    assert seen == {"imported": with_property, "plugin": with_property}
