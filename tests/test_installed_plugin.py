"""gpuperf as another repository sees it once installed: the plugin loads through its ``pytest11`` entry point, does
nothing in a session without perf tests, finds the project's own case tables and baselines, and runs
``examples/own-kernels``.

"Installed" is simulated without touching the interpreter: a ``gpuperf-<version>.dist-info`` whose
``entry_points.txt`` is made from ``pyproject.toml``'s own ``pytest11`` table, on the ``PYTHONPATH`` of a pytest
subprocess where a fresh interpreter is the point (what it imports, rewrites or queries), else on ``sys.path`` for
a session run in this process (pytest reads the entry points anew for each). (Where CI has really installed the package, both distributions declare the same entry point and pytest
registers it once.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from test_plugin import CONFTEST, GEMM_S, GEMV_S, TESTS

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "own-kernels"
VERSION = "9.9.9"

#: A conftest that only watches: every import of a CUDA package and every NVML start-up, printed at the end.
SPY = '''
import sys

QUERIES = []


class _Spy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("cupy", "cupy_backends", "cupti", "cuda", "nvmath"):
            QUERIES.append(name.split(".")[0])
        return None


sys.meta_path.insert(0, _Spy())
try:
    import pynvml

    _init = pynvml.nvmlInit

    def _spied_init(*args, **kwargs):
        QUERIES.append("nvmlInit")
        return _init(*args, **kwargs)

    pynvml.nvmlInit = _spied_init
except ImportError:
    pass


def pytest_unconfigure(config):
    print(f"GPU QUERIES: {sorted(set(QUERIES))}")
'''

PLAIN_TESTS = '''
import importlib.util
import os

import pytest


class OutOfMemoryError(Exception):
    pass


def test_plain():
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


@pytest.mark.slow
def test_marked_slow():
    pass


@pytest.mark.trigger
def test_marked_trigger():
    pass


def test_raises_its_own_oom():
    raise OutOfMemoryError("the project's own out-of-memory error")
'''


#: A package that the distribution's RECORD lists beside gpuperf's files, without PYTEST_DONT_REWRITE: pytest
#: rewrites its asserts, which shows that it marks what a pytest11 distribution installs.
PROBE = "gpuperf_rewrite_probe"


def _site(tmp: Path) -> Path:
    """A directory holding an installed-looking ``gpuperf`` distribution with the package's real entry points,
    its RECORD listing the package's files (as a wheel's does: pytest reads it to choose what to rewrite)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    entry_points = project["entry-points"]["pytest11"]
    assert entry_points, "pyproject.toml declares no pytest11 entry point"
    dist = tmp / "site" / f"gpuperf-{VERSION}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gpuperf\nVersion: {VERSION}\n")
    (dist / "entry_points.txt").write_text(
        "[pytest11]\n" + "".join(f"{name} = {target}\n" for name, target in entry_points.items()))
    (dist.parent / PROBE).mkdir()
    (dist.parent / PROBE / "__init__.py").write_text("def check():\n    assert True\n")
    files = [path.relative_to(ROOT).as_posix() for path in (ROOT / "gpuperf").rglob("*.py")]
    (dist / "RECORD").write_text("".join(f"{name},,\n" for name in [*files, f"{PROBE}/__init__.py"]))
    return dist.parent


@pytest.fixture
def installed(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
              ) -> pytest.Pytester:
    """A pytester project in which gpuperf is "installed" (no conftest loads the plugin), outside CI."""
    site = _site(tmp_path_factory.mktemp("installed"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))
    pytester.syspathinsert(site)  # for the sessions run in this process, where a fresh interpreter is not the point
    for name in ("CI", "GITHUB_STEP_SUMMARY", "CUDA_VISIBLE_DEVICES", "PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)  # PYTEST_ADDOPTS is the tests' own (tests/conftest.py)
    return pytester


def _files(root: Path) -> set[str]:
    """What lies in a pytester project, less pytester's own files (its runs' base temps and captured output)."""
    return {str(path.relative_to(root)) for path in root.rglob("*")
            if "__pycache__" not in path.parts and not path.relative_to(root).parts[0].startswith(
                ("runpytest-", "stdout", "stderr"))}


def test_the_entry_point_gives_a_repository_the_fixtures_without_a_conftest(installed: pytest.Pytester) -> None:
    installed.makepyfile(test_uses_rng="def test_rng(rng):\n    assert 0 <= rng.random() < 1\n")
    result = installed.runpytest("-p", "no:cacheprovider", "--fixtures")
    result.stdout.fnmatch_lines(["*perf*", "*measure*"])
    ran = installed.runpytest("-p", "no:cacheprovider")
    ran.assert_outcomes(passed=1)
    blocked = installed.runpytest("-p", "no:cacheprovider", "-p", "no:gpuperf.wiring.plugin")
    blocked.stdout.fnmatch_lines(["*fixture 'rng' not found*"])


#: A conftest that imports every module of gpuperf and the probe at the end of collection, and prints those
#: whose asserts pytest rewrote (a rewritten module holds the ``@py_builtins`` alias the rewriter adds).
REWRITE_SPY = f'''
import pkgutil
import sys

import gpuperf


def pytest_collection_finish(session):
    import {PROBE}
    for module in pkgutil.walk_packages(gpuperf.__path__, "gpuperf."):
        if module.name != "gpuperf.__main__":
            __import__(module.name)
    names = sorted(name for name, module in list(sys.modules.items())
                   if name.split(".")[0] in ("gpuperf", "{PROBE}") and "@py_builtins" in vars(module or sys))
    print("REWRITTEN:", names, len([name for name in sys.modules if name.startswith("gpuperf.")]))
'''


@pytest.mark.long
def test_an_installed_gpuperf_s_modules_are_not_assertion_rewritten(installed: pytest.Pytester) -> None:
    """pytest rewrites the asserts of every package a pytest11 distribution installs; the harness's modules say
    PYTEST_DONT_REWRITE (tests/test_house.py holds every module to it), so only the probe is rewritten."""
    installed.makeconftest(REWRITE_SPY)
    installed.makepyfile(test_uses_rng="def test_rng(rng):\n    assert 0 <= rng.random() < 1\n")
    result = installed.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    line = next(line for line in result.outlines if line.startswith("REWRITTEN:"))
    assert line.startswith(f"REWRITTEN: ['{PROBE}'] ") and int(line.split()[-1]) > 50, line


def test_a_checkout_that_also_names_the_plugin_registers_it_once(installed: pytest.Pytester) -> None:
    installed.makeconftest('pytest_plugins = ["gpuperf.wiring.plugin"]\n')
    installed.makepyfile(test_uses_rng="def test_rng(rng):\n    assert 0 <= rng.random() < 1\n")
    result = installed.runpytest("-p", "no:cacheprovider", "-p", "gpuperf.wiring.plugin")
    result.assert_outcomes(passed=1)
    assert "already registered" not in result.stdout.str() + result.stderr.str()


@pytest.mark.long
@pytest.mark.parametrize("xdist", [False, True])
def test_a_session_with_no_perf_test_is_left_alone_even_under_ci(installed: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  xdist: bool) -> None:
    """Same outcomes as without the plugin (the run without it is made once, without xdist: the outcomes are the
    same under it); no gpuperf line, no file, no GPU or NVML query, no pinning."""
    monkeypatch.setenv("CI", "true")
    installed.makeini("[pytest]\ntestpaths = tests\n")
    installed.makeconftest(SPY)
    (installed.path / "tests").mkdir()
    (installed.path / "tests" / "test_plain.py").write_text(PLAIN_TESTS)
    (installed.path / "tests" / "test_skipped.py").write_text('import pytest\npytest.importorskip("no_such_module")\n')
    args = ["-p", "no:cacheprovider", "-rs", *(["-n", "2"] if xdist else [])]
    outcomes = {"passed": 3, "failed": 1, "skipped": 1}
    if not xdist:
        without = installed.runpytest_subprocess(*args, "-p", "no:gpuperf.wiring.plugin")
        without.assert_outcomes(**outcomes)
        assert without.ret == pytest.ExitCode.TESTS_FAILED
    before = _files(installed.path)
    result = installed.runpytest_subprocess(*args)
    result.assert_outcomes(**outcomes)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert [line for line in result.outlines if "gpuperf" in line and not line.startswith("plugins:")] == []
    assert "the project's own out-of-memory error" in result.stdout.str()  # its error, not the suite's advice
    result.stdout.fnmatch_lines(["GPU QUERIES: []"])
    assert _files(installed.path) == before


@pytest.mark.long
def test_the_spy_sees_a_gpu_query(installed: pytest.Pytester) -> None:
    """The check above can fail: a test that asks for a GPU makes the plugin look for one."""
    installed.makeconftest(SPY)
    installed.makepyfile(test_gpu="def test_gpu(gpu):\n    pass\n")
    result = installed.runpytest_subprocess("-p", "no:cacheprovider", "--results-dir", "none")
    assert "GPU QUERIES: []" not in result.stdout.str()
    result.stdout.fnmatch_lines(["GPU QUERIES: [[]*'*'*[]]"])


def test_version_comes_from_the_package_metadata(installed: pytest.Pytester) -> None:
    shown = subprocess.run([sys.executable, "-m", "gpuperf", "--version"], capture_output=True, text=True,
                           check=True, cwd=installed.path)
    assert shown.stdout.strip() == f"gpuperf {VERSION}"


def test_version_falls_back_to_the_checkout_s(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    import gpuperf
    from gpuperf.cli import package_version

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert package_version() == gpuperf.__version__


def test_usage_names_the_console_script_when_called_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuperf.cli import build_parser

    monkeypatch.setattr(sys, "argv", ["/venv/bin/gpuperf", "--help"])
    assert build_parser().format_usage().startswith("usage: gpuperf ")
    monkeypatch.setattr(sys, "argv", [str(ROOT / "gpuperf" / "__main__.py"), "--help"])
    assert build_parser().format_usage().startswith("usage: python -m gpuperf ")


# --- the project's own layout: ini keys -------------------------------------------------------------------

def test_baselines_go_where_the_ini_key_says(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    pytester.makeini("[pytest]\ngpuperf_baselines = store/baselines\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_perf=TESTS)
    (pytester.path / "timings.json").write_text(f'{{"gemv": {GEMV_S}, "gemm": {GEMM_S}, "slow": {GEMM_S}}}')
    pytester.runpytest("-p", "no:cacheprovider", "--results-dir", "none", "--update-baselines").assert_outcomes(
        passed=2, deselected=1)
    assert (pytester.path / "store" / "baselines" / "fake-gpu.yaml").is_file()
    assert not (pytester.path / "baselines").exists()
    again = pytester.runpytest("-p", "no:cacheprovider", "--results-dir", "none", "--gate")
    again.assert_outcomes(passed=2, deselected=1)


def test_case_tables_come_from_the_ini_key_under_the_rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngpuperf_cases = tables\n")
    pytester.makeconftest('pytest_plugins = ["gpuperf.wiring.plugin"]\n')
    (pytester.path / "tables").mkdir()
    (pytester.path / "tables" / "gemv.yaml").write_text("perf:\n  - dtypes: [fp32]\n    ops: [N]\n"
                                                        "    shapes: [123x456]\n")
    (pytester.path / "sub").mkdir()
    (pytester.path / "sub" / "test_table.py").write_text(
        "import pytest\nfrom gpuperf.suite.cases import load_cases\n"
        "SHAPES = load_cases('gemv')['perf'][0]['shapes']\n"
        "@pytest.mark.parametrize('shape', SHAPES, ids=str)\ndef test_shape(shape):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "sub")
    result.stdout.fnmatch_lines(["sub/test_table.py::test_shape[[]123x456[]]"])
    missing = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "-o", "gpuperf_cases=nowhere", "sub")
    missing.stdout.fnmatch_lines(["*nowhere/gemv.yaml: case table not found*"])



@pytest.mark.long
@pytest.mark.parametrize(("table", "message"), [
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: \"x'; touch pwned; echo '\"}]\n",
     "tables/attention.yaml: perf[0].mode: \"x'; touch pwned; echo '\" is not a value a test id can carry"),
    ("sizes: [batch]\nparams: [mode]\nperf: [{batch: 2, mode: 1}, {batch: 2, mode: '1'}]\n",
     "tables/attention.yaml: perf[1]: test id batch2-mode1 (its values differ from the other's only in type)"),
    (None, "tables/attention.yaml: is a symbolic link that leads back to itself (a loop of links)"),
])
def test_a_hostile_table_of_the_user_s_own_family_is_a_collection_error(pytester: pytest.Pytester, table: str | None,
                                                                        message: str) -> None:
    """Shell or -k text in a param (it would reach the suggested re-record command), two values of one test id,
    a table that is a loop of links: each fails collection with its one line, and no test runs."""
    pytester.makeini("[pytest]\ngpuperf_cases = tables\n")
    pytester.makeconftest('pytest_plugins = ["gpuperf.wiring.plugin"]\n')
    (pytester.path / "tables").mkdir()
    if table is None:
        (pytester.path / "tables" / "attention.yaml").symlink_to("attention.yaml")
    else:
        (pytester.path / "tables" / "attention.yaml").write_text(table)
    pytester.makepyfile(test_own="import pytest\nfrom gpuperf.suite.cases import load_cases\n"
                                 "CASES = load_cases('attention')['perf']\n"
                                 "@pytest.mark.parametrize('case', CASES, ids=str)\ndef test_case(case):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's own code for a collection error
    assert message in result.stdout.str() and "RuntimeError" not in result.stdout.str(), result.stdout.str()
    assert not (pytester.path / "pwned").exists()


# --- examples/own-kernels -----------------------------------------------------------------------------------

@pytest.fixture
def example(installed: pytest.Pytester) -> pytest.Pytester:
    """A copy of examples/own-kernels, as its own repository with gpuperf installed."""
    shutil.copytree(EXAMPLE, installed.path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__",
                                                                                                 "results"))
    return installed


def test_the_example_collects_its_own_table_with_the_installed_plugin(example: pytest.Pytester) -> None:
    result = example.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "perf_tests/test_own_sgemm.py::test_own_sgemm_matches_float64[[]33x17x65[]]",
        "perf_tests/test_own_sgemm.py::test_own_sgemm_matches_float64[[]127x129x31[]]",
        "perf_tests/test_own_sgemm.py::test_own_sgemm_matches_float64[[]1x1x1[]]",
        "perf_tests/test_own_sgemm.py::test_own_sgemm_perf[[]2048x2048x2048-cold[]]",
        "perf_tests/test_own_sgemm.py::test_own_sgemm_perf[[]4096x1024x2048-cold[]]",
        "5 tests collected*",
    ])
    table = example.path / "cases" / "gemm.yaml"
    table.write_text(table.read_text().replace("4096x1024x2048", "512x256x128"))
    changed = example.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    changed.stdout.fnmatch_lines(["*test_own_sgemm_perf[[]512x256x128-cold[]]", "5 tests collected*"])


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine measures instead of skipping")
def test_the_example_skips_its_gpu_tests_with_a_reason_on_the_cpu(example: pytest.Pytester) -> None:
    result = example.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(skipped=5)
    assert result.ret == pytest.ExitCode.OK
    # the gpu extra installed (a developer's laptop): CuPy imports and finds no driver; without it, no CuPy
    why = "no NVIDIA driver is installed" if importlib.util.find_spec("cupy") else "CuPy is not importable"
    # one line per reason (gpuperf folds pytest's lines of one reason at several places into one)
    result.stdout.fnmatch_lines([f"SKIPPED [[]5[]] perf_tests/test_own_sgemm.py: no GPU: {why}*"])
    assert not (example.path / "results").exists()  # nothing was measured, so no results directory


# --- examples/framework-kernels ------------------------------------------------------------------------------

FRAMEWORK_EXAMPLE = ROOT / "examples" / "framework-kernels"


@pytest.fixture
def framework_example(installed: pytest.Pytester) -> pytest.Pytester:
    """A copy of examples/framework-kernels, as its own repository with gpuperf installed."""
    shutil.copytree(FRAMEWORK_EXAMPLE, installed.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "results"))
    return installed


#: The example's tests, per module, as they collect anywhere (with or without PyTorch).
FRAMEWORK_TESTS = {"test_compiled.py": 3, "test_cuda_graph.py": 3, "test_sdpa.py": 4, "test_torch_gemm.py": 5,
                   "test_triton.py": 9}


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed: its tests run")
def test_the_framework_example_collects_and_skips_each_test_naming_the_missing_package(
        framework_example: pytest.Pytester) -> None:
    collected = framework_example.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    collected.stdout.fnmatch_lines(["perf_tests/test_sdpa.py::test_attention_perf[[]batch8-heads32-seq4096-dim128-"
                                    "causal-cold[]]",
                                    "perf_tests/test_torch_gemm.py::test_bf16_mm_perf[[]m8192-n8192-k8192-cold[]]",
                                    "24 tests collected*"])
    result = framework_example.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(skipped=sum(FRAMEWORK_TESTS.values()))
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"SKIPPED [[]{sum(FRAMEWORK_TESTS.values())}[]] *perf_tests: PyTorch is not "
                                 "installed: pip install torch"])  # one line for the reason, whichever file
    misuse = framework_example.runpytest("-p", "no:cacheprovider", "misuse")
    misuse.assert_outcomes(skipped=2)
    assert not (framework_example.path / "results").exists()


def test_the_framework_example_s_tables_name_their_sizes() -> None:
    from gpuperf.suite.cases import load_cases

    cases = FRAMEWORK_EXAMPLE / "cases"
    ids = {family: [str(case) for case in load_cases(family, cases)["perf"]]
           for family in ("torch_gemm", "vector_add", "softmax", "fused_gelu", "mlp_block", "attention")}
    assert ids == {
        "torch_gemm": ["m4096-n4096-k4096", "m8192-n8192-k8192"],
        "vector_add": ["n16777216", "n268435456"],
        "softmax": ["rows16384-cols4096"],
        "fused_gelu": ["n67108864"],
        "mlp_block": ["tokens4096-hidden4096"],
        "attention": ["batch8-heads32-seq4096-dim128-no_causal", "batch8-heads32-seq4096-dim128-causal"],
    }


def test_the_framework_evidence_is_what_the_committed_runs_say() -> None:
    """evidence/framework-kernels.md's table is the tool's comparison of the committed files, within ±2 %; the gate ran
    on another GPU than the one that recorded the committed baseline, against that baseline."""
    import json

    evidence = ROOT / "evidence" / "framework-kernels"
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_host" / "profiler_check.py"), "compare",
                          str(evidence / "gate-results.json"), str(evidence / "profile.json")],
                         capture_output=True, text=True, check=False, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout == (evidence / "profiler-check.md").read_text()
    page = (ROOT / "evidence" / "framework-kernels.md").read_text()
    for line in out.stdout.splitlines():
        if line.startswith("| `perf_tests/"):
            assert "| `" + line.split("::", 1)[1] in page  # each row, as the page shows it
    gate, record = (json.loads((evidence / name).read_text()) for name in ("gate-results.json", "record-results.json"))
    baseline = (FRAMEWORK_EXAMPLE / "baselines" / "nvidia-h200.yaml").read_text()
    assert record["run"]["started"][:19] <= baseline.split("recorded: '")[1][:19]
    assert gate["run"]["extra"]["uuid"] != record["run"]["extra"]["uuid"]
    assert {r["status"] for r in gate["records"]} == {"PASS"} and len(gate["records"]) == 9
    # the committed baseline (the GELU compiled per size) gated green on two fresh GPUs that did not record it
    recorded = {r["case_id"]: r for r in record["records"]}
    for name in ("gate-f6326300.json", "gate-5d806ebc.json"):
        fresh = json.loads((evidence / name).read_text())
        assert fresh["run"]["extra"]["uuid"] != record["run"]["extra"]["uuid"]
        assert {r["status"] for r in fresh["records"]} == {"PASS"} and len(fresh["records"]) == 9
        for row in fresh["records"]:
            assert [k.get("code") for k in row["kernels"]] == [k.get("code") for k in recorded[row["case_id"]]["kernels"]]
    check = subprocess.run([sys.executable, "-m", "gpuperf", "baseline", "check",
                            str(FRAMEWORK_EXAMPLE / "baselines" / "nvidia-h200.yaml")],
                           capture_output=True, text=True, check=False, cwd=ROOT)
    assert check.returncode == 0 and "ok (9 entries" in check.stdout


# --- what the plugin loads --------------------------------------------------------------------------------------

#: A conftest that prints, at the end of the session, which of the modules a suite's session needs were loaded.
LOADED_SPY = '''
import sys

HEAVY = ("yaml", "pytest_benchmark", "gpuperf.verdict.gate", "gpuperf.store", "gpuperf.suite.cases",
         "gpuperf.wiring.lifecycle", "gpuperf.wiring.session", "gpuperf.wiring.fixtures", "gpuperf.measure.device")


def pytest_unconfigure(config):
    loaded = sorted(name for name in sys.modules if name in HEAVY or name.startswith(tuple(f"{h}." for h in HEAVY)))
    print("PLUGIN:", "gpuperf.wiring.plugin" in sys.modules, "LOADED:", loaded)
'''


@pytest.mark.long
def test_a_session_without_perf_tests_loads_only_the_plugin_s_options(installed: pytest.Pytester) -> None:
    """An empty session, and one of plain tests, load the plugin and its options but neither the baseline store,
    the gate, PyYAML, the session's machinery nor pytest-benchmark, whose fixture then fails naming the fix; a
    test that asks for a GPU loads them (the spy sees them), and -p benchmark loads pytest-benchmark, as any
    --benchmark option does (tests/test_plugin.py: --benchmark-json)."""
    installed.makeconftest(LOADED_SPY)
    empty = installed.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    empty.stdout.fnmatch_lines(["PLUGIN: True LOADED: []"])
    installed.makepyfile(test_plain="def test_plain():\n    assert True\n",
                         test_bench="def test_b(benchmark):\n    assert benchmark(lambda: 1) == 1\n")
    plain = installed.runpytest_subprocess("-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1, errors=1)
    plain.stdout.fnmatch_lines(["*pytest-benchmark is not loaded in this session*add -p benchmark*",
                                "PLUGIN: True LOADED: []"])
    installed.makepyfile(test_gpu="def test_gpu(gpu):\n    pass\n")
    suite = installed.runpytest_subprocess("-p", "no:cacheprovider", "--results-dir", "none", "--history", "none",
                                           "-p", "benchmark")
    suite.assert_outcomes(passed=2, skipped=1)
    line = next(line for line in suite.outlines if line.startswith("PLUGIN:"))
    for name in ("'yaml'", "'pytest_benchmark'", "'gpuperf.verdict.gate'", "'gpuperf.store.baseline'",
                 "'gpuperf.wiring.lifecycle'"):
        assert name in line, line
