"""evidence/fp8.md's claims are what the committed evidence says: the trace comparisons are the tool's output on the
committed files, the refusal table is the probe's, the block layouts are the ones that matched float64, the quoted
errors are the probe's, and the baseline's FP8 entries are the medians of the committed runs."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import yaml

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "evidence" / "fp8"
PAGE = (ROOT / "evidence" / "fp8.md").read_text(encoding="utf-8")


def _compare(results: str, profile: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_host" / "profiler_check.py"), "compare",
                          str(EVIDENCE / results), str(EVIDENCE / profile)], capture_output=True, text=True,
                         check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode in (0, 1), out.stderr  # 1: a case beyond the limit, which the page says
    return out.stdout


def test_the_trace_comparisons_are_the_tools_output_on_the_committed_files() -> None:
    for gpu, profile in (("GPU-3b746ff9", "profile"), ("GPU-62da7a84", "profile"), ("GPU-3b746ff9", "profile-short")):
        table = _compare(f"traced-{gpu}.json", f"{profile}-{gpu}.json")
        name = "profiler-check-short" if profile == "profile-short" else "profiler-check"
        assert table == (EVIDENCE / f"{name}-{gpu}.md").read_text(encoding="utf-8")
    shown = _compare("traced-GPU-3b746ff9.json", "profile-GPU-3b746ff9.json")
    assert shown in PAGE
    rows = [line for line in shown.splitlines() if line.startswith("| `perf_tests/")]
    assert "| +0.37 |" in rows[0] and "| +3.14 |" in rows[1]


def test_the_refusal_table_is_the_probes() -> None:
    probe = json.loads((EVIDENCE / "probe-h200.json").read_text())
    expected = [f"| `{key}` | {value['refused'].split('(')[1].split(')')[0]} |"
                for key, value in probe["correctness"].items() if "refused" in value]
    start = PAGE.index("| probe | cuBLASLt's status |")
    table = PAGE[start:].split("\n\n", 1)[0].splitlines()[2:]
    assert table == expected
    wrong = probe["correctness"]["shape (1, 128, 4096) OUTER"]["A:vector B:vector"]["max_err_over_magnitude"]
    assert wrong > 8 and "errors of 8× the bound's magnitude" in PAGE


def test_the_quoted_errors_are_the_probes() -> None:
    probe = json.loads((EVIDENCE / "probe-h200.json").read_text())["correctness"]
    quoted = {"e4m3xe4m3->fp32 scalar": "4.9e-05", "e4m3xe4m3->bf16 scalar": "6.4e-04",
              "e4m3xe4m3->bf16 scalar fast": "8.1e-04", "e4m3xe4m3->e4m3 scalar": "7.7e-03"}
    for key, text in quoted.items():
        error = probe[key]["A:scalar B:scalar"]["max_err_over_magnitude"]
        assert f"{error:.2g}" == f"{float(text):.2g}" and text in PAGE


def test_the_block_layouts_are_the_ones_that_matched() -> None:
    layouts = json.loads((EVIDENCE / "layouts-h200.json").read_text())
    for key in ("(256, 384, 640) BLK128x128_32F/VEC128_32F", "(384, 256, 1040) BLK128x128_32F/VEC128_32F",
                "(272, 136, 1040) BLK128x128_32F/VEC128_32F"):
        errors = {name: entry["max_err_over_magnitude"] for name, entry in layouts[key].items()
                  if isinstance(entry, dict)}
        assert min(errors, key=errors.__getitem__) == "A:k-contiguous-ld4 B:outer-contiguous"
        assert errors["A:k-contiguous-ld4 B:outer-contiguous"] < 0.01
        assert min(value for name, value in errors.items() if "ld4 B:outer" not in name) >= 0.4
    refused = {tokens for tokens in (1, 2, 17) if "refused" in layouts[f"tokens {tokens} BLK/VEC128"]}
    assert refused == {1, 2, 17} and not any("refused" in layouts[f"tokens {t} BLK/VEC128"] for t in (4, 12, 20))


@pytest.mark.long
def test_the_baselines_fp8_entries_are_the_committed_runs_medians(tmp_path: Path) -> None:
    baseline = ROOT / "baselines" / "nvidia-h200.yaml"
    copy = tmp_path / "nvidia-h200.yaml"
    shutil.copy(baseline, copy)
    out = subprocess.run([sys.executable, "-m", "gpuperf", "baseline", "from-fleet", str(copy),
                          "@baselines/nvidia-h200.runs"], capture_output=True, text=True, check=False, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "163 entries from 23 runs on 16 GPUs" in out.stdout
    committed, again = (yaml.safe_load(path.read_text())["entries"] for path in (baseline, copy))
    fp8 = [case for case in committed if "test_fp8" in case]
    assert len(fp8) == 34  # 8 perf cases and one ratio, 24 projections, 1 heuristic
    for case in fp8:
        for field in ("value", "run_spread", "runs", "at_max_clock", "band", "resolution"):
            assert again[case][field] == committed[case][field], case
    figure = committed["perf_tests/test_fp8.py::test_fp8_perf[e4m3-8192x8192x8192-cold]"]["value"]
    ratio = committed["perf_tests/test_fp8.py::test_fp8_perf[e4m3-8192x8192x8192-cold]#fp8_over_bf16"]["value"]
    assert f"{round(figure)} TFLOPS, {ratio:.2f}×" in " ".join(PAGE.split()) and ratio >= 1.7
    assert not math.isnan(figure)


def test_the_third_gpus_gate_is_what_the_page_says() -> None:
    gate = json.loads((ROOT / "evidence" / "h200" / "gate-fp8-GPU-4c46d758.json").read_text())
    uuid = gate["run"]["extra"]["uuid"]
    recorders = {json.loads(path.read_text())["run"]["extra"]["uuid"] for path in EVIDENCE.glob("record-*.json")}
    assert uuid.startswith("GPU-4c46d758") and uuid not in recorders and len(recorders) == 2
    records = gate["records"]
    fp8 = [r for r in records if "test_fp8" in r["case_id"] and ("e4m3" in r["case_id"] or "e5m2" in r["case_id"])]
    neighbours = [r for r in records if "test_fp8" in r["case_id"] and r not in fp8]
    assert len(fp8) == 22 and {r["status"] for r in fp8} == {"PASS"}
    assert len(neighbours) == 12 and [r["status"] for r in neighbours].count("REGRESSED") == 1
    failing = {r["case_id"].split("::")[1]: r for r in records if r["status"] != "PASS"}
    assert sorted(failing) == ["test_fp8_projection[llama3-70b-gate_up-t128-bf16-cold]",
                               "test_gemm_perf[tf32-nn-8192x128x8192-cold]"]
    bf16 = failing["test_fp8_projection[llama3-70b-gate_up-t128-bf16-cold]"]
    assert f"{bf16['value']:.1f} against {bf16['baseline']:.1f} TFLOPS" in " ".join(PAGE.split())
    assert sum(r["status"] == "PASS" for r in records) == 161 and len(records) == 163
