"""tools/gpu_host/shifted_baseline.py judge on a fleet's baseline: a missed 5 % slowdown counts against the check only where
no entry's resolution stated it (``--by-resolution``); an alarm always does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf.store.baseline import load_baseline

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "gpu_host" / "shifted_baseline.py"
BASELINE = REPO / "baselines" / "nvidia-h200.yaml"


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, check=False, cwd=REPO)


def _results(path: Path, statuses: dict[str, str]) -> Path:
    records = [{"case_id": case, "status": status, "delta_pct": -5.0 if status == "REGRESSED" else -1.0,
                "tolerance": 0.04, "judged_on": "time"} for case, status in statuses.items()]
    path.write_text(json.dumps({"run": {}, "records": records}))
    return path


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shifted")
    made = _tool("write", str(BASELINE), str(out))
    assert made.returncode == 0, made.stderr
    return out / BASELINE.name


def _slow_and_fast(shifted: Path) -> tuple[list[str], list[str], dict[str, float | None]]:
    baseline = load_baseline(shifted)
    assert baseline is not None
    ordered = sorted(baseline.entries)
    return ordered[0::2], ordered[1::2], {case: e.resolution_levelled for case, e in baseline.entries.items()}


@pytest.mark.long
def test_a_miss_the_resolution_stated_passes_by_resolution_and_an_unstated_one_fails(shifted: Path,
                                                                                     tmp_path: Path) -> None:
    slow, fast, resolution = _slow_and_fast(shifted)
    wide = next(case for case in slow if (resolution[case] or 0) > 0.05)
    fine = next(case for case in slow if resolution[case] is not None and resolution[case] <= 0.05)
    statuses = {**{case: "REGRESSED" for case in slow}, **{case: "PASS" for case in fast}}
    stated = _results(tmp_path / "stated.json", {**statuses, wide: "PASS"})
    judged = _tool("judge", str(shifted), str(stated), "--by-resolution")
    assert judged.returncode == 0, judged.stdout
    assert f"missed: {wide}" in judged.stdout and ": stated" in judged.stdout
    assert "1 stated by their entry's resolution (above 5 %), 0 not" in judged.stdout
    assert _tool("judge", str(shifted), str(stated)).returncode == 1  # without the flag every miss fails
    unstated = _results(tmp_path / "unstated.json", {**statuses, fine: "PASS"})
    judged = _tool("judge", str(shifted), str(unstated), "--by-resolution")
    assert judged.returncode == 1 and "0 stated by their entry's resolution (above 5 %), 1 not" in judged.stdout
    alarm = _results(tmp_path / "alarm.json", {**statuses, fast[0]: "REGRESSED"})
    judged = _tool("judge", str(shifted), str(alarm), "--by-resolution")
    assert judged.returncode == 1 and f"alarm: {fast[0]}" in judged.stdout
