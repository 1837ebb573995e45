"""tools/generators/history_generate.py, at a small scale: each case's noise as the validation runs show it, the two
figures of a power-capped case, and a driver change named end to end through `history ingest` and `history changes`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.generators import history_generate  # noqa: E402


def test_each_case_s_noise_is_taken_from_the_validation_runs() -> None:
    cases = {case.case_id: case for case in history_generate.case_noises()}
    assert len(cases) == 129
    fp64 = cases["perf_tests/test_gemm.py::test_gemm_perf[fp64-nn-4096x4096x4096-cold]"]
    assert fp64.power_capped and 0.02 < fp64.time_noise < 0.025 and fp64.max_clock_noise is not None
    assert fp64.max_clock_noise < 0.001 and fp64.judged_noise == fp64.max_clock_noise
    gemv = next(case for case_id, case in cases.items() if "test_gemv_perf" in case_id)
    assert not gemv.power_capped and gemv.max_clock_noise is None and gemv.judged_noise == gemv.time_noise


def test_a_generated_power_capped_case_varies_like_its_validation_runs() -> None:
    case = next(case for case in history_generate.case_noises() if "fp64-nn-4096x4096x4096" in case.case_id)
    measured, at_max = history_generate.generate(case, np.random.default_rng(1), 4000, 2000, -0.03)
    assert at_max is not None
    assert abs(np.std(measured[:2000]) / np.mean(measured[:2000]) - case.time_noise) < 0.002
    assert abs(np.std(at_max[:2000]) / np.mean(at_max[:2000]) - (case.max_clock_noise or 0)) < 0.0002
    assert abs(np.mean(at_max[2000:]) / np.mean(at_max[:2000]) - 0.97) < 0.001
    assert history_generate.found_within(at_max[:2003], case.spread, 2000)


@pytest.mark.long
def test_a_driver_change_is_named_end_to_end(tmp_path: Path) -> None:
    cases = [case for case in history_generate.case_noises() if case.power_capped][:3]
    (row,) = history_generate.driver_change(cases, np.random.default_rng(2), tmp_path, 1, runs=30, step_at=20)
    assert len(list((tmp_path / "history-0").glob("*.json"))) == 30
    named = re.search(r"\| (\d+) of (\d+) slowdowns whose commit range holds the driver change name it", row)
    assert named and named.group(1) == named.group(2) == "3", row
