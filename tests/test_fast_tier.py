"""The README's ``python3 -m pytest tests`` runs on two xdist workers (``tests/conftest.py``), and only that command:
a run of some files, ``-n 0`` and the long tier stay in one process. Each case here starts a session over the whole
folder (its collection alone takes seconds), so the check is the long tier's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ONE_TEST = "test_a_linear_layer_is_planned_as_cublaslt_tn_call"


def _session(*args: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_XDIST_WORKER"}
    done = subprocess.run([sys.executable, "-m", "pytest", *args, "-k", ONE_TEST, "-p", "no:cacheprovider"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@pytest.mark.long
@pytest.mark.parametrize(("args", "workers"), [(["tests"], True), (["tests", "-n", "0"], False),
                                               (["tests/test_fp8_plan.py"], False),
                                               (["tests", "-m", "long or not long"], False)])
def test_the_readme_command_alone_starts_two_workers(args: list[str], workers: bool) -> None:
    out = _session(*args)
    assert ("created: 2/2 workers" in out) == workers, out[-2000:]
    assert "1 passed" in out
