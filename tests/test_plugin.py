"""The plugin end to end through pytester, with a synthetic GPU and measurement source (these tests only).

The synthetic ``measure`` takes the seconds per call from ``timings.json`` in the test project, so a test
can make a case slower or faster between runs without touching any recorded figure.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

pytest_plugins = ["pytester"]

#: A synthetic GPU for a test project's conftest: what the start-up device query and the ``gpu`` fixture see
#: (the driver version from ``driver.txt`` when the project has one). Measurement is each conftest's own.
FAKE_DEVICE = '''
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuperf.measure.peaks import device_peaks
from gpuperf.wiring.plugin import POOL

FIELDS = dict(
    index=0, name="Fake GPU", slug="fake-gpu", cc=(9, 0), compute_capability="9.0", sm_count=132,
    sm_clock_max_mhz=1980, mem_clock_mhz=3201, bus_width_bits=6016, l2_bytes=60 * 2**20, pci_bus_id="0:1:0.0",
    driver=Path("driver.txt").read_text().strip() if Path("driver.txt").exists() else "580.159.04",
    cuda_runtime="13.0", cublas="13.1.0", cupy="14.2.0", missing=(),
)
INFO = SimpleNamespace(**FIELDS, to_dict=lambda: dict(FIELDS))
GPU = SimpleNamespace(index=0, info=INFO, peaks=device_peaks(INFO), device=None, nvml=None)


class FakePool:
    """The one fake GPU: what the start-up device query and the ``gpu`` fixture see."""

    def devices(self):
        return [(0, INFO.name)]

    def describe(self, index, isolated=False):
        if index != 0:
            raise RuntimeError(f"no GPU {index}")
        return {**INFO.to_dict(), "peaks": GPU.peaks.to_dict(), "kernel_timer": "CUPTI kernel records (synthetic)"}


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.stash[POOL] = FakePool()


@pytest.fixture
def gpu():
    return GPU
'''

CONFTEST = '''
import json
from pathlib import Path

import pytest

from gpuperf.wiring.fixtures import Measurer
from gpuperf.measure.kernel_records import Kernel
from gpuperf.measure.measurement import Measurement, UnmeasurableCall

pytest_plugins = ["gpuperf.wiring.plugin"]
''' + FAKE_DEVICE + '''

class SyntheticTimer:
    """Seconds per call come from timings.json: a name, or a list consumed one measurement at a time."""

    def measure(self, fn, work, operands=(), flush="cold", label="", prefer_method="", band=None, repeat=False):
        timings = json.loads(Path("timings.json").read_text())
        name = fn()
        value = timings[name]
        if isinstance(value, dict):  # {"unmeasurable": why}: the call's kernels could not be measured
            raise UnmeasurableCall(value["unmeasurable"], work, label, flush)
        if isinstance(value, list):
            seconds = value.pop(0)
            Path("timings.json").write_text(json.dumps(timings))
        else:
            seconds = value
        why = json.loads(Path("contention.json").read_text()).get(name, "") if Path("contention.json").exists() \
            else ""
        kernels = _by_name("kernels.json", name, [])
        samples = tuple(seconds * f for f in (0.999, 1.0, 1.001) * 4)
        mhz = _by_name("clocks.json", name, None)  # the SM clock the calls ran at: stamped cycles, as traced
        return Measurement(samples_s=samples, work=work,
                           flush=flush, method=_by_name("methods.json", name, "synthetic"), unreliable_reason=why,
                           kernels=tuple(Kernel.from_dict(kernel) for kernel in kernels),
                           event_median_s=seconds + 1e-6 if kernels else None,
                           cycles_samples=tuple(s * mhz * 1e6 for s in samples) if mhz else (),
                           clock_samples_mhz=(mhz,) * len(samples) if mhz else (),
                           max_clock_mhz=1980 if mhz else None)


def _by_name(file, name, default):
    """What ``file`` (JSON, in the test project) says about the case named ``name``, if it exists."""
    return json.loads(Path(file).read_text()).get(name, default) if Path(file).exists() else default


@pytest.fixture
def measure(flush_mode):
    return Measurer(SyntheticTimer(), flush_mode)
'''

TESTS = '''
import pytest

from gpuperf.suite.cases import GemmShape, GemvShape
from gpuperf.measure.metrics import gemm_work, gemv_work


@pytest.mark.gemv
@pytest.mark.perf
@pytest.mark.parametrize("shape", [GemvShape(16384, 16384)], ids=str)
def test_gemv(shape, measure, perf):
    perf.check(measure(lambda: "gemv", gemv_work(shape.m, shape.n, "fp32")))


@pytest.mark.gemm
@pytest.mark.perf
@pytest.mark.parametrize("shape", [GemmShape(4096, 4096, 4096)], ids=str)
@pytest.mark.parametrize("dtype", ["fp32"])
def test_gemm(shape, dtype, measure, perf):
    perf.check(measure(lambda: "gemm", gemm_work(shape.m, shape.n, shape.k, dtype)))


@pytest.mark.gemm
@pytest.mark.perf
@pytest.mark.slow
def test_slow_case(measure, perf):
    perf.check(measure(lambda: "slow", gemm_work(8192, 8192, 8192, "fp32")))
'''

GEMV_S = 16384 * 16384 * 4 / 4.0e12  # 4.0 TB/s: 83 % of the fake H200's 4.8 TB/s
GEMM_S = 2 * 4096**3 / 50e12  # 50 TFLOPS: 75 % of FP32 peak
GEMV_ID = "test_perf.py::test_gemv[16384x16384-cold]"
GEMM_ID = "test_perf.py::test_gemm[fp32-4096x4096x4096-cold]"


def fake_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tests: dict[str, str],
                 unset: tuple[str, ...] = (), **timings: object) -> pytest.Pytester:
    """A project of ``tests`` (module name → source) run by the plugin with the synthetic GPU of ``CONFTEST``
    and these ``timings``; CI's environment (and the ``unset`` variables) left out of its runs."""
    for name in ("CI", "GITHUB_STEP_SUMMARY", *unset):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**tests)
    if timings:
        set_timings(pytester, **timings)
    return pytester


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return fake_project(pytester, monkeypatch, {"test_perf": TESTS}, gemv=GEMV_S, gemm=GEMM_S, slow=8 * GEMM_S)


def set_timings(pytester: pytest.Pytester, **timings: object) -> None:
    (pytester.path / "timings.json").write_text(json.dumps(timings))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--results-dir", "none", *args)


def baseline(pytester: pytest.Pytester) -> dict:
    return yaml.safe_load((pytester.path / "baselines" / "fake-gpu.yaml").read_text())


def recorded(project: pytest.Pytester) -> dict:
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=2, deselected=1)
    return baseline(project)


def test_update_records_every_selected_case_then_the_same_speed_passes(project: pytest.Pytester) -> None:
    data = recorded(project)
    assert set(data["entries"]) == {GEMV_ID, GEMM_ID}
    assert data["header"]["slug"] == "fake-gpu" and data["header"]["driver"] == "580.159.04"
    assert data["entries"][GEMV_ID]["unit"] == "GB/s"
    assert data["entries"][GEMV_ID]["value"] == pytest.approx(4000, rel=1e-3)
    result = run(project)
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*case*metric*measured*baseline*Δ %*% peak*status*note*", "*PASS*"])


@pytest.mark.long
def test_every_traced_entry_records_its_cycles_memory_bound_ones_too(project: pytest.Pytester) -> None:
    """The FP8 projections recorded from runs had no figure at max clock: a memory-bound case's record dropped it.
    Both ways of recording keep it now (--update-baselines, and baseline from-runs over the runs' results), while
    only the clock-bound case is ever read on it."""
    (project.path / "clocks.json").write_text(json.dumps({"gemv": 1900.0, "gemm": 1700.0}))
    sgemm = {"name": "sm90_xmma_gemm_f32f32", "grid": [132, 1, 1], "block": [256, 1, 1], "registers": 128,
             "shared_memory": 0, "median_us": 2700.0}
    (project.path / "kernels.json").write_text(json.dumps({"gemm": [sgemm], "gemv": [GEMV_KERNEL]}))
    data = recorded(project)
    for case, mhz, seconds in ((GEMV_ID, 1900.0, GEMV_S), (GEMM_ID, 1700.0, GEMM_S)):
        free = data["entries"][case]["at_max_clock"]
        assert free["cycles"] == pytest.approx(seconds * mhz * 1e6, rel=1e-5) and free["clock_mhz"] == mhz
    runs = []
    for number in (1, 2):
        folder = project.path / f"run{number}"
        project.runpytest("-p", "no:cacheprovider", "--results-dir", str(folder)).assert_outcomes(passed=2,
                                                                                                  deselected=1)
        runs.extend(str(path) for path in folder.glob("*/results.json"))
    target = project.path / "baselines" / "fake-gpu.yaml"
    out = subprocess.run([sys.executable, "-m", "gpuperf", "baseline", "from-runs", str(target), *runs],
                         capture_output=True, text=True, check=False, cwd=project.path)
    assert out.returncode == 0, out.stdout + out.stderr
    entries = baseline(project)["entries"]
    assert entries[GEMV_ID]["runs"] == 2
    assert entries[GEMV_ID]["at_max_clock"]["cycles"] == pytest.approx(GEMV_S * 1900e6, rel=1e-5)
    (project.path / "clocks.json").write_text(json.dumps({"gemv": 1500.0, "gemm": 1500.0}))
    set_timings(project, gemv=GEMV_S, gemm=GEMM_S * 1700 / 1500)  # the GEMM only slowed by the clock
    result = run(project, "-rA")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*judged on cycles*"])
    assert "test_gemv" not in "".join(line for line in result.outlines if "judged on cycles" in line)


def test_a_regression_fails_its_test_after_a_confirming_remeasurement(project: pytest.Pytester) -> None:
    recorded(project)
    set_timings(project, gemv=GEMV_S * 1.10, gemm=GEMM_S)
    result = run(project)
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*REGRESSED*test_gemv*vs baseline*-9.1 %*", "*re-measured*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_transient_slowdown_passes_on_remeasurement(project: pytest.Pytester) -> None:
    recorded(project)
    set_timings(project, gemv=[GEMV_S * 1.2, GEMV_S], gemm=GEMM_S)
    result = run(project)
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*PASS*re-measured*"])


def test_within_tolerance_passes(project: pytest.Pytester) -> None:
    recorded(project)
    set_timings(project, gemv=GEMV_S * 1.02, gemm=GEMM_S * 0.98)
    run(project).assert_outcomes(passed=2, deselected=1)


def test_an_improvement_is_noted_and_fails_only_when_strict(project: pytest.Pytester) -> None:
    recorded(project)
    set_timings(project, gemv=GEMV_S, gemm=GEMM_S / 1.10)
    result = run(project)
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*IMPROVED*update the baseline*--update-baselines*"])
    run(project, "--strict-baselines").assert_outcomes(passed=1, failed=1, deselected=1)


def test_above_peak_is_an_anomaly_that_fails(project: pytest.Pytester) -> None:
    recorded(project)
    set_timings(project, gemv=GEMV_S / 2, gemm=GEMM_S)  # 8 TB/s on a 4.8 TB/s card
    result = run(project)
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*ANOMALY*test_gemv*above-memory-peak*cache-resident*"])


def test_update_does_not_record_an_anomaly(project: pytest.Pytester) -> None:
    set_timings(project, gemv=GEMV_S / 2, gemm=GEMM_S)
    run(project, "--update-baselines").assert_outcomes(passed=1, failed=1, deselected=1)
    assert set(baseline(project)["entries"]) == {GEMM_ID}


@pytest.mark.parametrize(("args", "env", "outcome"), [
    ((), {}, "skipped"),
    (("--missing-baseline=fail",), {}, "failed"),
    ((), {"CI": "true"}, "failed"),
    (("--missing-baseline=pass",), {}, "passed"),
])
def test_missing_baseline_follows_the_policy(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                             args: tuple[str, ...], env: dict[str, str], outcome: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = run(project, *args)
    result.assert_outcomes(**{outcome: 2}, deselected=1)
    result.stdout.fnmatch_lines(["*no baseline for this case on fake-gpu*--update-baselines*"])


def test_update_touches_only_the_selected_cases(project: pytest.Pytester) -> None:
    before = recorded(project)
    set_timings(project, gemv=GEMV_S * 1.25, gemm=GEMM_S * 1.25)
    result = run(project, "-k", "gemv", "--update-baselines")
    result.stdout.fnmatch_lines(["*updated*fake-gpu.yaml (old → new)*", "*test_gemv*GB/s*-20.0*"])
    after = baseline(project)
    assert after["entries"][GEMM_ID] == before["entries"][GEMM_ID]
    assert after["entries"][GEMV_ID]["value"] == pytest.approx(before["entries"][GEMV_ID]["value"] / 1.25, rel=1e-4)


def test_malformed_yaml_stops_the_run_naming_the_file(project: pytest.Pytester) -> None:
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "fake-gpu.yaml").write_text("schema: 1\nentries: [unclosed\n")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*fake-gpu.yaml: not valid YAML*git checkout*"])


def test_schema_error_names_the_file_and_the_entry(project: pytest.Pytester) -> None:
    data = recorded(project)
    data["entries"][GEMV_ID]["tolerance"] = -0.1
    (project.path / "baselines" / "fake-gpu.yaml").write_text(yaml.safe_dump(data))
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*fake-gpu.yaml: entry 'test_perf.py::test_gemv?16384x16384-cold?': "
                                 "tolerance must be a fraction*"])


def test_a_baseline_of_another_gpu_is_refused(project: pytest.Pytester) -> None:
    data = recorded(project)
    data["header"]["slug"] = "nvidia-a100-sxm4-80gb"
    (project.path / "baselines" / "fake-gpu.yaml").write_text(yaml.safe_dump(data))
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*recorded on*but this GPU is fake-gpu*"])


def test_flush_modes_parametrize_every_perf_test_and_k_selects(project: pytest.Pytester) -> None:
    result = run(project, "--flush-modes", "cold,hot", "--missing-baseline=pass", "-k", "gemv and hot", "-v")
    result.assert_outcomes(passed=1, deselected=5)
    result.stdout.fnmatch_lines(["*test_gemv?16384x16384-hot? PASSED*"])


def test_slow_cases_run_only_when_asked(project: pytest.Pytester) -> None:
    run(project, "--run-slow", "--missing-baseline=pass").assert_outcomes(passed=3)


def test_results_files_are_written(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--missing-baseline=pass", "--results-dir", "out")
    result.assert_outcomes(passed=2, deselected=1)
    runs = list((project.path / "out").iterdir())
    assert len(runs) == 1
    data = json.loads((runs[0] / "results.json").read_text())
    assert {r["case_id"] for r in data["records"]} == {GEMV_ID, GEMM_ID}
    assert data["run"]["gpu_slug"] == "fake-gpu"


@pytest.mark.parametrize(("option", "message"), [
    (("--tolerance", "5"), "not a fraction"),
    (("--gpu", "first"), "use an index"),
    (("--flush-modes", "warm"), "use cold, hot"),
    (("--min-samples", "0"), "at least 1"),
])
def test_bad_options_fail_at_start_up(project: pytest.Pytester, option: tuple[str, ...], message: str) -> None:
    result = run(project, *option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_without_cupy_gpu_tests_skip_with_a_reason(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('import sys\nsys.modules["cupy"] = None\npytest_plugins = ["gpuperf.wiring.plugin"]\n')
    pytester.makepyfile(test_gpu="def test_needs_gpu(gpu, stream):\n    raise AssertionError('ran')\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no GPU*CuPy is not importable*pip install*"])


@pytest.mark.long
def test_benchmark_json_carries_the_same_numbers(project: pytest.Pytester) -> None:
    result = run(project, "--missing-baseline=pass", "--benchmark-json", "bench.json")
    result.assert_outcomes(passed=2, deselected=1)
    data = json.loads((project.path / "bench.json").read_text())
    by_case = {b["extra_info"]["case_id"]: b for b in data["benchmarks"]}
    assert set(by_case) == {GEMV_ID, GEMM_ID}
    gemv = by_case[GEMV_ID]
    assert gemv["extra_info"]["unit"] == "GB/s"
    assert gemv["extra_info"]["value"] == pytest.approx(4000, rel=1e-3)
    assert gemv["stats"]["median"] == pytest.approx(GEMV_S, rel=1e-6)


@pytest.mark.long
def test_xdist_workers_merge_records_and_baseline_updates(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is not installed: pip install -e '.[test]'")
    result = run(project, "-n", "2", "--update-baselines")
    result.assert_outcomes(passed=2)
    assert set(baseline(project)["entries"]) == {GEMV_ID, GEMM_ID}
    result = run(project, "-n", "2", "--gate")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*gpuperf: 2 cases: 2 pass*", "*GPU 0 (fake-gpu): 2 of 2 baselined cases measured*"])
    project.makepyfile(test_perf=TESTS.replace("def test_gemm(", "def test_matmul("))
    stale = run(project, "-n", "1", "--gate", "--missing-baseline=pass")  # a worker's collection reaches it
    assert stale.ret == pytest.ExitCode.TESTS_FAILED
    stale.stdout.fnmatch_lines(["*GATE FAILED: 1 stale baseline entry*"])


NO_GPU_CONFTEST = """
import pytest

from gpuperf.wiring.plugin import POOL


class NoGpuPool:
    def devices(self):
        return []

    def describe(self, index, isolated=False):
        raise RuntimeError("no CUDA device is usable")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.stash[POOL] = NoGpuPool()
"""


@pytest.mark.long
@pytest.mark.parametrize("workers", [[], ["-n", "1"]])
def test_a_suite_s_own_unit_tests_under_ci_on_a_machine_without_a_gpu_pass(pytester: pytest.Pytester,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             workers: list[str]) -> None:
    """$CI turns gate mode on, but a session of a suite's repository that selects no perf test has nothing to
    gate: the GPU it could not query is no missing evidence, with or without xdist (whose controller queries
    the GPUs before it knows what the workers collected)."""
    if workers:
        pytest.importorskip("xdist", reason="pytest-xdist is not installed: pip install -e '.[test]'")
    monkeypatch.setenv("CI", "true")
    pytester.mkdir("baselines")
    pytester.makeconftest(NO_GPU_CONFTEST)
    pytester.makepyfile(test_plain="def test_sum():\n    assert sum([0.5, 2.25]) == 2.75\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "GATE FAILED" not in result.stdout.str()


@pytest.mark.long  # an xdist session of its own; the pinning rule is tests/test_pinning.py's, in the fast tier
def test_xdist_workers_are_pinned_round_robin_by_cuda_visible_devices(pytester: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is not installed: pip install -e '.[test]'")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pytester.makeconftest('pytest_plugins = ["gpuperf.wiring.plugin"]\n'
                          'import gpuperf.measure.device\n'
                          'gpuperf.measure.device.device_count = lambda: 1\n')
    pytester.makepyfile(test_pin="import os, pathlib, pytest\n"
                                 "@pytest.mark.parametrize('n', range(12))\n"
                                 "def test_pin(n, gpu_index, request):\n"
                                 "    worker = request.config.workerinput['workerid']\n"
                                 "    seen = f\"{os.environ['CUDA_VISIBLE_DEVICES']} {gpu_index}\"\n"
                                 "    pathlib.Path(f'{worker}-{n}.pin').write_text(seen)\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2", "--gpu", "1,3")
    result.assert_outcomes(passed=12)
    pins = {path.name.split("-")[0]: path.read_text() for path in pytester.path.glob("*.pin")}
    assert len(pins) >= 2  # several workers ran
    assert all(seen == f"{(1, 3)[int(worker[2:]) % 2]} 0" for worker, seen in pins.items()), pins


def test_gpu_all_gives_one_case_per_device(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["gpuperf.wiring.plugin"]\n'
                          'import gpuperf.measure.device\n'
                          'gpuperf.measure.device.device_count = lambda: 2\n')
    pytester.makepyfile(test_all="import pytest\n"
                                 "@pytest.mark.parametrize('dtype', ['fp32'])\n"
                                 "def test_each(dtype, gpu_index):\n"
                                 "    assert gpu_index in (0, 1)\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--gpu", "all", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_each?fp32-gpu0? PASSED*", "*test_each?fp32-gpu1? PASSED*"])


def test_a_test_that_fails_after_its_check_is_reported_but_not_recorded(project: pytest.Pytester) -> None:
    project.makepyfile(test_after="""
from gpuperf.measure.metrics import gemv_work

def test_fails_after_check(measure, perf):
    perf.check(measure(lambda: "gemv", gemv_work(16384, 16384, "fp32")))
    raise AssertionError("a cross-check failed after the measurement")
""")
    result = run(project, "test_after.py", "--update-baselines")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*NOT_RECORDED*not recorded: its test failed*"])
    assert not (project.path / "baselines" / "fake-gpu.yaml").exists()


# -- gate mode: evidence accounting ----------------------------------------------------------------------

CONTENDED = "other processes on the GPU (pids 4242) persisted through 3 re-samplings"


def glob(text: str) -> str:
    """``text`` as an fnmatch pattern that matches itself: a case id's brackets would be a character class."""
    return text.replace("[", "?").replace("]", "?")


def contend(pytester: pytest.Pytester, **cases: str) -> None:
    (pytester.path / "contention.json").write_text(json.dumps(cases))


def test_unreliable_cases_are_skipped_locally_and_fail_the_run_in_gate_mode(project: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    recorded(project)
    contend(project, gemv=CONTENDED)
    local = run(project)
    local.assert_outcomes(passed=1, skipped=1, deselected=1)
    assert local.ret == pytest.ExitCode.OK
    local.stdout.fnmatch_lines(["*GPU 0 (fake-gpu): 1 of 2 baselined cases measured*",
                                f"*NOT MEASURED {glob(GEMV_ID)}: UNRELIABLE: unreliable: other processes*4242*"])
    assert "GATE FAILED" not in local.stdout.str()
    for args, env in ((("--gate",), {}), ((), {"CI": "true"})):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        gated = run(project, *args)
        gated.assert_outcomes(passed=1, skipped=1, deselected=1)
        assert gated.ret == pytest.ExitCode.TESTS_FAILED
        gated.stdout.fnmatch_lines([f"*NOT MEASURED {glob(GEMV_ID)}: UNRELIABLE*",
                                    "*GATE FAILED: GPU 0 (fake-gpu): 1 of 2 baselined cases measured: every "
                                    "baselined case must be measured in gate mode*"])
    monkeypatch.setenv("CI", "false")
    assert run(project).ret == pytest.ExitCode.OK  # CI=false is not gate mode


def test_a_complete_gate_run_passes_and_says_so(project: pytest.Pytester) -> None:
    recorded(project)
    result = run(project, "--gate")
    result.assert_outcomes(passed=2, deselected=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*GPU 0 (fake-gpu): 2 of 2 baselined cases measured*"])


def test_a_skipped_baselined_case_is_not_measured(project: pytest.Pytester) -> None:
    recorded(project)
    project.makeconftest(CONFTEST + '''

@pytest.fixture(autouse=True)
def _optional_package(request):
    if "gemm" in request.node.name:
        pytest.skip("nvmath-python is not installed: pip install -e '.[cublaslt]'")
''')
    result = run(project, "--gate")
    result.assert_outcomes(passed=1, skipped=1, deselected=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*NOT MEASURED {glob(GEMM_ID)}: skipped: nvmath-python is not installed*"])


def test_a_deselected_case_is_not_counted(project: pytest.Pytester) -> None:
    recorded(project)
    result = run(project, "--gate", "-k", "gemv")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*GPU 0 (fake-gpu): 1 of 1 baselined cases measured*"])


def test_stale_entries_warn_locally_and_fail_the_gate_unless_allowed(project: pytest.Pytester) -> None:
    recorded(project)
    project.makepyfile(test_perf=TESTS.replace("def test_gemm(", "def test_matmul("))
    local = run(project, "--missing-baseline=pass")
    assert local.ret == pytest.ExitCode.OK
    local.stdout.fnmatch_lines(["*1 stale baseline entry, no test produces them any more (a warning here*",
                                f"*{glob(GEMM_ID)}"])
    gated = run(project, "--gate", "--missing-baseline=pass")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines(["*GATE FAILED: 1 stale baseline entry*--allow-stale*"])
    assert run(project, "--gate", "--missing-baseline=pass", "--allow-stale").ret == pytest.ExitCode.OK
    partly = run(project, "--gate", "--missing-baseline=pass", "test_perf.py::test_gemv")
    assert partly.ret == pytest.ExitCode.OK  # a file collected in part says nothing about what is gone


@pytest.mark.parametrize(("gpus", "message"), [
    ("5", "--gpu 5: no GPU 5 on this machine; it has 1 (0: Fake GPU): use --gpu 0..0 or --gpu all"),
    ("0,0", "names GPU 0 more than once"),
])
def test_gpu_selection_is_checked_at_start_up(project: pytest.Pytester, gpus: str, message: str) -> None:
    result = run(project, "--gpu", gpus)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert "PASSED" not in result.stdout.str()


def test_an_unwritable_results_dir_is_refused_at_start_up(project: pytest.Pytester) -> None:
    (project.path / "taken").write_text("a file, not a directory")
    result = project.runpytest("-p", "no:cacheprovider", "--results-dir", "taken/runs")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--results-dir taken/runs:*taken is not a directory*--results-dir none*"])


# -- version change --------------------------------------------------------------------------------------


def test_a_version_change_is_announced_at_the_start_and_named_in_a_regression(project: pytest.Pytester) -> None:
    recorded(project)
    (project.path / "driver.txt").write_text("590.10.01")
    set_timings(project, gemv=GEMV_S * 1.10, gemm=GEMM_S)
    result = project.runpytest("-p", "no:cacheprovider", "--results-dir", "out")
    lines = result.stdout.lines
    banner = next(i for i, line in enumerate(lines) if "VERSION CHANGE" in line)
    first_result = next(i for i, line in enumerate(lines) if "test_perf.py " in line)
    assert banner < first_result  # at the start, before any case ran
    assert "driver 580.159.04 → 590.10.01" in lines[banner]
    result.stdout.fnmatch_lines(["*re-record: pytest perf_tests --update-baselines*",
                                 "*REGRESSED*versions changed since the baseline: driver 580.159.04 → 590.10.01*"])
    [run_dir] = (project.path / "out").iterdir()
    saved = json.loads((run_dir / "results.json").read_text())["run"]
    assert saved["driver"] == "590.10.01"
    assert saved["extra"]["baseline_versions"] == {"driver": "580.159.04", "cuda_runtime": "13.0", "cublas": "13.1.0"}


@pytest.mark.long
def test_fail_on_version_change_stops_before_measuring(project: pytest.Pytester) -> None:
    recorded(project)
    (project.path / "driver.txt").write_text("590.10.01")
    set_timings(project, gemv=[GEMV_S], gemm=[GEMM_S])  # a measurement would consume these
    result = run(project, "--fail-on-version-change")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*VERSION CHANGE*driver 580.159.04 → 590.10.01*",
                                 "*--fail-on-version-change*stopped before measuring*"])
    assert json.loads((project.path / "timings.json").read_text()) == {"gemv": [GEMV_S], "gemm": [GEMM_S]}
    (project.path / "driver.txt").unlink()
    assert run(project, "--fail-on-version-change").ret == pytest.ExitCode.OK  # same versions: runs


def test_the_gate_band_is_capped(project: pytest.Pytester) -> None:
    data = recorded(project)
    from gpuperf.store.baseline import Entry, dump_baseline

    entries = {case: Entry(**{**fields, "spread": 0.3}) for case, fields in data["entries"].items()}
    header = {key: value for key, value in data["header"].items() if key != "integrity"}
    (project.path / "baselines" / "fake-gpu.yaml").write_text(dump_baseline(header, entries))
    set_timings(project, gemv=GEMV_S * 1.10, gemm=GEMM_S)
    result = run(project)  # a 30 % recorded spread once allowed 60 %; the cap is 8 %
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*REGRESSED*test_gemv*tolerance 8.0 %*"])
    run(project, "--max-tolerance", "0.12").assert_outcomes(passed=2, deselected=1)


def test_no_flush_measures_hot_and_says_so_in_ids_and_records(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--no-flush", "--missing-baseline=pass",
                               "--results-dir", "out", "-v")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*test_gemv?16384x16384-hot? PASSED*", "*test_gemm?fp32-4096x4096x4096-hot? PASSED*",
                                 "*flush hot*"])
    assert "-cold" not in result.stdout.str()
    [run_dir] = (project.path / "out").iterdir()
    saved = json.loads((run_dir / "results.json").read_text())
    assert {r["flush"] for r in saved["records"]} == {"hot"}  # what the timer was asked for, not just the id
    assert saved["run"]["flush_modes"] == ["hot"]


def test_entries_of_a_deleted_test_file_are_stale(project: pytest.Pytester) -> None:
    project.makepyfile(test_other=TESTS.replace("def test_gemv(", "def test_other_gemv(").replace(
        "def test_gemm(", "def test_other_gemm("))
    run(project, "--update-baselines").assert_outcomes(passed=4, deselected=2)
    (project.path / "test_other.py").unlink()
    gated = run(project, "--gate")
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines(["*2 stale baseline entries*", "*GATE FAILED: 2 stale baseline entries*"])


def test_last_failed_reruns_raise_no_stale_entries(project: pytest.Pytester) -> None:
    recorded(project)
    set_timings(project, gemv=GEMV_S * 1.10, gemm=GEMM_S)
    assert project.runpytest("-p", "cacheprovider", "--results-dir", "none").ret == pytest.ExitCode.TESTS_FAILED
    set_timings(project, gemv=GEMV_S, gemm=GEMM_S)
    rerun = project.runpytest("-p", "cacheprovider", "--results-dir", "none", "--lf", "--gate")
    assert rerun.ret == pytest.ExitCode.OK
    assert "stale baseline entr" not in rerun.stdout.str()


def test_re_recording_part_of_a_baseline_under_new_versions_is_refused(project: pytest.Pytester) -> None:
    before = recorded(project)
    (project.path / "driver.txt").write_text("590.10.01")
    result = run(project, "-k", "gemv", "--update-baselines")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*baseline not updated:*recorded under other versions (driver 580.159.04 → "
                                 "590.10.01)*re-record every entry*"])
    assert baseline(project) == before  # the GEMM entry keeps the versions it was measured with
    run(project, "--update-baselines").assert_outcomes(passed=2, deselected=1)
    assert baseline(project)["header"]["driver"] == "590.10.01"


def test_recording_a_new_gpu_in_gate_mode_passes(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")  # the update-baselines workflow runs with $CI set
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=2, deselected=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*GPU 0 (fake-gpu): 2 of 2 baselined cases measured*"])


def test_min_sample_time_reaches_the_sampling_options(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["gpuperf.wiring.plugin"]\n')
    pytester.makepyfile(test_opt="from gpuperf.wiring.plugin import STATE\n"
                                 "def test_it(request):\n"
                                 "    assert request.config.stash[STATE].options.min_sample_s == 0.002\n")
    pytester.runpytest("-p", "no:cacheprovider", "--results-dir", "none", "--min-sample-time", "0.002"
                       ).assert_outcomes(passed=1)
    bad = pytester.runpytest("-p", "no:cacheprovider", "--results-dir", "none", "--min-sample-time", "0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--min-sample-time*must be a positive number*"])


# --- kernel records: identity in baselines and results, kernel changes explained --------------------------

GEMV_KERNEL = {"name": "gemv2T_kernel_val", "grid": [2048, 1, 1], "block": [128, 1, 1], "registers": 65,
               "shared_memory": 0, "median_us": 240.0}
GEMVX_KERNEL = {"name": "gemvx::kernel", "grid": [128, 1, 1], "block": [128, 1, 1], "registers": 128,
                "shared_memory": 0, "median_us": 240.0}


def set_kernels(pytester: pytest.Pytester, **kernels: list[dict]) -> None:
    (pytester.path / "kernels.json").write_text(json.dumps(kernels))


def set_methods(pytester: pytest.Pytester, **methods: str) -> None:
    (pytester.path / "methods.json").write_text(json.dumps(methods))


def test_the_run_header_says_how_calls_are_timed(project: pytest.Pytester) -> None:
    run(project).stdout.fnmatch_lines(["gpuperf: timing CUPTI kernel records (synthetic)"])


def test_update_records_each_case_s_kernels_and_the_results_carry_them(project: pytest.Pytester) -> None:
    set_kernels(project, gemv=[GEMV_KERNEL])
    result = project.runpytest("-p", "no:cacheprovider", "--update-baselines", "--results-dir", "out")
    result.assert_outcomes(passed=2, deselected=1)
    entries = baseline(project)["entries"]
    assert entries[GEMV_ID]["kernels"] == [GEMV_KERNEL] and "kernels" not in entries[GEMM_ID]
    [run_dir] = (project.path / "out").iterdir()
    saved = {r["case_id"]: r for r in json.loads((run_dir / "results.json").read_text())["records"]}
    assert saved[GEMV_ID]["kernels"] == [GEMV_KERNEL]
    assert saved[GEMV_ID]["event_median_s"] == pytest.approx(GEMV_S + 1e-6)
    csv_text = (run_dir / "results.csv").read_text()
    assert "gemv2T_kernel_val grid 2048x1x1 block 128x1x1 65 regs 0 B smem 240 µs" in csv_text


def test_a_regression_on_the_same_kernels_says_so_and_how_to_profile_it(project: pytest.Pytester) -> None:
    set_kernels(project, gemv=[GEMV_KERNEL])
    recorded(project)
    set_timings(project, gemv=GEMV_S * 1.10, gemm=GEMM_S)
    result = project.runpytest("-p", "no:cacheprovider", "--results-dir", "out")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*REGRESSED*same kernels*"])
    [run_dir] = (project.path / "out").iterdir()
    note = next(r["note"] for r in json.loads((run_dir / "results.json").read_text())["records"]
                if r["case_id"] == GEMV_ID)
    assert "below baseline" in note and "same kernels" in note
    assert note.endswith("profile it: ncu --kernel-name-base demangled --kernel-name regex:gemv2T_kernel_val "
                         "--launch-skip 1 --launch-count 1 --set full python -m pytest "
                         "'test_perf.py::test_gemv[16384x16384-cold]' -p no:cacheprovider")
    assert "kernels changed since the baseline" not in result.stdout.str()


def test_a_changed_kernel_is_named_in_the_note_and_listed_at_the_end(project: pytest.Pytester) -> None:
    set_kernels(project, gemv=[GEMV_KERNEL])
    recorded(project)
    set_kernels(project, gemv=[GEMVX_KERNEL])
    set_timings(project, gemv=GEMV_S * 1.10, gemm=GEMM_S)
    result = run(project)
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*REGRESSED*kernel changed: gemv2T_kernel_val → gemvx::kernel*",
                                 "gpuperf: kernels changed since the baseline in 1 case(s):",
                                 f"gpuperf:   {GEMV_ID}: kernel changed: gemv2T_kernel_val → gemvx::kernel"])


def test_re_recording_shows_the_kernel_change_for_review(project: pytest.Pytester) -> None:
    set_kernels(project, gemv=[GEMV_KERNEL])
    recorded(project)
    set_kernels(project, gemv=[{**GEMV_KERNEL, "grid": [4096, 1, 1]}])
    result = run(project, "--update-baselines")
    result.stdout.fnmatch_lines(["*case*metric*old*new*Δ %*kernels*",
                                 "*test_gemv*same kernels; launch changed: gemv2T_kernel_val grid 2048x1x1 → 4096x1x1*"])


def test_a_traced_entry_measured_with_events_is_not_comparable_and_not_measured_in_gate_mode(
        project: pytest.Pytester) -> None:
    set_methods(project, gemv="cupti-cold", gemm="cupti-cold")
    recorded(project)
    set_methods(project, gemv="cold-rotate", gemm="cupti-cold")
    result = run(project, "--gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*NOT_COMPARABLE*recorded by method cupti-cold, measured by cold-rotate; kernel tracing (CUPTI) was*",
        "*1 of 2 baselined cases measured*", "*NOT MEASURED*test_gemv*", "*GATE FAILED*"])
