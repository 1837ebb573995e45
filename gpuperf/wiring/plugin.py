"""The pytest plugin: options, hooks and fixtures. It wires; the modules it imports decide.

Installed, it loads in every pytest session through the ``pytest11`` entry point named after this module (so a
``pytest_plugins = ["gpuperf.wiring.plugin"]`` or ``-p gpuperf.wiring.plugin`` of an uninstalled checkout finds it
already there). It stays inert in a session that collects no test using its fixtures: no header, no files, no GPU
or NVML query, and nothing loaded but its options until then (``arming.py``). Nothing here imports CuPy at import
time, so ``pytest --help`` and the CPU tests work without it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpuperf.suite.cases_dir import use_cases_dir
from gpuperf.vocabulary import MARKERS, OPT_IN_MARKERS
from gpuperf.wiring.arming import ArmOnReport, arm, check_results_dir, selected_gpus
from gpuperf.wiring.options import add_pytest_options, session_options
from gpuperf.wiring.roles import is_suite, is_worker, keeps_baselines, uses_suite
from gpuperf.wiring.session_options import DEFAULT_GPUS, Options
from gpuperf.wiring.stash import (CASE_PROPERTY, GPU_OF, OPTIONS, PERF, PINNED, POOL, PREVIOUS_CASES_DIR,
                                  RECORD_PROPERTY, RUN_PROPERTY, STATE)

if TYPE_CHECKING:
    from gpuperf.wiring.fixtures import Measurer, Perf

__all__ = ["OPTIONS", "POOL", "STATE", "pytest_addoption"]  # the keys tests and tools read the session's objects by
pytest_plugins = ["gpuperf.wiring.benchmark_plugin"]  # pytest-benchmark, loaded when a session uses it


# -- options (declared in options.py; their value types are in argtypes.py: a bad value fails at start-up) ----

def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser)


def _options(config: pytest.Config) -> Options:
    try:
        return session_options(config.getoption, config.getini, Path(config.rootpath), os.environ.get("CI"))
    except ValueError as exc:
        raise pytest.UsageError(f"gpuperf options: {exc}") from exc


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.stash[OPTIONS] = _options(config)
    config.stash[PREVIOUS_CASES_DIR] = use_cases_dir(config.rootpath / config.getini("gpuperf_cases"))
    if config.stash[OPTIONS].dry_run:
        from gpuperf.wiring.dry_run import configure

        configure(config)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        _pin_worker(config, str(workerinput["workerid"]))
    else:
        from gpuperf.wiring.benchmark_plugin import refuse_under_xdist

        refuse_under_xdist(config)
    if workerinput is None and not getattr(config.option, "help", False) and not config.option.collectonly and (
            config.getoption("--results-dir") is not None or keeps_baselines(config)):
        check_results_dir(config.stash[OPTIONS].results_dir)
    if is_suite(config):
        arm(config)
    elif workerinput is None:
        config.pluginmanager.register(ArmOnReport(config), "gpuperf-arm-on-report")


def pytest_unconfigure(config: pytest.Config) -> None:
    if PREVIOUS_CASES_DIR in config.stash:
        use_cases_dir(config.stash[PREVIOUS_CASES_DIR])


def _pin_worker(config: pytest.Config, workerid: str) -> None:
    """Give this xdist worker one GPU through CUDA_VISIBLE_DEVICES, before CUDA starts here. Under the default
    ``--gpu`` every worker measures on device 0 anyway, so the environment is left as it is."""
    if config.stash[OPTIONS].gpus == DEFAULT_GPUS:
        return
    from gpuperf.wiring.pinning import PinningError, nvml_device_count, pin, worker_number

    try:
        index, visible = pin(config.stash[OPTIONS].gpus, worker_number(workerid), nvml_device_count,
                             os.environ.get("CUDA_VISIBLE_DEVICES"))
    except PinningError as exc:
        raise pytest.UsageError(f"gpuperf: {exc}") from exc
    except Exception:  # no NVML (or no driver) to count GPUs for --gpu all: leave the worker unpinned
        return
    os.environ["CUDA_VISIBLE_DEVICES"] = visible
    config.stash[PINNED] = index


# -- collection ------------------------------------------------------------------------------------------

@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not uses_suite(metafunc):
        return
    arm(metafunc.config, late=True)
    state = metafunc.config.stash[STATE]
    if "flush_mode" in metafunc.fixturenames:
        metafunc.parametrize("flush_mode", state.options.flush_modes, ids=list(state.options.flush_modes))
    if "gpu_index" in metafunc.fixturenames and not is_worker(metafunc.config):
        from gpuperf.measure.device import NoGpuError

        try:
            indices = selected_gpus(state.options.gpus)
        except NoGpuError:
            return
        if len(indices) > 1:
            metafunc.parametrize("gpu_index", indices, ids=[f"gpu{i}" for i in indices], scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markexpr = config.getoption("-m") or ""
    if config.getoption("--run-slow") or "slow" in markexpr:
        keep, dropped = items, []
    else:
        keep = [item for item in items if item.get_closest_marker("slow") is None or not uses_suite(item)]
        dropped = [item for item in items if item.get_closest_marker("slow") is not None and uses_suite(item)]
    for marker in (m for m in OPT_IN_MARKERS if m not in markexpr):
        dropped += [item for item in keep if item.get_closest_marker(marker) is not None and uses_suite(item)]
        keep = [item for item in keep if item.get_closest_marker(marker) is None or not uses_suite(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    if config.stash[OPTIONS].dry_run:
        from gpuperf.wiring.dry_run import skip_what_does_not_measure

        skip_what_does_not_measure(items)


# -- fixtures --------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def gpu_index(request: pytest.FixtureRequest) -> int:
    """The device of this test: the selected one, or this xdist worker's (round-robin over --gpu)."""
    arm(request.config, late=True)  # armed already, unless a test asked for a GPU fixture by getfixturevalue
    from gpuperf.measure.device import NoGpuError

    try:
        indices = selected_gpus(request.config.stash[OPTIONS].gpus)
    except NoGpuError as exc:
        pytest.skip(f"no GPU: {exc}")
    if PINNED in request.config.stash:
        return 0  # the worker's own GPU is the only one CUDA shows it
    return indices[0]


@pytest.fixture
def gpu(request: pytest.FixtureRequest, gpu_index: int) -> Iterator[Any]:
    """The ``GpuContext`` of this test's device, made current; skips with the reason when there is none."""
    from gpuperf.measure.device import NoGpuError

    try:
        ctx = request.config.stash[POOL].context(gpu_index)
    except NoGpuError as exc:
        pytest.skip(f"no GPU: {exc}")
    with ctx.device:
        yield ctx


@pytest.fixture
def stream(request: pytest.FixtureRequest, gpu: Any) -> Iterator[Any]:
    """The device's measuring stream (``GpuPool.stream``: the same one for every test), CuPy's and (where the
    process has imported PyTorch) PyTorch's current stream for the whole test, and drained after it."""
    pool = request.config.stash[POOL]
    test_stream = pool.stream(gpu)
    with pool.current(test_stream):
        yield test_stream
    test_stream.synchronize()


@pytest.fixture
def cublas_handle(request: pytest.FixtureRequest, gpu: Any, stream: Any) -> Iterator[int]:
    """The device's cuBLAS handle bound to the test's stream; its math mode is restored afterwards."""
    with request.config.stash[POOL].bound_cublas_handle(gpu, stream) as handle:
        yield handle


@pytest.fixture
def flush_mode(request: pytest.FixtureRequest) -> str:
    """``cold`` or ``hot``; parametrized from --flush-modes, the id segment names it."""
    return str(getattr(request, "param", request.config.stash[OPTIONS].flush_modes[0]))


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> Any:
    """A NumPy generator seeded from the case id: reproducible per case, different across cases (a dry run's
    draws large operands as constants: ``dry_run.StandInRng``)."""
    import numpy

    from gpuperf.wiring.fixtures import case_id_of

    generator = numpy.random.default_rng(zlib.crc32(case_id_of(request.node.nodeid).encode()))
    if request.config.stash[OPTIONS].dry_run:
        return request.config.stash[POOL].stand_in_rng(generator)  # type: ignore[attr-defined]  # dry_run.DryPool
    return generator


@pytest.fixture
def measure(request: pytest.FixtureRequest, gpu: Any, stream: Any, flush_mode: str) -> Iterator[Measurer]:
    """``measure(fn, work, operands=(), flush=None, label="")`` → ``Measurement`` (see timing.py)."""
    from gpuperf.wiring.fixtures import case_id_of

    state = request.config.stash[STATE]
    entry = None if state.options.update else state.entry(gpu.info.slug, case_id_of(request.node.nodeid))
    measurer = request.config.stash[POOL].measurer(gpu, stream, state.options, flush_mode, entry=entry,
                                                   round_band=state.turns.round_band)
    yield measurer
    measurer.release()


@pytest.fixture
def perf(request: pytest.FixtureRequest, gpu: Any, measure: Any) -> Perf:
    """``perf.check(m)``, ``perf.check_ratio(a, b, name)``, ``perf.note(text)``: gate against the baseline."""
    from gpuperf.store.baseline import BaselineError
    from gpuperf.verdict.check import CaseIdentity
    from gpuperf.wiring.case_ids import family_of, params_of
    from gpuperf.wiring.fixtures import Perf, case_id_of, run_info, run_info_from

    state = request.config.stash[STATE]
    item = request.node
    gpu_of = item.stash.get(GPU_OF, gpu.index)  # --gpu numbering: a pinned worker's CUDA device 0 is its GPU
    case = CaseIdentity(case_id=case_id_of(item.nodeid), nodeid=item.nodeid, family=family_of(item),
                        params=params_of(item), gpu=gpu.info.slug, gpu_index=gpu_of)
    dry = state.options.dry_run
    try:
        run = state.devices.get(gpu_of) or state.remember_device(gpu_of, run_info_from(
            request.config.stash[POOL].describe(gpu.index), state.options.flush_modes) if dry else
            run_info(gpu, state.options.flush_modes))
    except BaselineError as exc:
        pytest.exit(f"gpuperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
    checker = Perf(state=state, case=case, peaks=gpu.peaks, measure=measure, run=run,
                   exporter=None if dry else _benchmark_exporter(request),  # a dry run has no figure to export
                   version_changes=state.version_changes(run.gpu_slug, run.versions), dry=dry)
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
    measured is still reported and recorded) and give the verdict of its checks. A call that could not be measured
    (no kernel, or kernels off the measuring stream) is the case's ``ERROR`` row, and one line, never a figure."""
    if not uses_suite(item):
        return (yield)
    from gpuperf.measure.measurement import UnmeasurableCall

    checker = item.stash.get(PERF, None)
    errors: list[str] = []  # the lines of records that could not be carried: the test fails with them
    try:
        result = yield
    except UnmeasurableCall as exc:
        if checker is None:
            pytest.fail(f"ERROR: {exc}", pytrace=False)
        checker.unmeasurable(exc)
        result = None
    finally:
        if checker is not None:
            records, errors = checker.carried()
            item.user_properties += [(RECORD_PROPERTY, record) for record in records]
            if checker.run is not None and checker.records:
                item.user_properties.append((RUN_PROPERTY, checker.run.to_dict()))
    if checker is not None:
        verdict, message = checker.outcome(errors)
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
    if call.excinfo is not None and call.excinfo.typename == "OutOfMemoryError" and uses_suite(item):
        report.longrepr = (f"shape too large for device memory: {call.excinfo.value}; use a smaller shape "
                           "in perf_tests/cases/*.yaml, mark the case slow, or run it on a larger GPU")
    return report
