"""Every build of the custom kernels' catalogues against cuBLAS: the selection behind evidence/custom-kernels.md's
tables.

Marker ``builds``: these cases run only with ``-m builds`` (never in the default selection, never gated: no
baseline holds them). Each case is one build on one shape of ``perf_tests/cases/custom_builds.yaml``, measured
by the suite's own ``measure`` and ``perf`` fixtures exactly as ``test_custom.py``'s gated cases are (the same
timer, flush and CUPTI kernel spans), its output checked against a float64 reference on fresh random operands
before anything is timed. The cuBLAS reference of each shape is a case of its own, measured once in the run;
every build on that shape takes its ratio against that one measurement, so a table's ratios share their
denominator. Each build's row carries its kernel's resources in ``extra["build"]`` (registers, shared memory,
spills, threads and blocks per SM as the driver reports them), which ``tools/evidence/custom_builds.py`` renders.

Every module the selection needs is compiled up front, in parallel, so a case's time is its measurement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from gpuperf.measure.measurement import Measurement
from gpuperf.measure.metrics import gemm_work
from gpuperf.suite.accuracy import assert_gemm_close
from gpuperf.suite.cases import BatchedShape, GemmShape, load_cases
from gpuperf.vocabulary import Precision
from kernels import custom_plan

CASES = load_cases("custom_builds")  # before the importorskip: a broken table fails collection with or without CuPy
KERNELS: dict[str, dict[str, Any]] = load_cases("custom")["kernels"]
cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
# kernels.* import CuPy: after the importorskip
from kernels import cublas, custom  # noqa: E402
from kernels.operands import nan_operand, random_operand, to_host  # noqa: E402

pytestmark = [pytest.mark.builds, pytest.mark.custom]

#: The catalogue of each kernel that has one, and the build the suite runs.
CATALOGUES: dict[str, tuple[dict[str, Any], str]] = {
    "optimized": (custom_plan.SGEMM_CONFIGS, custom_plan.SGEMM_DEFAULT),
    "mma": (custom_plan.MMA_CONFIGS, custom_plan.MMA_DEFAULT),
}


@dataclass(frozen=True)
class Build:
    """One build on one shape: the launcher kind and its options, its name in the tables, and whether the
    suite's gated case runs it."""

    kind: str  # a kernels.custom launcher kind
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    default: bool = False

    def launcher(self) -> custom.Launcher:
        return custom.launcher(self.kind, **self.options)


def _gemm_builds(kernel: str) -> list[Build]:
    spec = KERNELS.get(kernel)
    if spec is None:
        raise pytest.UsageError(f"perf_tests/cases/custom_builds.yaml: kernel {kernel!r} is not one of "
                                f"perf_tests/cases/custom.yaml's kernels ({', '.join(KERNELS)})")
    planner = spec["planner"]
    if planner not in CATALOGUES:
        return [Build(planner, kernel, default=True)]
    table, default = CATALOGUES[planner]
    return [Build(planner, name, {"config": name}, name == default) for name in table]


def _default_batched_name(shape: BatchedShape) -> str:
    path = custom_plan.batched_path(shape.m, shape.n, shape.k, shape.batch)
    if path == "tiled":
        return f"tiled {custom_plan.BATCHED_TILED_DEFAULT}"
    classes = {c.name: c for c in custom_plan.REG_CLASSES}
    return f"{path} mats={classes[path].mats}" if path in classes else path


def _tiled_builds(wanted: Any) -> list[str]:
    table = custom_plan.SGEMM_CONFIGS
    if wanted == "all":
        return [name for name, build in table.items() if build.has_batched_kernel]
    unknown = [name for name in wanted if name not in table]
    if unknown:
        raise pytest.UsageError(f"perf_tests/cases/custom_builds.yaml: tiled builds {unknown} are not in "
                                f"kernels/custom_builds.yaml's sgemm catalogue")
    return list(wanted)


def _batched_builds(entry: dict[str, Any]) -> list[Build]:
    shape: BatchedShape = entry["shape"]
    default = Build("batched", _default_batched_name(shape), default=True)
    builds = [default]
    for name in _tiled_builds(entry.get("tiled", [])):
        build = Build("batched", f"tiled {name}", {"path": "tiled", "config": name})
        if build.name != default.name:
            builds.append(build)
    for forced in entry.get("paths", []):
        mats = forced.get("mats")
        name = forced["path"] + ("" if mats is None else f" mats={mats}")
        if name != default.name:
            options = {"path": forced["path"], **({} if mats is None else {"mats": int(mats)})}
            builds.append(Build("batched", name, options))
    return builds


def _build_id(build: Build) -> str:
    return build.name.replace(" ", "-").replace("=", "")


def _gemm_params() -> list[Any]:
    return [pytest.param(entry["kernel"], entry["shape"], build, id=f"{entry['kernel']}-{entry['shape']}-"
                         f"{_build_id(build)}")
            for entry in CASES["gemm"] for build in _gemm_builds(entry["kernel"])]


def _batched_params() -> list[Any]:
    return [pytest.param(entry["shape"], build, id=f"{entry['shape']}-{_build_id(build)}")
            for entry in CASES["batched"] for build in _batched_builds(entry)]


def _reference_params() -> list[Any]:
    gemm = sorted({(KERNELS[e["kernel"]]["dtype"], e["shape"]) for e in CASES["gemm"]}, key=str)
    batched = [(Precision.FP32, e["shape"]) for e in CASES["batched"]]
    return [pytest.param(dtype, shape, id=f"{dtype}-{shape}") for dtype, shape in [*gemm, *batched]]


# --- compiling every build once, in parallel -------------------------------------------------------------

def _plans(build: Build, operands: tuple[Any, Any, Any]) -> list[custom.LaunchPlan]:
    planned = custom_plan.planner_for(build.kind)(*operands, **build.options)
    return planned if isinstance(planned, list) else [planned]


def _unavailable(kernel: str) -> str | None:
    """Why this GPU cannot run a kernel: WMMA needs the toolkit's <mma.h>, the mma.sync kernel sm_80 or newer."""
    planner = KERNELS[kernel]["planner"]
    if planner == "wmma":
        return custom.wmma_unavailable_reason()
    if planner == "mma":
        return custom.mma_unavailable_reason()
    return None


@pytest.fixture
def prebuilt(stream: Any) -> int:
    """Compile every module of the selection's builds before the first case is timed, once per run (a test-scoped
    fixture, since it needs the test-scoped measuring stream; ``_prebuild_all`` is cached)."""
    return _prebuild_all()


@functools.cache
def _prebuild_all() -> int:
    """Each build is planned on small operands of its own kind: the plan's source and defines, which name the
    module, do not depend on size."""
    rng = np.random.default_rng()
    plans: list[custom.LaunchPlan] = []
    for entry in CASES["gemm"]:
        if _unavailable(entry["kernel"]) is None:
            small = _operands(KERNELS[entry["kernel"]]["dtype"], GemmShape(8, 8, 8), rng)
            plans += [plan for build in _gemm_builds(entry["kernel"]) for plan in _plans(build, small)]
    for entry in CASES["batched"]:
        shape: BatchedShape = entry["shape"]
        small = _operands(Precision.FP32, BatchedShape(min(shape.batch, 4), shape.m, shape.n, shape.k), rng)
        plans += [plan for build in _batched_builds(entry) for plan in _plans(build, small)]
    return custom.prebuild(plans)


# --- the cuBLAS references: one measurement per shape, shared by every build on it ----------------------------

#: The reference measurement of each (GPU, dtype, shape) in this run.
_REFERENCES: dict[tuple[int, str, str], Measurement] = {}


def _reference_call(dtype: str, shape: GemmShape | BatchedShape, handle: int) -> Callable[..., None]:
    if isinstance(shape, BatchedShape):
        return lambda a, b, c: cublas.gemm_strided_batched(handle, a, b, c, dtype=dtype)
    return lambda a, b, c: cublas.gemm(handle, a, b, c, dtype=dtype)


def _operands(dtype: str, shape: GemmShape | BatchedShape, rng: np.random.Generator) -> tuple[Any, Any, Any]:
    batch = (shape.batch,) if isinstance(shape, BatchedShape) else ()
    return (random_operand(rng, (*batch, shape.m, shape.k), dtype), random_operand(rng, (*batch, shape.k, shape.n),
            dtype), nan_operand((*batch, shape.m, shape.n), dtype))


def _work(dtype: str, shape: GemmShape | BatchedShape) -> Any:
    batch = shape.batch if isinstance(shape, BatchedShape) else 1
    return gemm_work(shape.m, shape.n, shape.k, dtype, batch=batch)


def _reference(dtype: str, shape: GemmShape | BatchedShape, gpu: Any, handle: int, rng: np.random.Generator,
               measure: Any) -> Measurement:
    key = (gpu.index, dtype, str(shape))
    if key not in _REFERENCES:
        label = "cuBLAS sgemmStridedBatched" if isinstance(shape, BatchedShape) else f"cuBLAS {dtype}"
        _REFERENCES[key] = measure(_reference_call(dtype, shape, handle), _work(dtype, shape),
                                   operands=_operands(dtype, shape, rng), label=label)
    return _REFERENCES[key]


@pytest.mark.perf
@pytest.mark.gemm
@pytest.mark.parametrize(("dtype", "shape"), _reference_params())
def test_cublas_reference(dtype: str, shape: GemmShape | BatchedShape, gpu: Any, cublas_handle: int,
                          rng: np.random.Generator, measure: Any, perf: Any) -> None:
    reference = _reference(dtype, shape, gpu, cublas_handle, rng, measure)
    perf.attach(reference={"dtype": dtype, "shape": str(shape)})
    perf.check(reference)


# --- the builds ----------------------------------------------------------------------------------------------

def _edges(x: Any, count: int) -> Any:
    """The first and last ``count`` items along axis 0, on the device: both edges of the grid of tiles."""
    return x if x.shape[0] <= 2 * count else cupy.concatenate([x[:count], x[-count:]])


def _time_build(build: Build, case: str, dtype: str, shape: GemmShape | BatchedShape, reference: Measurement,
                rng: np.random.Generator, measure: Any, perf: Any) -> None:
    """Check the build's output against float64, then time it and take its ratio to ``reference``."""
    a, b, c = _operands(dtype, shape, rng)
    run = build.launcher()
    run(a, b, c)  # compiled already (``prebuilt``); its output is checked before anything is timed
    edge = 16 if isinstance(shape, BatchedShape) else 32
    host_b = to_host(_edges(b, edge), dtype) if isinstance(shape, BatchedShape) else to_host(b, dtype)
    assert_gemm_close(to_host(_edges(c, edge), dtype), to_host(_edges(a, edge), dtype), host_b, path=dtype)

    mine = measure(run, _work(dtype, shape), operands=(a, b, c), label=f"custom {build.kind} {build.name}")
    resources = run.resources
    assert resources is not None
    perf.attach(build={"case": case, "build": build.name, "default": build.default, "kernel": resources.kernel,
                       "registers": resources.num_regs, "shared_bytes": resources.shared_bytes,
                       "spill_bytes": resources.local_bytes, "threads": resources.block_threads,
                       "blocks_per_sm": resources.blocks_per_sm})
    perf.note(resources.note())
    perf.check(mine)
    perf.check_ratio(mine, reference, name="vs_cublas")


@pytest.mark.perf
@pytest.mark.gemm
@pytest.mark.parametrize(("kernel", "shape", "build"), _gemm_params())
def test_custom_build(kernel: str, shape: GemmShape, build: Build, prebuilt: int, gpu: Any, cublas_handle: int,
                      rng: np.random.Generator, measure: Any, perf: Any) -> None:
    reason = _unavailable(kernel)
    if reason:
        pytest.skip(reason)
    dtype = KERNELS[kernel]["dtype"]
    reference = _reference(dtype, shape, gpu, cublas_handle, rng, measure)
    _time_build(build, f"{kernel} {shape}", dtype, shape, reference, rng, measure, perf)


@pytest.mark.perf
@pytest.mark.batched
@pytest.mark.parametrize(("shape", "build"), _batched_params())
def test_custom_batched_build(shape: BatchedShape, build: Build, prebuilt: int, gpu: Any, cublas_handle: int,
                              rng: np.random.Generator, measure: Any, perf: Any) -> None:
    reference = _reference(Precision.FP32, shape, gpu, cublas_handle, rng, measure)
    _time_build(build, f"batched {shape}", Precision.FP32, shape, reference, rng, measure, perf)
