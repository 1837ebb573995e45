"""The pytest plugin: options, hooks and fixtures. It wires; the modules it imports decide.

Loaded by the root ``conftest.py`` (``pytest_plugins``) or with ``-p gpuperf.plugin``. Nothing here imports
CuPy at import time, so ``pytest --help`` and the CPU tests work without it.
"""

from __future__ import annotations

import argparse
import os
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuperf import report
from gpuperf.argtypes import fraction, non_negative_float, positive_float, positive_int
from gpuperf.baseline import DEFAULT_TOLERANCE, BaselineError, GateConfig, baseline_path, update_baseline
from gpuperf.check import CaseIdentity
from gpuperf.device import NoGpuError, device_count
from gpuperf.fixtures import GpuPool, Measurer, Perf, case_id_of, run_info
from gpuperf.pinning import PinningError, nvml_device_count, pin, worker_number
from gpuperf.records import Record, RunInfo
from gpuperf.session import MISSING_POLICIES, UNRELIABLE_POLICIES, Options, SessionState, baseline_header
from gpuperf.stats import StoppingRule

STATE = pytest.StashKey[SessionState]()
POOL = pytest.StashKey[GpuPool]()
PERF = pytest.StashKey[Perf]()
PINNED = pytest.StashKey[int]()  # an xdist worker's GPU (its index under --gpu), pinned by CUDA_VISIBLE_DEVICES
RECORD_PROPERTY = "gpuperf_record"
RUN_PROPERTY = "gpuperf_run"
FAMILY_MARKERS = ("crosscheck", "custom", "batched", "gemv", "gemm")  # the most specific first
MARKERS = {
    "gemm": "cuBLAS or custom matrix-matrix products",
    "gemv": "matrix-vector products (bandwidth-bound)",
    "batched": "batched GEMM / GEMV",
    "custom": "custom CUDA kernels from kernels/cuda",
    "cublas": "cases that call cuBLAS",
    "cublaslt": "cases that use cuBLASLt through nvmath-python",
    "crosscheck": "the seeds' cross-checks (TF32 active, sgemm vs gemmEx, flush effective)",
    "trigger": "cases built to make an anomaly rule fire (run with -m trigger)",
    "correctness": "numerical checks against a float64 reference",
    "perf": "performance cases gated against the GPU's baseline",
    "slow": "long cases kept out of the default run (run with --run-slow or -m slow)",
}


# -- option parsing (validated at start-up, so a bad value fails before any test) --------------------------

def gpu_selection(text: str) -> str:
    if text == "all" or all(part.strip().isdigit() for part in text.split(",")):
        return text
    raise argparse.ArgumentTypeError(f"--gpu {text!r}: use an index (0), a list (0,1) or 'all'")


def flush_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    bad = [mode for mode in modes if mode not in ("cold", "hot")]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"--flush-modes {text!r}: use cold, hot or cold,hot")
    return modes


def add_options(addoption: Callable[..., Any]) -> None:
    """The suite's options; a function taking ``addoption`` so another front end can reuse them."""
    addoption("--update-baselines", action="store_true",
              help="re-measure the selected cases and rewrite their entries in baselines/<gpu>.yaml")
    addoption("--tolerance", type=fraction, default=None,
              help="allowed slowdown as a fraction (default 0.04); effective = max(this, k × noise)")
    addoption("--noise-k", type=non_negative_float, default=2.0,
              help="k in max(tolerance, k × recorded relative IQR) (default 2)")
    addoption("--strict-baselines", action="store_true",
              help="fail cases that improved beyond tolerance, so stale baselines get refreshed")
    addoption("--no-flush", action="store_true", help="hot measurements: no L2 flush (same as --flush-modes hot)")
    addoption("--flush-modes", type=flush_modes, default=None,
              help="comma list of cold,hot; each perf test runs once per mode (default cold)")
    addoption("--missing-baseline", choices=MISSING_POLICIES, default=None,
              help="a case with no baseline entry: skip (local default), fail (default when $CI is set) or pass")
    addoption("--on-unreliable", choices=UNRELIABLE_POLICIES, default="skip",
              help="a case measured while throttled or shared: skip (default), fail or pass")
    addoption("--fail-on-version-change", action="store_true",
              help="stop if the driver, CUDA or cuBLAS version differs from the baseline header")
    addoption("--gpu", type=gpu_selection, default="0",
              help="GPU index, comma list or 'all' (one case per device); with -n, workers are pinned round-robin")
    addoption("--baseline-dir", default=None, help="directory of <gpu-slug>.yaml files (default <rootdir>/baselines)")
    addoption("--results-dir", default=None,
              help="where results/<timestamp>/ is written (default <rootdir>/results); 'none' disables")
    addoption("--run-slow", action="store_true", help="include cases marked slow")
    addoption("--min-samples", type=positive_int, default=10, help="samples per case at least (default 10)")
    addoption("--min-time", type=non_negative_float, default=0.2,
              help="timed GPU seconds per case at least (default 0.2)")
    addoption("--noise-target", type=positive_float, default=0.005,
              help="stop once the median's relative 95%% interval half-width is below this (default 0.005)")
    addoption("--case-timeout", type=positive_float, default=3.0, help="wall seconds of sampling per case at most")
    addoption("--warmup", type=positive_int, default=3, help="warm-up calls at least (default 3)")
    addoption("--warmup-time", type=non_negative_float, default=0.05, help="warm-up seconds at least (default 0.05)")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("gpuperf", "GPU performance regression (gpuperf)").addoption)


def _options(config: pytest.Config) -> Options:
    get = config.getoption
    root = Path(config.rootpath)
    modes = ("hot",) if get("--no-flush") else (get("--flush-modes") or ("cold",))
    missing = get("--missing-baseline") or ("fail" if os.environ.get("CI", "").lower() in ("1", "true", "yes")
                                             else "skip")
    results = get("--results-dir")
    try:
        rule = StoppingRule(min_samples=max(3, get("--min-samples")), min_time_s=get("--min-time"),
                            noise_target=get("--noise-target"), timeout_s=get("--case-timeout"))
    except ValueError as exc:
        raise pytest.UsageError(f"gpuperf sampling options: {exc}") from exc
    tolerance = get("--tolerance")
    return Options(
        gate=GateConfig(tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance, noise_k=get("--noise-k"),
                        strict=get("--strict-baselines")),
        rule=rule, update=get("--update-baselines"), missing=missing, on_unreliable=get("--on-unreliable"),
        baseline_dir=Path(get("--baseline-dir") or root / "baselines"), flush_modes=modes, gpus=get("--gpu"),
        warmup_calls=get("--warmup"), warmup_time_s=get("--warmup-time"),
        results_dir=None if results == "none" else Path(results or root / "results"),
        fail_on_version_change=get("--fail-on-version-change"),
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.stash[STATE] = SessionState(_options(config))
    config.stash[POOL] = GpuPool()
    config.pluginmanager.register(SessionHooks(config), "gpuperf-session")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        _pin_worker(config, str(workerinput["workerid"]))


def _pin_worker(config: pytest.Config, workerid: str) -> None:
    """Give this xdist worker one GPU through CUDA_VISIBLE_DEVICES, before CUDA starts here."""
    try:
        index, visible = pin(config.stash[STATE].options.gpus, worker_number(workerid), nvml_device_count,
                             os.environ.get("CUDA_VISIBLE_DEVICES"))
    except PinningError as exc:
        raise pytest.UsageError(f"gpuperf: {exc}") from exc
    except Exception:  # no NVML (or no driver) to count GPUs for --gpu all: leave the worker unpinned
        return
    os.environ["CUDA_VISIBLE_DEVICES"] = visible
    config.stash[PINNED] = index


# -- collection ------------------------------------------------------------------------------------------

def _selected_gpus(spec: str) -> list[int]:
    if spec == "all":
        return list(range(device_count()))
    return [int(part) for part in spec.split(",")]


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state = metafunc.config.stash[STATE]
    if "flush_mode" in metafunc.fixturenames:
        metafunc.parametrize("flush_mode", state.options.flush_modes, ids=list(state.options.flush_modes))
    if "gpu_index" in metafunc.fixturenames and not _is_worker(metafunc.config):
        try:
            indices = _selected_gpus(state.options.gpus)
        except NoGpuError:
            return
        if len(indices) > 1:
            metafunc.parametrize("gpu_index", indices, ids=[f"gpu{i}" for i in indices], scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markexpr = config.getoption("-m") or ""
    if config.getoption("--run-slow") or "slow" in markexpr:
        keep, dropped = items, []
    else:
        keep = [item for item in items if item.get_closest_marker("slow") is None]
        dropped = [item for item in items if item.get_closest_marker("slow") is not None]
    if "trigger" not in markexpr:
        dropped += [item for item in keep if item.get_closest_marker("trigger") is not None]
        keep = [item for item in keep if item.get_closest_marker("trigger") is None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


# -- fixtures --------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def gpu_index(request: pytest.FixtureRequest) -> int:
    """The device of this test: the selected one, or this xdist worker's (round-robin over --gpu)."""
    state = request.config.stash[STATE]
    try:
        indices = _selected_gpus(state.options.gpus)
    except NoGpuError as exc:
        pytest.skip(f"no GPU: {exc}")
    if PINNED in request.config.stash:
        return 0  # the worker's own GPU is the only one CUDA shows it
    return indices[0]


@pytest.fixture
def gpu(request: pytest.FixtureRequest, gpu_index: int) -> Iterator[Any]:
    """The ``GpuContext`` of this test's device, made current; skips with the reason when there is none."""
    try:
        ctx = request.config.stash[POOL].context(gpu_index)
    except NoGpuError as exc:
        pytest.skip(f"no GPU: {exc}")
    with ctx.device:
        yield ctx


@pytest.fixture
def stream(gpu: Any) -> Iterator[Any]:
    """A non-blocking stream, current for the whole test."""
    import cupy

    test_stream = cupy.cuda.Stream(non_blocking=True)
    with test_stream:
        yield test_stream
    test_stream.synchronize()


@pytest.fixture
def cublas_handle(request: pytest.FixtureRequest, gpu: Any, stream: Any) -> Iterator[int]:
    """The device's cuBLAS handle bound to the test's stream; its math mode is restored afterwards."""
    from cupy_backends.cuda.libs import cublas

    handle = request.config.stash[POOL].cublas_handle(gpu)
    mode = cublas.getMathMode(handle)
    cublas.setStream(handle, stream.ptr)
    try:
        yield handle
    finally:
        stream.synchronize()
        cublas.setMathMode(handle, mode)
        cublas.setStream(handle, 0)


@pytest.fixture
def flush_mode(request: pytest.FixtureRequest) -> str:
    """``cold`` or ``hot``; parametrized from --flush-modes, the id segment names it."""
    return str(getattr(request, "param", request.config.stash[STATE].options.flush_modes[0]))


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> Any:
    """A NumPy generator seeded from the case id: reproducible per case, different across cases."""
    import numpy

    return numpy.random.default_rng(zlib.crc32(case_id_of(request.node.nodeid).encode()))


@pytest.fixture
def measure(request: pytest.FixtureRequest, gpu: Any, stream: Any, flush_mode: str) -> Measurer:
    """``measure(fn, work, operands=(), flush=None, label="")`` → ``Measurement`` (see timing.py)."""
    from gpuperf.timing import SamplingConfig, Timer

    options = request.config.stash[STATE].options
    config = SamplingConfig(rule=options.rule, warmup_calls=options.warmup_calls,
                            warmup_time_s=options.warmup_time_s)
    flush_buffer = request.config.stash[POOL].flush_buffer(gpu)
    return Measurer(Timer(gpu.info.l2_bytes, flush_buffer, gpu.nvml, config), flush_mode)


def _family(item: pytest.Item) -> str:
    return next((name for name in FAMILY_MARKERS if item.get_closest_marker(name)), "other")


def _params(item: pytest.Item) -> dict[str, str]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    return {name: str(value) for name, value in callspec.params.items() if name != "gpu_index"}


@pytest.fixture
def perf(request: pytest.FixtureRequest, gpu: Any, measure: Any) -> Perf:
    """``perf.check(m)``, ``perf.check_ratio(a, b, name)``, ``perf.note(text)``: gate against the baseline."""
    state = request.config.stash[STATE]
    item = request.node
    case = CaseIdentity(case_id=case_id_of(item.nodeid), nodeid=item.nodeid, family=_family(item),
                        params=_params(item), gpu=gpu.info.slug, gpu_index=gpu.index)
    try:
        state.baseline_for(gpu.info.slug)
    except BaselineError as exc:
        pytest.exit(f"gpuperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    run = run_info(gpu, state.options.flush_modes)
    checker = Perf(state=state, case=case, peaks=gpu.peaks, measure=measure, run=run,
                   exporter=_benchmark_exporter(request))
    item.stash[PERF] = checker
    return checker


def _benchmark_exporter(request: pytest.FixtureRequest) -> Any:
    """With pytest-benchmark active and ``--benchmark-json`` given, checks also land in its JSON."""
    config = request.config
    if not config.pluginmanager.hasplugin("benchmark") or not config.getoption("benchmark_json", None):
        return None
    from gpuperf.benchmark_export import BenchmarkExporter

    return BenchmarkExporter(request.getfixturevalue("benchmark"))


# -- running ---------------------------------------------------------------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After the test body: attach its records to the report (also when the body failed, so what was
    measured is still reported and recorded) and give the verdict of its checks."""
    checker = item.stash.get(PERF, None)
    try:
        result = yield
    finally:
        if checker is not None:
            for record in checker.records:
                item.user_properties.append((RECORD_PROPERTY, record.to_dict()))
            if checker.run is not None and checker.records:
                item.user_properties.append((RUN_PROPERTY, checker.run.to_dict()))
    if checker is not None:
        verdict, message = checker.outcome()
        if verdict == "fail":
            pytest.fail(message, pytrace=False)
        if verdict == "skip":
            pytest.skip(message)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A test that asked for more device memory than there is gets one clear line, not a traceback."""
    report = yield
    if call.excinfo is not None and call.excinfo.typename == "OutOfMemoryError":
        report.longrepr = (f"shape too large for device memory: {call.excinfo.value}; use a smaller shape "
                           "in perf_tests/cases/*.yaml, mark the case slow, or run it on a larger GPU")
    return report


class SessionHooks:
    """The run-wide hooks, registered once per session with the state they append to and report from."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state = config.stash[STATE]
        self.results_dir: Path | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect records from every test report (on the controller, from xdist workers too)."""
        if report.when != "call":
            return
        run = next((RunInfo.from_dict(value) for name, value in report.user_properties if name == RUN_PROPERTY),
                   None)
        for name, value in report.user_properties:
            if name == RECORD_PROPERTY:
                self.state.add(Record.from_dict(value), run, test_failed=report.failed)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Controller only: write the baseline updates and the results files."""
        if _is_worker(self.config):
            return
        state = self.state
        if state.options.update:
            recorded = datetime.now(timezone.utc).isoformat(timespec="seconds")
            for gpu_slug, entries in state.updates().items():
                header = baseline_header(state.run_infos[gpu_slug], state.records, recorded)
                path = baseline_path(state.options.baseline_dir, gpu_slug)
                state.changes[str(path)] = update_baseline(path, header, entries)
        if state.records and state.options.results_dir is not None and state.run_infos:
            from gpuperf import results

            directory = results.timestamped_dir(state.options.results_dir)
            run = next(iter(state.run_infos.values()))
            self.results_dir = results.write_run(directory, run, state.records).directory

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if _is_worker(self.config) or not self.state.records:
            return
        state = self.state
        terminalreporter.section("gpuperf")
        for run in state.run_infos.values():
            for line in report.header_lines(run):
                terminalreporter.write_line(line)
        terminalreporter.write_line(report.format_table(state.records))
        terminalreporter.write_line(f"gpuperf: {len(state.records)} cases: {report.status_counts(state.records)}")
        for path, changes in state.changes.items():
            terminalreporter.write_line(f"gpuperf: updated {path} (old → new):")
            terminalreporter.write_line(report.format_changes(changes))
        if self.results_dir is not None:
            terminalreporter.write_line(f"gpuperf: results in {self.results_dir}")
