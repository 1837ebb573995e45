"""Sampling options with a value that would crash or hang every case (``--min-sample-time 1e308`` overflowed a
count of calls, ``--warmup 1000000000000`` never ended) are refused as they are parsed, with the bound and its
reason (issue 54)."""

from __future__ import annotations

import pytest

from test_plugin import project, run  # noqa: F401  (the fixture: a project on the synthetic GPU)

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--min-sample-time", "1e308", "'1e308' is more than 1: a sample that long leaves a case too few samples within "
                                   "--case-timeout"),
    ("--warmup-time", "1e308", "'1e308' is more than 60: a warm-up longer than a minute per case only delays the run"),
    ("--warmup", "1000000000000", "'1000000000000' is more than 100000: more calls than any warm-up needs"),
    ("--min-samples", "1000000000000", "'1000000000000' is more than 10000: a case's figure is precise long before"),
    ("--min-samples", "1000000", "'1000000' is more than 10000"),
])
def test_a_sampling_option_past_its_bound_is_a_usage_error(project: pytest.Pytester, option: str,  # noqa: F811
                                                           value: str, said: str) -> None:
    result = run(project, option, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*argument {option}: {said}*"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_value_at_the_bound_is_taken(project: pytest.Pytester) -> None:  # noqa: F811
    result = run(project, "--min-samples", "10000", "--warmup", "100000", "--warmup-time", "0", "--co")
    assert result.ret == pytest.ExitCode.OK
