"""The A/B gate's sensitivity table (``ab/sensitivity.py``, ``tools/evidence/sensitivity_table.py``) from synthetic
ab.json documents: per case, the planted effect and verdict at each plant, the smallest plant caught, and per plant how
many of the cases whose effect reached it were caught."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuperf.ab.sensitivity import (END, START, SensitivityError, coverage, planted_run, replace_sensitivity_section,
                                    sensitivity_section, smallest_caught)

ROOT = Path(__file__).resolve().parents[1]
GEMM, GEMV = "perf_tests/test_gemm.py::test_gemm_perf[fp32-cold]", "perf_tests/test_gemv.py::test_gemv_perf[fp32-cold]"


def ab_json(plant: float | None, rows: dict[str, tuple[str, float]]) -> dict[str, Any]:
    """An ab.json as ``python -m gpuperf ab`` writes it, reduced to what the table reads."""
    head_env = {} if plant is None else {"GPUPERF_SLOWDOWN": str(plant)}
    return {"schema": 1, "head_env": head_env, "threshold": 0.02, "cases": [
        {"case": case, "status": status, "delta_pct": delta, "low_pct": delta - 0.3, "high_pct": delta + 0.3,
         "rounds": 3} for case, (status, delta) in rows.items()]}


RUNS = {0.01: {GEMM: ("SAME", -1.02), GEMV: ("SAME", -0.4)},
        0.02: {GEMM: ("SLOWER", -2.05), GEMV: ("SAME", -1.1)},
        0.05: {GEMM: ("SLOWER", -5.1), GEMV: ("SLOWER", -4.8)}}


def test_each_case_shows_its_planted_effect_verdict_and_smallest_plant_caught() -> None:
    runs = [planted_run(ab_json(plant, rows), f"sens-{plant}.json") for plant, rows in RUNS.items()]
    section = sensitivity_section(runs, [f"sens-{plant}.json" for plant in RUNS])
    assert section.startswith(START) and section.endswith(END)
    # cells are Markdown-escaped: \_ and \[ stand for _ and [
    gemm = next(line for line in section.splitlines() if "test\\_gemm\\_perf" in line)
    assert "-2.05 % \\[-2.35, -1.75\\], SLOWER" in gemm and gemm.rstrip(" |").endswith("2 %")
    gemv = next(line for line in section.splitlines() if "test\\_gemv\\_perf" in line)
    assert "-0.40 % \\[-0.70, -0.10\\], SAME" in gemv and gemv.rstrip(" |").endswith("5 %")
    # the 2 % plant reached the GEMM only (the GEMV's longer reduction cost it 1.1 %): 1 of 1 caught
    assert "- 2 % plant: 1 of the 1 cases whose measured effect reached it caught (100 %)." in section
    # the 5 % plant cost the GEMV 4.8 %: it did not reach the plant, so it is not counted against the gate
    assert "- 5 % plant: 1 of the 1 cases whose measured effect reached it caught (100 %)." in section
    # the 1 % plant cost the GEMM 1.02 %, inside the run's 2 % threshold: SAME by the rule, not a miss
    assert ("- 1 % plant: 0 of the 1 cases whose measured effect reached it caught (0 %); the other read -1.02 %, "
            "inside the run's 2 % threshold: SAME by the rule.") in section


def test_smallest_caught_and_coverage() -> None:
    run = planted_run(ab_json(0.02, {GEMM: ("SAME", -2.4), GEMV: ("SLOWER", -3.0)}), "x")
    cover = coverage(run)
    assert (cover.reached, cover.caught, cover.missed, cover.inside) == (2, 1, (GEMM,), ())
    below = coverage(planted_run(ab_json(0.01, {GEMM: ("SAME", -1.6), GEMV: ("SAME", -2.3)}), "y"))
    assert (below.reached, below.caught, below.missed, below.inside) == (2, 0, (GEMV,), (-1.6,))
    assert smallest_caught({0.05: run.cases[GEMV], 0.02: run.cases[GEMV]}) == 0.02
    assert smallest_caught({0.02: run.cases[GEMM]}) is None


@pytest.mark.parametrize(("document", "message"), [
    ([], "not an ab.json"),
    (ab_json(None, {GEMM: ("SAME", 0.0)}), "no planted slowdown"),
    (ab_json(1.5, {GEMM: ("SAME", 0.0)}), "not a fraction between 0 and 1"),
    ({"head_env": {"GPUPERF_SLOWDOWN": "0.02"}, "cases": [{"status": "SAME"}]}, "without its id or status"),
])
def test_a_file_that_is_not_a_planted_run_is_refused_naming_it(document: Any, message: str) -> None:
    with pytest.raises(SensitivityError, match=message) as raised:
        planted_run(document, "aa.json")
    assert str(raised.value).startswith("aa.json: ")


def test_two_runs_of_one_plant_are_refused() -> None:
    runs = [planted_run(ab_json(0.02, RUNS[0.02]), name) for name in ("a", "b")]
    with pytest.raises(SensitivityError, match="one run per plant"):
        sensitivity_section(runs, ["a", "b"])


def test_the_tool_writes_the_page_s_section_and_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    files = []
    for plant, rows in RUNS.items():
        path = tmp_path / f"sens-{plant}.json"
        path.write_text(json.dumps(ab_json(plant, rows)), encoding="utf-8")
        files.append(str(path))
    page = tmp_path / "ab.md"
    page.write_text(f"# A/B\n\n{START}\nPREVIOUS TABLE\n{END}\n\nafter\n", encoding="utf-8")
    tool = [sys.executable, str(ROOT / "tools" / "evidence" / "sensitivity_table.py")]
    done = subprocess.run([*tool, *files, "--page", str(page)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = page.read_text(encoding="utf-8")
    assert "PREVIOUS TABLE" not in text and "test\\_gemm\\_perf" in text and text.endswith("\n\nafter\n")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    refused = subprocess.run([*tool, str(bad)], capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "not JSON" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_ab_page_has_the_section_the_tool_writes() -> None:
    page = (ROOT / "evidence" / "ab.md").read_text(encoding="utf-8")
    section = sensitivity_section([planted_run(ab_json(0.02, RUNS[0.02]), "x")], ["x"])
    assert section in replace_sensitivity_section(page, section)
