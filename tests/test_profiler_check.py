"""tools/gpu_host/profiler_check.py's pure parts: calls split at the flushes of a torch.profiler trace, and the suite's
figure compared on time, or on cycles for a clock-bound case that ran below the maximum clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.gpu_host.profiler_check import AT_MAX_CLOCK, _split_spans, comparison, judged

ROOT = Path(__file__).resolve().parents[1]
FLUSH = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<int, at::native::func_wrapper_t<int, sum>>>"


def test_a_call_is_the_span_of_its_kernels_between_two_flushes() -> None:
    events = [(FLUSH, 0.0, 100.0), ("gemm", 101.0, 150.0), ("reduce", 151.0, 160.0), (FLUSH, 161.0, 260.0),
              ("Memset (Device)", 262.0, 263.0), ("gemm", 265.0, 312.0), (FLUSH, 313.0, 400.0)]
    assert _split_spans(events, frozenset({FLUSH})) == pytest.approx([59e-6, 47e-6])


RECORD = {"case_id": "t.py::test_mm[m8192-cold]", "median_s": 1.5e-3, "call_clock_mhz": 1400.0,
          "cycles_per_call": 1.5e-3 * 1400e6, "clock_bound": True, "value": 700.0, "unit": "TFLOPS"}


def test_a_clock_bound_case_below_the_maximum_clock_is_compared_on_cycles() -> None:
    traced = {"median_s": 1.5e-3 * 1400 / 1300, "sm_clock_mhz": 1300.0, "max_sm_clock_mhz": 1980.0,
              "cycles_per_call": 1.5e-3 * 1400e6}
    basis, delta_time, delta = judged(RECORD, traced)
    assert basis == "cycles" and delta_time == pytest.approx(7.69, abs=0.01) and delta == pytest.approx(0.0)


def test_a_memory_bound_case_or_one_at_the_maximum_clock_is_compared_on_time() -> None:
    traced = {"median_s": 1.53e-3, "sm_clock_mhz": 1300.0, "max_sm_clock_mhz": 1980.0, "cycles_per_call": 2e6}
    assert judged({**RECORD, "clock_bound": False}, traced)[0] == "time"
    at_max = {**traced, "sm_clock_mhz": 1980 * AT_MAX_CLOCK + 1}
    assert judged({**RECORD, "call_clock_mhz": 1980.0}, at_max) == ("time", pytest.approx(2.0), pytest.approx(2.0))


def test_the_table_fails_beyond_the_limit_and_on_nothing_compared() -> None:
    results = {"run": {"gpu_name": "NVIDIA H200", "started": "2026-12-01T22:50:32+00:00", "extra": {"uuid": "GPU-1"}},
               "records": [RECORD]}
    profile = {"gpu": "NVIDIA H200", "torch": "2.11", "calls": 50, "trace_s": 1.0, "warmup_s": 1.0,
               "cases": {RECORD["case_id"]: {"median_s": 1.53e-3, "sm_clock_mhz": 1400.0,
                                             "max_sm_clock_mhz": 1980.0, "cycles_per_call": 1.53e-3 * 1400e6}}}
    lines, ok = comparison(results, profile, 2.0)
    assert not ok and "| cycles | +2.00 |" in lines[4] and "largest difference 2.00 %" in lines[-1]
    assert comparison(results, profile, 2.5)[1]
    assert not comparison(results, {**profile, "cases": {}}, 2.0)[1]


def test_the_compare_command_names_the_trace_s_flush_when_the_profile_records_it(tmp_path: Path) -> None:
    """``trace --flush-mib N`` writes ``flush_mib`` into the profile; ``compare`` (the command) says how much each call's
    flush read, and a profile from before the option says nothing of it."""
    results = {"run": {"gpu_name": "NVIDIA H200", "started": "2026-12-01T22:50:32+00:00", "extra": {"uuid": "GPU-1"}},
               "records": [RECORD]}
    case = {"median_s": 1.5e-3, "sm_clock_mhz": 1400.0, "max_sm_clock_mhz": 1980.0, "cycles_per_call": 1.5e-3 * 1400e6}
    profile = {"gpu": "NVIDIA H200", "torch": "2.11", "calls": 50, "trace_s": 1.0, "warmup_s": 1.0,
               "cases": {RECORD["case_id"]: case}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    for extra, shown in (({"flush_mib": 120}, "1.0 s of warm-up, 120 MiB read before each call."),
                         ({}, "1.0 s of warm-up.")):
        (tmp_path / "profile.json").write_text(json.dumps({**profile, **extra}))
        done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_host" / "profiler_check.py"), "compare",
                               str(tmp_path / "results.json"), str(tmp_path / "profile.json")], capture_output=True,
                              text=True, check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0].endswith(shown)
    parser_help = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_host" / "profiler_check.py"), "trace",
                                  "--help"],
                                 capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "--flush-mib" in parser_help
