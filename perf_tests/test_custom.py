"""Custom CUDA kernels: naive, tiled, optimised SGEMM, WMMA and mma.sync HGEMM, and the custom
batched SGEMM (register-tiled, small and tiled kernels).

Correctness: irregular shapes (non-multiples of every tile size), padded leading dimensions whose
padding holds NaN, alpha ≠ 1 and beta ≠ 0, beta = 0 on a NaN-poisoned C; fresh random operands per case
and a float64 reference from the stored operands (``gpuperf.suite.accuracy``). The WMMA and mma.sync kernels
store FP16 and accumulate in FP32, so they are held to the ``fp16`` bound (FP32 accumulation plus one FP16
rounding).

Performance: TFLOPS of each kernel and its ratio to cuBLAS on the same shape and dtype (``vs_cublas``),
both gated; the kernel's resource use (registers, shared memory, spills, occupancy) is noted on the row.
Before timing, every perf case checks sampled rows (or items) of its own output against float64.

``GPUPERF_TILED_TILE=8`` builds the ``tiled`` cases with 8×8 tiles (a genuinely slower kernel under the
same case id): the sensitivity demo, which the gate must report as a regression of ``tiled``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from gpuperf.suite.accuracy import assert_gemm_close
from gpuperf.suite.cases import BatchedShape, GemmShape, load_cases
from gpuperf.measure.metrics import gemm_work

CASES = load_cases("custom")  # before the importorskip: a broken table fails collection with or without CuPy
cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
# kernels.* import CuPy: after the importorskip
from kernels import cublas, custom
from kernels.operands import nan_operand, random_operand, to_host

pytestmark = [pytest.mark.custom, pytest.mark.gemm]

KERNELS: dict[str, dict[str, Any]] = CASES["kernels"]
CHECKS: dict[str, Any] = CASES["correctness"]
VARIANTS: dict[str, dict[str, Any]] = CHECKS["variants"]
BATCHED: dict[str, Any] = CASES["batched_correctness"]

#: The sensitivity demo's knob: the tile of the ``tiled`` cases (8, 16 or 32).
TILED_TILE = int(os.environ.get("GPUPERF_TILED_TILE", "16"))


def _options(kernel: str) -> dict[str, Any]:
    """The planner keywords of a kernel id (``tile`` for the tiled kernels)."""
    spec = KERNELS[kernel]
    if spec["planner"] != "tiled":
        return {}
    return {"tile": int(spec.get("tile", TILED_TILE))}


def _unavailable(kernel: str) -> str | None:
    """Why ``kernel`` cannot run here, else ``None``: WMMA needs the toolkit's <mma.h>; the mma.sync kernel needs
    sm_80 or newer."""
    planner = KERNELS[kernel]["planner"]
    if planner == "wmma":
        return custom.wmma_unavailable_reason()
    if planner == "mma":
        return custom.mma_unavailable_reason()
    return None


def _skip_unavailable(kernel: str) -> None:
    reason = _unavailable(kernel)
    if reason:
        pytest.skip(reason)


#: The compile ``prebuild_early`` started in the background, which this file's first test waits for.
_EARLY: list[Future[int]] = []


def prebuild_early() -> Future[int]:
    """Start ``_prebuild_all`` in a background thread (``perf_tests/conftest.py`` calls it once the session has
    collected this file's tests, and holds every measurement until it is done), so the compile overlaps the
    correctness tests before the first measurement: on a fresh H200 host it took 6.5 s of a gate's 45 s."""
    if not _EARLY:
        _EARLY.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="prebuild").submit(_prebuild_all))
    return _EARLY[0]


@pytest.fixture(autouse=True)
def _modules_built(stream: Any) -> None:
    """Every module this file's kernels come from is compiled before its first test, the modules in parallel
    (``custom.prebuild``): with an empty compile cache (a fresh machine), compiling them one after another as each
    kernel first ran took 14 s of a gate on the H200. Started early in the background where the session allows
    (``prebuild_early``), waited for here; test-scoped because it needs the measuring stream's device;
    ``_prebuild_all`` runs once."""
    if _EARLY:
        with contextlib.suppress(Exception):  # an early build that failed is built again below, raising here
            _EARLY[0].result()
    _prebuild_all()


@functools.cache
def _prebuild_all() -> int:
    """A plan of every kernel on small operands and of the batched kernel at each shape's matrix sizes: a plan's
    source and defines, which name its module, do not depend on the sizes of a GEMM or on the batch."""
    rng = np.random.default_rng()
    plans: list[custom.LaunchPlan] = []
    for kernel, spec in KERNELS.items():
        if _unavailable(kernel) is None:
            dtype = spec["dtype"]
            a, b = random_operand(rng, (8, 8), dtype), random_operand(rng, (8, 8), dtype)
            plans.append(custom.GEMM_PLANNERS[spec["planner"]](a, b, nan_operand((8, 8), dtype), **_options(kernel)))
    for shape in {(s.m, s.n, s.k) for s in (*BATCHED["shapes"], *CASES["batched_perf"])}:
        m, n, k = shape
        a, b = random_operand(rng, (2, m, k), "fp32"), random_operand(rng, (2, k, n), "fp32")
        plans += custom.plan_batched(a, b, nan_operand((2, m, n), "fp32"))
    return custom.prebuild(plans)


def _pad(variant: dict[str, Any], cols: int) -> int:
    """Elements added to the leading dimension of an operand with ``cols`` columns."""
    pad = variant["pad"]
    if pad == "aligned":
        return -(-cols // 8) * 8 + 8 - cols
    return int(pad)


def _output(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, pad: int, beta: float
            ) -> tuple[Any, np.ndarray | None]:
    """C and, when beta ≠ 0, its initial values; NaN everywhere when beta = 0 (every element must be written)."""
    if beta == 0.0:
        return nan_operand(shape, dtype, pad=pad), None
    c = random_operand(rng, shape, dtype, pad=pad)
    return c, to_host(c, dtype)


def _assert_padding_untouched(c: Any, dtype: str) -> None:
    """C's buffer holds NaN outside C: a write past the logical matrix shows up as a number there."""
    if c.base is None:
        return
    whole = to_host(c.base, dtype)
    numbers = whole.size - int(np.isnan(whole).sum())
    assert numbers == c.size, f"C's buffer holds {numbers} numbers but C has {c.size}: its padding was written"


# --- correctness ---------------------------------------------------------------------------------------

@pytest.mark.correctness
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("shape", CHECKS["shapes"], ids=str)
@pytest.mark.parametrize("kernel", CHECKS["kernels"])
def test_custom_gemm_correct(kernel: str, shape: GemmShape, variant: str, stream: Any,
                             rng: np.random.Generator) -> None:
    _skip_unavailable(kernel)
    spec, v = KERNELS[kernel], VARIANTS[variant]
    dtype, alpha, beta = spec["dtype"], float(v["alpha"]), float(v["beta"])
    a = random_operand(rng, (shape.m, shape.k), dtype, pad=_pad(v, shape.k))
    b = random_operand(rng, (shape.k, shape.n), dtype, pad=_pad(v, shape.n))
    c, c0 = _output(rng, (shape.m, shape.n), dtype, _pad(v, shape.n), beta)
    plan = custom.GEMM_PLANNERS[spec["planner"]](a, b, c, alpha=alpha, beta=beta, **_options(kernel))
    custom.launch(plan)
    assert_gemm_close(to_host(c, dtype), to_host(a, dtype), to_host(b, dtype), path=spec["dtype"],
                      alpha=alpha, beta=beta, c0=c0)
    _assert_padding_untouched(c, dtype)


@dataclass(frozen=True)
class _BatchOperand:
    """One operand of a batched check: what the kernel takes, the stack behind it, its host values per
    item in batch order, and how batch order maps onto the stack (``order[i]``: the stack item at i)."""

    arg: Any
    stack: Any
    host: np.ndarray
    order: np.ndarray | None = None
    c0: np.ndarray | None = None


def _batch_operand(rng: np.random.Generator, form: str, role: str, shape: tuple[int, int, int], pad: int,
                   beta: float = 1.0) -> _BatchOperand:
    """``form``: strided (a 3-D stack), pointers (a pointer array over the stack's items in a shuffled
    order) or shared-a (A is one matrix for every item: batch stride 0)."""
    batch, rows, cols = shape
    if role == "A" and form == "shared-a":
        one = random_operand(rng, (rows, cols), "fp32", pad=pad)
        return _BatchOperand(cupy.broadcast_to(one, shape), one, np.broadcast_to(to_host(one, "fp32"), shape))
    if role == "C":
        stack, c0 = _output(rng, shape, "fp32", pad, beta)
    else:
        stack, c0 = random_operand(rng, shape, "fp32", pad=pad), None
    host = to_host(stack, "fp32")
    if form != "pointers":
        return _BatchOperand(stack, stack, host, None, c0)
    order = rng.permutation(batch)
    arg = custom.stack_pointer_batch(stack, order)
    return _BatchOperand(arg, stack, host[order], order, None if c0 is None else c0[order])


@pytest.mark.correctness
@pytest.mark.batched
@pytest.mark.parametrize("shape", BATCHED["shapes"], ids=str)
@pytest.mark.parametrize("variant", BATCHED["variants"])
@pytest.mark.parametrize("form", BATCHED["forms"])
def test_custom_batched_correct(form: str, variant: str, shape: BatchedShape, stream: Any,
                                rng: np.random.Generator) -> None:
    v = VARIANTS[variant]
    alpha, beta = float(v["alpha"]), float(v["beta"])
    a = _batch_operand(rng, form, "A", (shape.batch, shape.m, shape.k), _pad(v, shape.k))
    b = _batch_operand(rng, form, "B", (shape.batch, shape.k, shape.n), _pad(v, shape.n))
    c = _batch_operand(rng, form, "C", (shape.batch, shape.m, shape.n), _pad(v, shape.n), beta)
    custom.batched_sgemm(a.arg, b.arg, c.arg, alpha=alpha, beta=beta)
    out = to_host(c.stack, "fp32")
    if c.order is not None:
        out = out[c.order]
    assert_gemm_close(out, a.host, b.host, path="fp32", alpha=alpha, beta=beta, c0=c.c0)
    _assert_padding_untouched(c.stack, "fp32")


@pytest.mark.correctness
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_custom_kernel_builds_for_this_gpu(kernel: str, gpu: Any, stream: Any, rng: np.random.Generator) -> None:
    """Compiled for the device's own architecture (SASS, not PTX JIT), launchable at its block size."""
    _skip_unavailable(kernel)
    dtype = KERNELS[kernel]["dtype"]
    a, b = random_operand(rng, (4, 4), dtype), random_operand(rng, (4, 4), dtype)
    plan = custom.GEMM_PLANNERS[KERNELS[kernel]["planner"]](a, b, nan_operand((4, 4), dtype), **_options(kernel))
    res = custom.resources(plan)
    major, minor = gpu.info.cc
    assert res.binary_version == 10 * major + minor, f"{res.kernel} holds SASS for {res.binary_version}, not {gpu.info.cc}"
    threads = plan.block[0] * plan.block[1] * plan.block[2]
    assert res.max_threads_per_block >= threads, f"{res.note()} cannot launch {threads} threads per block"


@pytest.mark.correctness
@pytest.mark.batched
@pytest.mark.parametrize("shape", [BatchedShape(2, 4, 4, 4), BatchedShape(2, 4, 4, 65), BatchedShape(2, 32, 32, 32),
                                   BatchedShape(2, 64, 64, 64)], ids=str)
def test_custom_batched_kernel_builds_for_this_gpu(shape: BatchedShape, gpu: Any, stream: Any,
                                                   rng: np.random.Generator) -> None:
    """The small, tiled and both register-tiled batched kernels, as ``test_custom_kernel_builds_for_this_gpu``."""
    a = random_operand(rng, (shape.batch, shape.m, shape.k), "fp32")
    b = random_operand(rng, (shape.batch, shape.k, shape.n), "fp32")
    plan = custom.plan_batched(a, b, nan_operand((shape.batch, shape.m, shape.n), "fp32"))[0]
    res = custom.resources(plan)
    major, minor = gpu.info.cc
    assert res.binary_version == 10 * major + minor, f"{res.kernel} holds SASS for {res.binary_version}, not {gpu.info.cc}"
    assert res.max_threads_per_block >= plan.block[0], f"{res.note()} cannot launch {plan.block[0]} threads per block"


def test_pointer_batch_rejects_mixed_shapes(stream: Any, rng: np.random.Generator) -> None:
    mats = [random_operand(rng, (4, 3), "fp32"), random_operand(rng, (4, 5), "fp32")]
    with pytest.raises(custom.KernelArgumentError, match=r"one shape and ld per batch"):
        custom.pointer_batch(mats)


def test_custom_kernels_reject_a_wrong_dtype(stream: Any, rng: np.random.Generator) -> None:
    a, b, c = (random_operand(rng, s, "fp32") for s in ((4, 3), (3, 2), (4, 2)))
    with pytest.raises(custom.KernelArgumentError, match=r"A: dtype float32 but this kernel takes float16"):
        custom.wmma_hgemm(a, b, c)


# --- performance ---------------------------------------------------------------------------------------

def _perf_params() -> list[Any]:
    return [pytest.param(case["kernel"], case["shape"], id=f"{case['kernel']}-{case['shape']}",
                         marks=[pytest.mark.slow] if case.get("slow") else [])
            for case in CASES["perf"]]


def _edges(x: Any, count: int) -> Any:
    """The first and last ``count`` items along axis 0, on the device: both edges of the grid of tiles."""
    return x if x.shape[0] <= 2 * count else cupy.concatenate([x[:count], x[-count:]])


@pytest.mark.perf
@pytest.mark.parametrize(("kernel", "shape"), _perf_params())
def test_custom_perf(kernel: str, shape: GemmShape, cublas_handle: int, rng: np.random.Generator, measure: Any,
                     perf: Any) -> None:
    _skip_unavailable(kernel)
    spec = KERNELS[kernel]
    dtype = spec["dtype"]
    a, b = random_operand(rng, (shape.m, shape.k), dtype), random_operand(rng, (shape.k, shape.n), dtype)
    c = nan_operand((shape.m, shape.n), dtype)
    run = custom.launcher(spec["planner"], **_options(kernel))
    run(a, b, c)  # compiles; its output is checked before anything is timed
    assert_gemm_close(to_host(_edges(c, 32), dtype), to_host(_edges(a, 32), dtype), to_host(b, dtype),
                      path=spec["dtype"])

    work = gemm_work(shape.m, shape.n, shape.k, dtype)
    mine = measure(run, work, operands=(a, b, c), label=f"custom {kernel}")
    reference = measure(lambda a, b, c: cublas.gemm(cublas_handle, a, b, c, dtype=dtype), work, operands=(a, b, c),
                        label=f"cuBLAS {dtype}")
    assert run.resources is not None
    options = "".join(f" {k}={v}" for k, v in _options(kernel).items())
    perf.note(run.resources.note() + options)
    perf.check(mine)
    ratio = perf.check_ratio(mine, reference, name="vs_cublas")
    perf.note(f"{ratio.value:.2f}× cuBLAS {dtype}")


@pytest.mark.perf
@pytest.mark.batched
@pytest.mark.parametrize("shape", CASES["batched_perf"], ids=str)
def test_custom_batched_perf(shape: BatchedShape, cublas_handle: int, rng: np.random.Generator, measure: Any,
                             perf: Any) -> None:
    a = random_operand(rng, (shape.batch, shape.m, shape.k), "fp32")
    b = random_operand(rng, (shape.batch, shape.k, shape.n), "fp32")
    c = nan_operand((shape.batch, shape.m, shape.n), "fp32")
    run = custom.launcher("batched")
    run(a, b, c)
    assert_gemm_close(to_host(_edges(c, 16), "fp32"), to_host(_edges(a, 16), "fp32"), to_host(_edges(b, 16), "fp32"),
                      path="fp32")

    work = gemm_work(shape.m, shape.n, shape.k, "fp32", batch=shape.batch)
    mine = measure(run, work, operands=(a, b, c), label="custom batched")
    reference = measure(lambda a, b, c: cublas.gemm_strided_batched(cublas_handle, a, b, c, dtype="fp32"), work,
                        operands=(a, b, c), label="cuBLAS sgemmStridedBatched")
    assert run.resources is not None
    perf.note(run.resources.note())
    perf.check(mine)
    ratio = perf.check_ratio(mine, reference, name="vs_cublas")
    perf.note(f"{ratio.value:.2f}× cuBLAS sgemmStridedBatched")
