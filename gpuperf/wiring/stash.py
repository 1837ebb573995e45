"""The keys under which the plugin and the run's lifecycle keep their objects on pytest's config and items,
and the names of the report properties that carry records, runs and cases from xdist workers.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the keys' types only: a session that collects no perf test never loads the fixtures
    from gpuperf.verdict.accounting import CollectedTests
    from gpuperf.wiring.fixtures import GpuPool, Perf
    from gpuperf.wiring.session import SessionState
    from gpuperf.wiring.session_options import Options

OPTIONS = pytest.StashKey["Options"]()  # in every session
STATE = pytest.StashKey["SessionState"]()  # once the plugin is armed (arming.py)
POOL = pytest.StashKey["GpuPool"]()
PERF = pytest.StashKey["Perf"]()
PINNED = pytest.StashKey[int]()  # an xdist worker's GPU (its index under --gpu), pinned by CUDA_VISIBLE_DEVICES
COLLECTED = pytest.StashKey["CollectedTests"]()
GPU_OF = pytest.StashKey[int]()  # a selected perf test's GPU, in --gpu numbering (set at collection)
PREVIOUS_CASES_DIR = pytest.StashKey["Path | None"]()
RECORD_PROPERTY = "gpuperf_record"
RUN_PROPERTY = "gpuperf_run"
CASE_PROPERTY = "gpuperf_case"  # on every selected perf test: its case id and GPU, for the accounting
COLLECTED_OUTPUT = "gpuperf_collected"  # an xdist worker's CollectedTests, sent to the controller
