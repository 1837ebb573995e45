"""The builds selection end to end on the CPU: a ``builds`` case stays out of the default selection, runs with
``-m builds``, carries its build's facts into results.json, and ``tools/evidence/custom_builds.py`` renders that file
into a page; and evidence/custom-kernels.md's build tables are the committed builds run, rendered.

The suite's measuring loop is replaced by test_plugin's synthetic timer (seconds per call from ``timings.json``),
so the figures are known and the rendered ratios can be checked exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf.output import custom_builds
from gpuperf.store.results import load_run
from test_plugin import fake_project

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "evidence" / "custom_builds.py"
#: The committed builds run and the page its tables are rendered into.
COMMITTED = ROOT / "evidence" / "custom-builds" / "results.json"
PAGE = ROOT / "evidence" / "custom-kernels.md"

BUILDS_TESTS = '''
import pytest

from gpuperf.measure.metrics import gemm_work

WORK = gemm_work(4096, 4096, 4096, "fp32")


def test_plain(measure, perf):
    perf.check(measure(lambda: "ref", WORK))


@pytest.mark.builds
@pytest.mark.custom
@pytest.mark.perf
@pytest.mark.parametrize("build", ["fast", "slow"])
def test_build(build, measure, perf):
    reference = measure(lambda: "ref", WORK, label="cuBLAS fp32")
    mine = measure(lambda: build, WORK, label=f"custom {build}")
    perf.attach(build={"case": "optimized 4096x4096x4096", "build": build, "default": build == "fast",
                       "kernel": "warp_sgemm_vec4", "registers": 255, "shared_bytes": 74496, "spill_bytes": 0,
                       "threads": 256, "blocks_per_sm": 1})
    perf.check(mine)
    perf.check_ratio(mine, reference, name="vs_cublas")
'''

REF_S = 2 * 4096**3 / 50e12  # cuBLAS at 50 TFLOPS
FAST_S = REF_S / 0.95  # 0.95x cuBLAS
SLOW_S = REF_S / 0.5  # 0.5x cuBLAS


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return fake_project(pytester, monkeypatch, {"test_builds": BUILDS_TESTS}, ref=REF_S, fast=FAST_S, slow=SLOW_S)


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, cwd=ROOT, check=False)


def _builds_run(project: pytest.Pytester, out: str = "builds") -> Path:
    result = project.runpytest("-p", "no:cacheprovider", "-m", "builds", "--missing-baseline", "pass",
                               "--results-dir", out)
    result.assert_outcomes(passed=2, deselected=1)
    (results,) = (project.path / out).rglob("results.json")
    return results


def test_builds_cases_are_not_in_the_default_selection(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--missing-baseline", "pass", "--results-dir", "none")
    result.assert_outcomes(passed=1, deselected=2)


def test_a_builds_run_carries_each_builds_facts_and_the_tool_renders_them(project: pytest.Pytester) -> None:
    results = _builds_run(project)
    _, records = load_run(results)
    facts = {r.case_id: r.extra.get("build") for r in records}
    assert {f["build"] for f in facts.values() if f} == {"fast", "slow"}  # the ratio rows carry them too

    printed = _tool(str(results))
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert lines[0] == custom_builds.START and lines[-1] == custom_builds.END
    assert "**optimized 4096x4096x4096** (cuBLAS 50.00 TFLOPS in the same run; 2 builds):" in lines
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[2] == ("| **`fast`** (default) | `warp_sgemm_vec4` | 255 | 74 496 B | 0 B | 256, 1 | 47.50 | "
                       "**0.950×** |")
    assert rows[3] == "| `slow` | `warp_sgemm_vec4` | 255 | 74 496 B | 0 B | 256, 1 | 25.00 | 0.500× |"


def test_the_tool_rewrites_a_pages_section_and_keeps_the_rest(project: pytest.Pytester, tmp_path: Path) -> None:
    results = _builds_run(project)
    page = tmp_path / "page.md"
    page.write_text(f"# Kernels\n\nwhy\n\n{custom_builds.START}\nold table\n{custom_builds.END}\n\nafter\n")
    done = _tool(str(results), "--page", str(page), "--source", "docs/x.json")
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.startswith("# Kernels\n\nwhy\n\n") and text.endswith("\n\nafter\n")
    assert "old table" not in text and "from `docs/x.json`" in text and "0.950×" in text


def test_the_tool_refuses_a_results_file_without_build_rows(project: pytest.Pytester, tmp_path: Path) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--missing-baseline", "pass", "--results-dir", "plain")
    result.assert_outcomes(passed=1, deselected=2)
    (results,) = (project.path / "plain").rglob("results.json")
    refused = _tool(str(results))
    assert refused.returncode == 2
    assert "holds no build rows" in refused.stderr and "-m builds" in refused.stderr
    page = tmp_path / "page.md"
    page.write_text("no markers here\n")
    build_results = _builds_run(project)
    unmarked = _tool(str(build_results), "--page", str(page))
    assert unmarked.returncode == 2 and "exactly one pair of markers" in unmarked.stderr
    assert page.read_text() == "no markers here\n"


def test_a_build_without_its_ratio_is_refused(project: pytest.Pytester, tmp_path: Path) -> None:
    results = _builds_run(project)
    data = json.loads(results.read_text())
    data["records"] = [r for r in data["records"] if not r["case_id"].endswith("#vs_cublas")]
    broken = tmp_path / "results.json"
    broken.write_text(json.dumps(data))
    refused = _tool(str(broken))
    assert refused.returncode == 2 and "without its #vs_cublas ratio" in refused.stderr


def test_the_pages_build_tables_are_the_committed_run_rendered() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page.count(custom_builds.START) == 1 and page.count(custom_builds.END) == 1, \
        f"{PAGE} lacks the generated section's markers"
    if not COMMITTED.is_file():
        pytest.skip(f"{COMMITTED.relative_to(ROOT)} is not committed yet: run the builds selection on the GPU, "
                    "commit its results.json there and render it with tools/evidence/custom_builds.py --page")
    run, records = load_run(COMMITTED)
    section = custom_builds.builds_section(run, records, str(COMMITTED.relative_to(ROOT)))
    assert custom_builds.replace_builds_section(page, section) == page, (
        f"{PAGE}'s build tables are not {COMMITTED.relative_to(ROOT)} rendered: run python3 tools/evidence/custom_builds.py "
        f"{COMMITTED.relative_to(ROOT)} --page {PAGE.relative_to(ROOT)}")
