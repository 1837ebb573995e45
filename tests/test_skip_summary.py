"""The short summary gives one skip line per reason in a suite's session (``output/skips.py``): pytest folds skips
by file, line and reason, so a selection skipped for want of a GPU read as one line per test function."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

GPU_TESTS = "def test_one(gpu):\n    raise AssertionError('ran')\n\n\ndef test_two(gpu):\n    raise AssertionError('ran')\n"


def test_one_reason_at_several_places_is_one_line_and_junit_keeps_each_place(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('import sys\nsys.modules["cupy"] = None\npytest_plugins = ["gpuperf.wiring.plugin"]\n')
    pytester.makepyfile(test_a=GPU_TESTS, test_b=GPU_TESTS,
                        test_c="import pytest\n\ndef test_other():\n    pytest.skip('a reason of its own')\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", "--junitxml=junit.xml", "--results-dir", "none",
                                "--history", "none")
    result.assert_outcomes(skipped=5)
    skips = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert len(skips) == 2, skips
    assert skips[0].startswith("SKIPPED [4] .: no GPU: CuPy is not importable")
    assert skips[1].startswith("SKIPPED [1] test_c.py:") and skips[1].endswith("a reason of its own")
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    places = sorted((case.find("skipped").text or "").split(": ")[0] for case in cases)  # type: ignore[union-attr]
    assert [place.rpartition("/")[2] for place in places] == ["test_a.py:1", "test_a.py:5", "test_b.py:1",
                                                              "test_b.py:5", "test_c.py:4"]
