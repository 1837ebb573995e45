"""The pytest plugin: options, hooks and fixtures. It wires; the modules it imports decide.

Installed, it loads in every pytest session through the ``pytest11`` entry point named after this module (so a
``pytest_plugins = ["gpuperf.wiring.plugin"]`` or ``-p gpuperf.wiring.plugin`` of an uninstalled checkout finds it
already there). It stays inert in a session that collects no test using its fixtures: no header, no files, no GPU
or NVML query. Nothing here imports CuPy at import time, so ``pytest --help`` and the CPU tests work without it.
"""

from __future__ import annotations

import os
import tempfile
import zlib
from collections.abc import Callable, Generator, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import pytest

from gpuperf.output import report
from gpuperf.verdict.accounting import CollectedTests, SelectedCase, account, merge_collected, stale_entries
from gpuperf.wiring.argtypes import (existing_folder, flush_modes, fraction, gpu_selection, non_negative_float,
                                     positive_float, positive_int)
from gpuperf.store.baseline import BaselineError, baseline_path, update_baseline
from gpuperf.verdict.check import CaseIdentity, baseline_header
from gpuperf.measure.device import NoGpuError, device_count
from gpuperf.wiring.fixtures import GpuPool, Measurer, Perf, case_id_of, run_info, run_info_from
from gpuperf.verdict.gate import DEFAULT_TOLERANCE, GateConfig, gate_mode_from_env, run_failures
from gpuperf.wiring.pinning import PinningError, nvml_device_count, pin, worker_number
from gpuperf.store.records import Record, RunInfo
from gpuperf.measure.measurement import DEFAULT_MIN_SAMPLE_S
from gpuperf.wiring.session import MISSING_POLICIES, UNRELIABLE_POLICIES, Options, SessionState
from gpuperf.measure.stats import StoppingRule
from gpuperf.suite.cases import DEFAULT_CASES_DIR, use_cases_dir
from gpuperf.vocabulary import MARKERS, OPT_IN_MARKERS, Family, Flush

STATE = pytest.StashKey[SessionState]()
POOL = pytest.StashKey[GpuPool]()
PERF = pytest.StashKey[Perf]()
PINNED = pytest.StashKey[int]()  # an xdist worker's GPU (its index under --gpu), pinned by CUDA_VISIBLE_DEVICES
COLLECTED = pytest.StashKey[CollectedTests]()
GPU_OF = pytest.StashKey[int]()  # a selected perf test's GPU, in --gpu numbering (set at collection)
RECORD_PROPERTY = "gpuperf_record"
RUN_PROPERTY = "gpuperf_run"
CASE_PROPERTY = "gpuperf_case"  # on every selected perf test: its case id and GPU, for the accounting
COLLECTED_OUTPUT = "gpuperf_collected"  # an xdist worker's CollectedTests, sent to the controller
PREVIOUS_CASES_DIR = pytest.StashKey["Path | None"]()
#: The fixtures that make a test one of the suite's: only such tests are deselected as slow, or have their
#: out-of-memory error rewritten, so the plugin leaves every other test of a repository as it is.
SUITE_FIXTURES = frozenset({"gpu", "gpu_index", "stream", "cublas_handle", "flush_mode", "measure", "perf"})
DEFAULT_BASELINES_DIR = "baselines"


# -- options (their value types are in argtypes.py: a bad value fails at start-up) ---------------------------

def add_options(addoption: Callable[..., Any]) -> None:
    """The suite's options; a function taking ``addoption`` so another front end can reuse them."""
    addoption("--update-baselines", action="store_true",
              help="re-measure the selected cases and rewrite their entries in baselines/<gpu>.yaml")
    addoption("--tolerance", type=fraction, default=None,
              help="allowed slowdown as a fraction (default 0.04); effective = min(max(this, k × recorded spread, "
                   "recorded run spread), --max-tolerance)")
    addoption("--noise-k", type=non_negative_float, default=2.0,
              help="k in the effective tolerance's k × recorded relative IQR (default 2)")
    addoption("--max-tolerance", type=fraction, default=None,
              help="cap on the effective tolerance, whatever the recorded noise (default twice --tolerance)")
    addoption("--gate", action="store_true",
              help="gate mode (also on when $CI is set): every selected baselined case must be measured, a "
                   "missing baseline or a stale entry fails the run")
    addoption("--allow-stale", action="store_true",
              help="in gate mode, list baseline entries whose test no longer exists without failing the run")
    addoption("--strict-baselines", action="store_true",
              help="fail cases that improved beyond tolerance, so stale baselines get refreshed")
    addoption("--no-flush", action="store_true", help="hot measurements: no L2 flush (same as --flush-modes hot)")
    addoption("--flush-modes", type=flush_modes, default=None,
              help="comma list of cold,hot; each perf test runs once per mode (default cold)")
    addoption("--missing-baseline", choices=MISSING_POLICIES, default=None,
              help="a case with no baseline entry: skip (local default), fail (default in gate mode) or pass")
    addoption("--on-unreliable", choices=UNRELIABLE_POLICIES, default="skip",
              help="a case measured while throttled or shared: skip (default), fail or pass")
    addoption("--fail-on-version-change", action="store_true",
              help="stop before measuring if the driver, CUDA or cuBLAS version differs from the baseline header")
    addoption("--gpu", type=gpu_selection, default="0",
              help="GPU index, comma list or 'all' (one case per device); with -n, workers are pinned round-robin")
    addoption("--baseline-dir", type=existing_folder, default=None,
              help="directory of <gpu-slug>.yaml files (default: the gpuperf_baselines ini key, baselines, under the "
                   "rootdir)")
    addoption("--results-dir", default=None,
              help="where results/<timestamp>/ is written (default <rootdir>/results); 'none' disables")
    addoption("--history", default=None,
              help="where each run is appended: a SQLite file path, sqlite:///PATH, postgresql://… or none "
                   "(default $GPUPERF_HISTORY, else <rootdir>/results/history.sqlite)")
    addoption("--run-slow", action="store_true", help="include cases marked slow")
    addoption("--min-samples", type=positive_int, default=10, help="samples per case at least (default 10)")
    addoption("--min-time", type=non_negative_float, default=0.2,
              help="timed GPU seconds per case at least when timing with CUDA events, the fallback without CUPTI "
                   "(default 0.2; traced calls sample 0.05 s of GPU time, flushes included)")
    addoption("--noise-target", type=positive_float, default=0.005,
              help="stop once the median's relative 95%% interval half-width is below this (default 0.005)")
    addoption("--min-sample-time", type=positive_float, default=DEFAULT_MIN_SAMPLE_S,
              help="seconds of GPU time one sample of a short call covers: a traced sample is the mean kernel "
                   "time of that many calls, an event-timed cold sample times them at once over rotated operand "
                   f"copies (default {DEFAULT_MIN_SAMPLE_S:g})")
    addoption("--case-timeout", type=positive_float, default=3.0, help="wall seconds of sampling per case at most")
    addoption("--warmup", type=positive_int, default=3, help="warm-up calls at least (default 3)")
    addoption("--warmup-time", type=non_negative_float, default=0.05, help="warm-up seconds at least (default 0.05)")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("gpuperf", "GPU performance regression (gpuperf)").addoption)
    parser.addini("gpuperf_cases", default=DEFAULT_CASES_DIR,
                  help=f"directory of the case tables (<family>.yaml), relative to the rootdir (default "
                       f"{DEFAULT_CASES_DIR})")
    parser.addini("gpuperf_baselines", default=DEFAULT_BASELINES_DIR,
                  help=f"directory of the <gpu-slug>.yaml baselines, relative to the rootdir (default "
                       f"{DEFAULT_BASELINES_DIR}); --baseline-dir wins")


def _options(config: pytest.Config) -> Options:
    get = config.getoption
    root = Path(config.rootpath)
    modes = (Flush.HOT,) if get("--no-flush") else (get("--flush-modes") or (Flush.COLD,))
    gate_mode = bool(get("--gate")) or gate_mode_from_env(os.environ.get("CI"))
    missing = get("--missing-baseline") or ("fail" if gate_mode else "skip")
    results = get("--results-dir")
    try:
        rule = StoppingRule(min_samples=max(3, get("--min-samples")), min_time_s=get("--min-time"),
                            noise_target=get("--noise-target"), timeout_s=get("--case-timeout"))
        tolerance = get("--tolerance")
        gate = GateConfig(tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance, noise_k=get("--noise-k"),
                          max_tolerance=get("--max-tolerance"), strict=get("--strict-baselines"))
    except ValueError as exc:
        raise pytest.UsageError(f"gpuperf options: {exc}") from exc
    return Options(
        gate=gate, rule=rule, update=get("--update-baselines"), missing=missing, on_unreliable=get("--on-unreliable"),
        baseline_dir=Path(get("--baseline-dir") or root / config.getini("gpuperf_baselines")), flush_modes=modes,
        gpus=get("--gpu"),
        warmup_calls=get("--warmup"), warmup_time_s=get("--warmup-time"),
        min_sample_s=get("--min-sample-time"),
        results_dir=None if results == "none" else Path(results or root / "results"),
        fail_on_version_change=get("--fail-on-version-change"), gate_mode=gate_mode,
        allow_stale=get("--allow-stale"),
    )


def _check_results_dir(directory: Path | None) -> None:
    """``--results-dir`` must be writable at start-up, not found unwritable after the whole run."""
    if directory is None:
        return
    existing = directory
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
    except OSError as exc:  # a parent that cannot even be looked into
        raise pytest.UsageError(f"gpuperf: --results-dir {directory}: {existing} cannot be read "
                                f"({exc.strerror or exc}); choose a writable directory, or --results-dir none to "
                                "write no results files") from exc
    problem = ""
    if not existing.is_dir():
        problem = f"{existing} is not a directory"
    else:
        try:
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as exc:
            problem = f"{existing} is not writable ({exc.strerror or exc})"
    if problem:
        raise pytest.UsageError(f"gpuperf: --results-dir {directory}: {problem}; choose a writable directory, "
                                "or --results-dir none to write no results files")


def _check_gpu_selection(spec: str, pool: Any) -> None:
    """``--gpu`` must name devices that exist; checked at start-up against what CUDA reports. ``all`` and the
    default ``0`` name only devices that exist whenever there is one, so they cost no device query."""
    if spec in ("all", "0"):
        return
    try:
        devices = pool.devices()
    except NoGpuError:
        return  # no GPU at all: every GPU test skips with that reason (and gate mode fails the run)
    absent = [index for index in map(int, spec.split(",")) if index >= len(devices)]
    if absent:
        found = ", ".join(f"{index}: {name}" for index, name in devices)
        raise pytest.UsageError(f"gpuperf: --gpu {spec}: no GPU {', '.join(map(str, absent))} on this machine; it "
                                f"has {len(devices)} ({found}): use --gpu 0..{len(devices) - 1} or --gpu all")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _uses_suite(item: pytest.Item) -> bool:
    return not SUITE_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def _keeps_baselines(config: pytest.Config) -> bool:
    """Whether this project is a gpuperf suite although nothing tells yet (a perf file skipped at collection, an
    xdist controller that sees only ids): ``--gate`` was given or its baseline directory exists. A repository
    that merely has gpuperf installed, even under ``$CI``, is then left alone."""
    return bool(config.getoption("--gate")) or config.stash[STATE].options.baseline_dir.is_dir()


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.stash[STATE] = SessionState(_options(config))
    config.stash[POOL] = GpuPool()
    config.stash[PREVIOUS_CASES_DIR] = use_cases_dir(config.rootpath / config.getini("gpuperf_cases"))
    config.pluginmanager.register(SessionHooks(config), "gpuperf-session")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        _pin_worker(config, str(workerinput["workerid"]))
    elif not getattr(config.option, "help", False) and not config.option.collectonly and (
            config.getoption("--results-dir") is not None or _keeps_baselines(config)):
        _check_results_dir(config.stash[STATE].options.results_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    if PREVIOUS_CASES_DIR in config.stash:
        use_cases_dir(config.stash[PREVIOUS_CASES_DIR])


def _pin_worker(config: pytest.Config, workerid: str) -> None:
    """Give this xdist worker one GPU through CUDA_VISIBLE_DEVICES, before CUDA starts here. Under the default
    ``--gpu 0`` every worker measures on device 0 anyway, so the environment is left as it is."""
    if config.stash[STATE].options.gpus == "0":
        return
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
        keep = [item for item in items if item.get_closest_marker("slow") is None or not _uses_suite(item)]
        dropped = [item for item in items if item.get_closest_marker("slow") is not None and _uses_suite(item)]
    for marker in (m for m in OPT_IN_MARKERS if m not in markexpr):
        dropped += [item for item in keep if item.get_closest_marker(marker) is not None and _uses_suite(item)]
        keep = [item for item in keep if item.get_closest_marker(marker) is None or not _uses_suite(item)]
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
def stream(request: pytest.FixtureRequest, gpu: Any) -> Iterator[Any]:
    """The device's measuring stream (``GpuPool.stream``: the same one for every test), current for the whole
    test and drained after it."""
    test_stream = request.config.stash[POOL].stream(gpu)
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
    from gpuperf.measure.timing import SamplingConfig, Timer

    state = request.config.stash[STATE]
    options = state.options
    config = SamplingConfig(rule=options.rule, warmup_calls=options.warmup_calls,
                            warmup_time_s=options.warmup_time_s, min_sample_s=options.min_sample_s)
    flush_buffer = request.config.stash[POOL].flush_buffer(gpu)
    entry = None if options.update else state.entry(gpu.info.slug, case_id_of(request.node.nodeid))
    timer = Timer(gpu.info.l2_bytes, flush_buffer, gpu.nvml, config, tracer=request.config.stash[POOL].tracer())
    return Measurer(timer, flush_mode, prefer_method=entry.method if entry else "")


def _family(item: pytest.Item) -> str:
    return next((name for name in Family.MOST_SPECIFIC_FIRST if item.get_closest_marker(name)), Family.OTHER)


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
    gpu_of = item.stash.get(GPU_OF, gpu.index)  # --gpu numbering: a pinned worker's CUDA device 0 is its GPU
    case = CaseIdentity(case_id=case_id_of(item.nodeid), nodeid=item.nodeid, family=_family(item),
                        params=_params(item), gpu=gpu.info.slug, gpu_index=gpu_of)
    try:
        run = state.devices.get(gpu_of) or state.remember_device(gpu_of, run_info(gpu, state.options.flush_modes))
    except BaselineError as exc:
        pytest.exit(f"gpuperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    checker = Perf(state=state, case=case, peaks=gpu.peaks, measure=measure, run=run,
                   exporter=_benchmark_exporter(request),
                   version_changes=state.version_changes(run.gpu_slug, run.versions))
    item.stash[PERF] = checker
    return checker


def _benchmark_exporter(request: pytest.FixtureRequest) -> Any:
    """With pytest-benchmark active and ``--benchmark-json`` given, checks also land in its JSON."""
    config = request.config
    if not config.pluginmanager.hasplugin("benchmark") or not config.getoption("benchmark_json", None):
        return None
    from gpuperf.output.benchmark_export import BenchmarkExporter

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
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test that asked for more device memory than there is gets one clear line, not a traceback."""
    report = yield
    if call.excinfo is not None and call.excinfo.typename == "OutOfMemoryError" and _uses_suite(item):
        report.longrepr = (f"shape too large for device memory: {call.excinfo.value}; use a smaller shape "
                           "in perf_tests/cases/*.yaml, mark the case slow, or run it on a larger GPU")
    return report


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "skipped")


def _problem(report: pytest.TestReport) -> str:
    """Why a test did not run to its verdict, in one line ("" when it did)."""
    if report.skipped:
        return f"skipped: {_skip_reason(report)}"
    if report.failed:
        first = next((line for line in report.longreprtext.splitlines() if line.strip()), "")
        phase = "test failed" if report.when == "call" else f"error in {report.when}"
        return f"{phase}: {first.strip()[:200]}"
    return ""


def _drops_tests_that_passed(config: pytest.Config) -> bool:
    """``--lf`` and ``--sw`` collect files in part: no file tells which of its tests are gone."""
    return bool(config.getoption("lf", False) or config.getoption("stepwise", False))


def _partly_collected(config: pytest.Config) -> set[str]:
    """Test files named with a node id (``file.py::test``) on the command line: only part of them was collected."""
    partial = set()
    for arg in config.args:
        if "::" in arg:
            path = (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
            try:
                partial.add(path.relative_to(config.rootpath).as_posix())
            except ValueError:
                continue
    return partial


def _is_xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.get_plugin("dsession") is not None


def _describe_devices(config: pytest.Config, indices: Sequence[int]) -> dict[int, dict[str, Any] | str]:
    """Each selected GPU's description, or why there is none (the run goes on and reports its cases as not
    measured)."""
    pool = config.stash[POOL]
    described: dict[int, dict[str, Any] | str] = {}
    for index in indices:
        try:
            described[index] = pool.describe(index, isolated=_is_xdist_controller(config))
        except Exception as exc:  # NoGpuError, or a CUDA or NVML failure, already naming its cause
            described[index] = str(exc) if isinstance(exc, NoGpuError) else f"{type(exc).__name__}: {exc}"
    return described


class SessionHooks:
    """The run-wide hooks, registered once per session with the state they append to and report from."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state = config.stash[STATE]
        self.results_dir: Path | None = None
        self.started = False
        self.collected: list[CollectedTests] = []
        self.skipped_files: dict[str, str] = {}
        self.failures: list[str] = []  # why gate mode fails the run
        self.update_failures: list[str] = []  # why --update-baselines wrote nothing
        self.history_url: str | None = None
        self.history_lines: list[str] = []
        self.history_failures: list[str] = []

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if not _is_worker(self.config) and not self.config.option.collectonly:
            _check_gpu_selection(self.state.options.gpus, self.config.stash[POOL])
            from gpuperf.store.history import HistoryError, resolve_target

            try:
                self.history_url = resolve_target(self.config.getoption("--history"), os.environ,
                                                  Path(self.config.rootpath))
            except HistoryError as exc:
                raise pytest.UsageError(f"gpuperf: --history: {exc}") from exc

    # -- collection: what exists (before -k/-m) and what is selected --------------------------------------

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A perf test file skipped at collection (no CuPy, say) measures nothing: remember why."""
        if report.skipped and report.nodeid.endswith(".py") and self._in_suite(report.nodeid) \
                and _keeps_baselines(self.config):
            self.skipped_files[report.nodeid] = _skip_reason(report)  # type: ignore[arg-type]

    def _in_suite(self, nodeid: str) -> bool:
        suites = [str(path).rstrip("/") + "/" for path in self.config.getini("testpaths")]
        return any(nodeid.startswith(suite) for suite in suites)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Every collected case id, before -k, -m and slow deselect any: what exists, for stale entries."""
        config.stash[COLLECTED] = CollectedTests(
            case_ids=frozenset(case_id_of(item.nodeid) for item in items),
            whole_files=frozenset() if _drops_tests_that_passed(config) else
            frozenset(item.nodeid.split("::", 1)[0] for item in items) - _partly_collected(config),
            flush_modes=self.state.options.flush_modes,
            skipped_files=dict(self.skipped_files))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Tag the selected perf tests for the accounting, then print the device header (and any version change)
        before the first measurement."""
        perf_items = [item for item in session.items if "perf" in getattr(item, "fixturenames", ())]
        default_gpu = self._default_gpu() if perf_items else 0
        for item in perf_items:
            callspec = getattr(item, "callspec", None)
            params = callspec.params if callspec is not None else {}
            item.stash[GPU_OF] = int(params["gpu_index"]) if "gpu_index" in params else default_gpu
            item.user_properties.append((CASE_PROPERTY, {"case_id": case_id_of(item.nodeid),
                                                         "gpu_index": item.stash[GPU_OF]}))
        if perf_items and not _is_worker(self.config):
            self._start(sorted({item.stash[GPU_OF] for item in perf_items}))

    def _default_gpu(self) -> int:
        """The GPU of a test not parametrized over GPUs: a pinned worker's, else the first selected."""
        if PINNED in self.config.stash:
            return self.config.stash[PINNED]
        try:
            return _selected_gpus(self.state.options.gpus)[0]
        except NoGpuError:
            return 0

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """xdist controller: the workers have collected; announce the devices before they measure."""
        if ids and not self.started and _keeps_baselines(self.config):
            try:
                indices = _selected_gpus(self.state.options.gpus)
            except NoGpuError as exc:
                self.state.unavailable[0] = str(exc)
                return
            self._start(indices)

    def _start(self, indices: Sequence[int]) -> None:
        self.started = True
        state = self.state
        writer = self.config.pluginmanager.get_plugin("terminalreporter")
        changed = []
        for index, described in _describe_devices(self.config, indices).items():
            if isinstance(described, str):
                state.unavailable[index] = described
                continue
            try:
                run = state.remember_device(index, run_info_from(described, state.options.flush_modes))
                baseline = state.baseline_for(run.gpu_slug)
            except BaselineError as exc:
                pytest.exit(f"gpuperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
            lines = report.header_lines(run)
            changes = state.version_changes(run.gpu_slug, run.versions)
            if changes and baseline is not None:
                changed.append(f"GPU {index} ({run.gpu_slug})")
                lines += report.version_banner(baseline.path, changes)
            if writer is not None:
                for line in lines:
                    writer.write_line(line)
        if changed and state.options.fail_on_version_change:
            pytest.exit(f"gpuperf: --fail-on-version-change: {', '.join(changed)} runs other versions than its "
                        "baseline (banner above); stopped before measuring", returncode=pytest.ExitCode.TESTS_FAILED)

    # -- running --------------------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect records from every test report (on the controller, from xdist workers too), and what each
        selected perf test's phases said, for the accounting."""
        properties = [(name, cast(dict[str, Any], value)) for name, value in report.user_properties]
        case = next((value for name, value in properties if name == CASE_PROPERTY), None)
        if case is not None:
            self.state.observe(SelectedCase(report.nodeid, case["case_id"], int(case["gpu_index"]),
                                            _problem(report)))
        if report.when != "call":
            return
        run = next((RunInfo.from_dict(value) for name, value in properties if name == RUN_PROPERTY), None)
        for name, value in properties:
            if name == RECORD_PROPERTY:
                self.state.add(Record.from_dict(value), run, test_failed=report.failed)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: a worker's view of what exists, for stale entries."""
        data = getattr(node, "workeroutput", {}).get(COLLECTED_OUTPUT)
        if data:
            self.collected.append(CollectedTests.from_dict(data))

    # -- the end --------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Controller: write the baseline updates and the results files, account for the evidence and, in gate
        mode, fail a run that lacks any. A worker hands its collection to the controller."""
        if _is_worker(self.config):
            collected = self.config.stash.get(COLLECTED, None)
            if collected is not None:
                self.config.workeroutput[COLLECTED_OUTPUT] = collected.to_dict()  # type: ignore[attr-defined]
            return
        state = self.state
        self.update_failures = []
        origin = self._provenance()
        if state.options.update:
            recorded = datetime.now(timezone.utc).isoformat(timespec="seconds")
            for gpu_slug, entries in state.updates().items():
                header = baseline_header(state.run_infos[gpu_slug], state.records, recorded)
                path = baseline_path(state.options.baseline_dir, gpu_slug)
                try:
                    state.changes[str(path)] = update_baseline(path, header, entries)
                except BaselineError as exc:
                    self.update_failures.append(str(exc))
            state.forget_baselines()  # account against the files as written
        self._account()
        if state.records and state.options.results_dir is not None and state.run_infos:
            from gpuperf.output import results

            directory = results.timestamped_dir(state.options.results_dir)
            run = next(iter(state.run_infos.values()))
            if origin is not None:
                from gpuperf.wiring.history_append import with_provenance

                run = with_provenance(run, origin)
            summary_history = None
            if self.history_url is not None:
                from gpuperf.output.trend_paths import DEFAULT_SITE
                from gpuperf.output.trend_source import summary_history as read_recent

                summary_history = read_recent(self.history_url, run, state.records,
                                              Path(self.config.rootpath) / DEFAULT_SITE)
            self.results_dir = results.write_run(directory, run, state.records, history=summary_history).directory
        self._append_history(origin)
        if (self.failures or self.update_failures or self.history_failures) and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _provenance(self) -> Any:
        """Where this run's figures came from (``None`` when it has none), taken before baselines are rewritten."""
        state = self.state
        if not state.records or not state.run_infos:
            return None
        from gpuperf.wiring import history_append

        run = next(iter(state.run_infos.values()))
        try:
            baseline = state.baseline_for(run.gpu_slug)
        except BaselineError:
            baseline = None
        return history_append.session_provenance(Path(self.config.rootpath), state.options,
                                                 self.config.invocation_params.args, baseline)

    def _append_history(self, origin: Any) -> None:
        if origin is None or self.history_url is None:
            return
        from gpuperf.wiring import history_append

        run = history_append.with_provenance(next(iter(self.state.run_infos.values())), origin)
        source = str(self.results_dir / "results.json") if self.results_dir is not None else "pytest session"
        try:
            self.history_lines.append(history_append.append_run(self.history_url, run, self.state.records, source))
        except history_append.HistoryError as exc:
            self.history_failures.append(str(exc))

    def _account(self) -> None:
        state = self.state
        own = self.config.stash.get(COLLECTED, None)
        collected = merge_collected([*self.collected, *([own] if own is not None else [])])
        skipped = {**collected.skipped_files, **self.skipped_files}
        slugs = {index: run.gpu_slug for index, run in state.devices.items()}
        try:
            baselines = {slug: state.baseline_for(slug) for slug in set(slugs.values())}
        except BaselineError:
            return  # the run already stopped on it, naming the file and the fix
        state.accounts = account(list(state.selected.values()), state.records, slugs, baselines, state.unavailable)
        state.stale = sorted({key for baseline in baselines.values() if baseline is not None
                              for key in stale_entries(baseline, collected,
                                                       lambda path: (self.config.rootpath / path).exists())})
        by_reason: dict[str, list[str]] = {}
        for path, reason in sorted(skipped.items()):
            by_reason.setdefault(reason, []).append(path)
        no_gpu = "; ".join(f"{', '.join(paths)} collected nothing: {reason}" for reason, paths in by_reason.items())
        if not state.accounts and not no_gpu and state.unavailable:
            no_gpu = "; ".join(f"GPU {index}: {why}" for index, why in sorted(state.unavailable.items()))
        self.failures = run_failures(state.accounts, state.stale, state.options.gate_mode, state.options.allow_stale,
                                     no_gpu)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if _is_worker(self.config):
            return
        state = self.state
        lines = []
        if state.records:
            lines += [report.format_table(state.records),
                      f"gpuperf: {len(state.records)} cases: {report.status_counts(state.records)}",
                      *report.kernel_change_lines(state.records)]
        lines += report.accounting_lines(state.accounts, state.stale, state.options.gate_mode)
        for path, changes in state.changes.items():
            lines += [f"gpuperf: updated {path} (old → new):", report.format_changes(changes)]
        if self.results_dir is not None:
            lines.append(f"gpuperf: results in {self.results_dir}")
        lines += self.history_lines
        lines += [f"gpuperf: HISTORY NOT APPENDED: {reason}" for reason in self.history_failures]
        lines += [f"gpuperf: baseline not updated: {reason}" for reason in self.update_failures]
        if self.failures:
            lines += [f"gpuperf: GATE FAILED: {reason}" for reason in self.failures]
        if not lines:
            return
        terminalreporter.section("gpuperf")
        header = [line for run in state.run_infos.values() for line in report.header_lines(run)]
        for line in header + lines:
            terminalreporter.write_line(line)
