"""evidence/ab.md's H200 figures are what the committed A/B runs say (evidence/ab/: each run's ab.json and log)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "evidence" / "ab"
PAGE = (ROOT / "evidence" / "ab.md").read_text(encoding="utf-8")
RUNS = {"each round on the same operands": "b16300f9-78c7", "each round on relocated operands": "75d41c9c-c88d"}


def _run(kind: str, gpu: str) -> dict:  # type: ignore[type-arg]
    name = {"aa": "aa", "slow": "slow"}[kind]
    fixed = "-fixed-placement" if gpu.startswith("b163") else ""
    return json.loads((EVIDENCE / f"{name}{fixed}-GPU-{gpu[:8]}.json").read_text())


def _summary(run: dict) -> str:  # type: ignore[type-arg]
    counts = Counter(case["status"] for case in run["cases"])
    return ", ".join(f"{counts[s]} {s}" for s in ("SLOWER", "FASTER", "SAME") if counts[s])


@pytest.mark.parametrize("label", list(RUNS))
def test_the_table_row_is_the_runs(label: str) -> None:
    gpu = RUNS[label]
    log = (EVIDENCE / f"ab-GPU-{gpu[:8]}.log").read_text()
    assert f"GPU-{gpu}" in log
    gate_wall = re.search(r"gate wall (\d+) s", log)
    assert gate_wall is not None
    aa, slow = _run("aa", gpu), _run("slow", gpu)
    assert aa["base"]["commit"] == aa["head"]["commit"] == slow["head"]["commit"]
    assert slow["head_env"] == {"GPUPERF_SLOWDOWN": "0.02"} and "tools.slowdown" in slow["selection"]  # as it ran
    row = (f"| {label} | GPU-{gpu[:8]} | {_summary(aa)} | {_summary(slow)} | {aa['wall_s']} s "
           f"({gate_wall.group(1)} s) |")
    assert row in PAGE


def _percent(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")


def test_the_quoted_cases_are_the_runs() -> None:
    page = " ".join(PAGE.split())  # the page wraps its lines
    fixed = {case["case"].split("[")[1].split("-cold")[0]: case for case in _run("aa", "b16300f9")["cases"]}
    for shape in ("fp16-opT-16384x16384", "fp32-opT-4096x1024", "fp32-opT-4096x16384"):
        case = fixed[shape]
        assert case["status"] in ("SLOWER", "FASTER")
        quoted = f"{_percent(case['delta_pct'])} % [{_percent(case['low_pct'])}, {_percent(case['high_pct'])}]"
        assert quoted.lstrip("+") in page or quoted in page
    moved = _run("aa", "75d41c9c")["cases"]
    assert all(case["status"] == "SAME" for case in moved)
    assert max(abs(case["delta_pct"]) for case in moved) <= 1.3
    slow = {case["case"].split("[")[1].split("-cold")[0]: case for case in _run("slow", "75d41c9c")["cases"]}
    first = {case["case"].split("[")[1].split("-cold")[0]: case for case in _run("slow", "b16300f9")["cases"]}
    for run in (slow, first):
        assert run["fp32-opT-64x65536"]["status"] == "FASTER"
    assert f"+{first['fp32-opT-64x65536']['delta_pct']:.1f} % and +{slow['fp32-opT-64x65536']['delta_pct']:.1f} %" in page
    assert f"`bf16-opN-16384²` {_percent(slow['bf16-opN-16384x16384']['delta_pct'])} %" in page
    assert f"`fp32-opT-65536x64` {_percent(slow['fp32-opT-65536x64']['delta_pct'])} %" in page
    slower = [case["delta_pct"] for case in slow.values() if case["status"] == "SLOWER"]
    assert f"from {max(slower):.1f} % to {min(slower):.1f} %".replace("-", "−") in page
