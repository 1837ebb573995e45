"""cuBLAS batched GEMM and GEMV.

Batched GEMM: sgemmStridedBatched, pointer-array sgemmBatched, gemmStridedBatchedEx for TF32/FP16/BF16,
and the comparison points as their own cases (a Python loop of single GEMMs, a 4-stream split).
Batched GEMV: strided-batched GEMM with n = 1, strideA = 0 for a shared weight, and the pointer-array
form. Variable-size batches: zero-padding to the largest vs one strided call per size class.
Cases are data: ``perf_tests/cases/batched.yaml``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from gpuperf.suite.accuracy import assert_gemm_close, gemm_errors
from gpuperf.suite.cases import BatchedShape, GemmShape, GemvShape, load_cases
from gpuperf.measure.metrics import Work, gemm_work, gemv_work
from gpuperf.vocabulary import Precision

CASES = load_cases("batched")  # before the importorskip: a broken table fails collection with or without CuPy
cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
# kernels.* import CuPy: after the importorskip
from kernels import cublas
from kernels.blas_args import gemm_path
from kernels.operands import nan_operand, random_operand, to_host

pytestmark = [pytest.mark.batched, pytest.mark.cublas]

CHECKS: dict[str, Any] = CASES["correctness"]
GEMV_CHECKS: dict[str, Any] = CASES["gemv_correctness"]
PERF: dict[str, Any] = CASES["perf"]
VARIABLE: dict[str, Any] = CASES["variable_size"]


def _method(name: str) -> tuple[str, str]:
    """``strided-fp32`` → (``strided``, ``fp32``)."""
    kind, dtype = name.split("-", 1)
    return kind, dtype


def _batched(batch: int, shape: GemmShape) -> BatchedShape:
    return BatchedShape(batch, shape.m, shape.n, shape.k)


def _gemv_as_batched(batch: int, shape: GemvShape) -> BatchedShape:
    """A batch of ``y[m] = A[m×n]·x[n]`` is a batched GEMM ``m×1×n``."""
    return BatchedShape(batch, shape.m, 1, shape.n)


def _operands(rng: np.random.Generator, shape: BatchedShape, dtype: str, *, shared_a: bool = False,
              trans: str = "nn") -> tuple[Any, Any, Any]:
    """Fresh A and B (A 2-D when shared) and a NaN-poisoned C for a batched GEMM."""
    a_item = (shape.k, shape.m) if trans[0] == "t" else (shape.m, shape.k)
    b_item = (shape.n, shape.k) if trans[1] == "t" else (shape.k, shape.n)
    a = random_operand(rng, a_item if shared_a else (shape.batch, *a_item), dtype)
    b = random_operand(rng, (shape.batch, *b_item), dtype)
    return a, b, nan_operand((shape.batch, shape.m, shape.n), dtype)


def _logical(x: np.ndarray, transposed: bool) -> np.ndarray:
    return np.swapaxes(x, -1, -2) if transposed else x


def _batched_work(groups: Sequence[BatchedShape], dtype: str) -> Work:
    """The useful work of a batch of mixed sizes: the sum over its size classes."""
    works = [gemm_work(g.m, g.n, g.k, dtype, batch=g.batch) for g in groups]
    return Work(flops=sum(w.flops for w in works), bytes=sum(w.bytes for w in works), precision=dtype,
                metric=works[0].metric)


# --- batched GEMM correctness --------------------------------------------------------------------------

def _check_batched_gemm(handle: int, rng: np.random.Generator, shape: BatchedShape, method: str, *,
                        trans: str = "nn", alpha: float = 1.0, beta: float = 0.0) -> None:
    kind, dtype = _method(method)
    a, b, c = _operands(rng, shape, dtype, shared_a=kind == "shared", trans=trans)
    c0 = None
    if beta != 0.0:
        c = random_operand(rng, c.shape, dtype)
        c0 = to_host(c, dtype)
    trans_a, trans_b = trans[0] == "t", trans[1] == "t"
    if kind == "pointers":
        pointers = cublas.batch_pointers(a, b, c, dtype=dtype, trans_a=trans_a, trans_b=trans_b)
        cublas.gemm_batched(handle, pointers, alpha=alpha, beta=beta)
    else:
        cublas.gemm_strided_batched(handle, a, b, c, dtype=dtype, alpha=alpha, beta=beta, trans_a=trans_a,
                                    trans_b=trans_b)
    assert_gemm_close(to_host(c, dtype), _logical(to_host(a, dtype), trans_a), _logical(to_host(b, dtype), trans_b),
                      path=gemm_path(dtype).accuracy, alpha=alpha, beta=beta, c0=c0)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", [_batched(b, s) for b in CHECKS["batches"] for s in CHECKS["shapes"]], ids=str)
@pytest.mark.parametrize("method", CHECKS["methods"])
def test_batched_gemm_correct(method: str, shape: BatchedShape, cublas_handle: int,
                              rng: np.random.Generator) -> None:
    _check_batched_gemm(cublas_handle, rng, shape, method, trans="nn")


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["scalars"]["shapes"], ids=lambda s: str(_batched(3, s)))
@pytest.mark.parametrize("scalars", CHECKS["scalars"]["values"], ids=lambda v: f"alpha{v[0]:g}_beta{v[1]:g}")
@pytest.mark.parametrize("method", ["strided-fp32", "pointers-fp32", "shared-fp32"])
def test_batched_gemm_alpha_beta_correct(method: str, scalars: list[float], shape: GemmShape, cublas_handle: int,
                                         rng: np.random.Generator) -> None:
    alpha, beta = scalars
    _check_batched_gemm(cublas_handle, rng, _batched(3, shape), method, alpha=alpha, beta=beta)


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CHECKS["transposes"]["shapes"], ids=lambda s: str(_batched(3, s)))
@pytest.mark.parametrize("trans", CHECKS["transposes"]["trans"])
@pytest.mark.parametrize("method", ["strided-fp32", "pointers-fp32"])
def test_batched_gemm_transposes_correct(method: str, trans: str, shape: GemmShape, cublas_handle: int,
                                         rng: np.random.Generator) -> None:
    _check_batched_gemm(cublas_handle, rng, _batched(3, shape), method, trans=trans)


@pytest.mark.correctness
def test_pointer_arrays_exist_only_for_typed_routines(rng: np.random.Generator, cublas_handle: int) -> None:
    a, b, c = _operands(rng, BatchedShape(2, 4, 4, 4), "fp16")
    with pytest.raises(ValueError, match="sgemmBatched/dgemmBatched: use dtype 'fp32' or 'fp64'"):
        cublas.batch_pointers(a, b, c, dtype="fp16")


# --- batched GEMV correctness --------------------------------------------------------------------------

GEMV_SHAPES = [_gemv_as_batched(b, s) for b in GEMV_CHECKS["batches"] for s in GEMV_CHECKS["shapes"]]

def _gemv_operands(rng: np.random.Generator, shape: BatchedShape, dtype: str, *, shared: bool
                   ) -> tuple[Any, Any, Any]:
    """Column-major A (one per item, or one 2-D shared), vectors x (batch, n) and NaN-poisoned y (batch, m)."""
    a_shape = (shape.m, shape.k) if shared else (shape.batch, shape.m, shape.k)
    a = random_operand(rng, a_shape, dtype, order="F")
    x = random_operand(rng, (shape.batch, shape.k), dtype)
    return a, x, nan_operand((shape.batch, shape.m), dtype)


@pytest.mark.gemv
@pytest.mark.correctness
@pytest.mark.parametrize("shape", GEMV_SHAPES, ids=str)
@pytest.mark.parametrize("op", ["opN"])
@pytest.mark.parametrize("method", GEMV_CHECKS["methods"])
def test_batched_gemv_correct(method: str, op: str, shape: BatchedShape, cublas_handle: int,
                              rng: np.random.Generator) -> None:
    kind, dtype = _method(method)
    a, x, y = _gemv_operands(rng, shape, dtype, shared=kind == "shared")
    if kind == "pointers":
        cublas.gemm_batched(cublas_handle, cublas.gemv_batch_pointers(a, x, y, dtype=dtype))
    else:
        cublas.gemv_batched(cublas_handle, a, x, y, dtype=dtype)
    assert_gemm_close(to_host(y, dtype)[..., None], to_host(a, dtype), to_host(x, dtype)[..., None],
                      path=gemm_path(dtype).accuracy)


@pytest.mark.gemv
@pytest.mark.correctness
@pytest.mark.parametrize("shape", GEMV_SHAPES, ids=str)
def test_batched_gemv_shared_weight_matches_a_loop_of_gemvs(shape: BatchedShape, cublas_handle: int,
                                                            rng: np.random.Generator) -> None:
    """strideA = 0 (one matrix shared by every item, easy to get wrong) against one sgemv per vector: both within the FP32
    bound of the float64 reference, hence within twice that bound of each other."""
    a, x, y = _gemv_operands(rng, shape, "fp32", shared=True)
    looped = nan_operand(y.shape, "fp32")
    cublas.gemv_batched(cublas_handle, a, x, y)
    for item in range(shape.batch):
        cublas.gemv(cublas_handle, a, x[item], looped[item])
    a_host, x_host = to_host(a, "fp32"), to_host(x, "fp32")[..., None]
    batched, single = to_host(y, "fp32")[..., None], to_host(looped, "fp32")[..., None]
    assert_gemm_close(single, a_host, x_host, path="fp32")
    assert_gemm_close(batched, a_host, x_host, path="fp32")
    _, bound = gemm_errors(single, a_host, x_host, path="fp32")
    apart = np.abs(batched - single) > 2 * bound
    assert not apart.any(), f"{int(apart.sum())} of {apart.size} elements differ from the loop by more than 2× the bound"


# --- variable-size batches -----------------------------------------------------------------------------

def _group_operands(rng: np.random.Generator, groups: Sequence[BatchedShape]) -> list[tuple[Any, Any, Any]]:
    return [_operands(rng, group, "fp32") for group in groups]


def _padded(groups: Sequence[BatchedShape], operands: Sequence[tuple[Any, Any, Any]]) -> tuple[Any, Any, Any]:
    """Every item zero-padded to the largest m, n and k: one strided batch whose extra rows, columns and
    inner terms are zeros (so the real part of every product is exact and the rest is 0)."""
    m, n, k = (max(getattr(g, dim) for g in groups) for dim in ("m", "n", "k"))
    total = sum(g.batch for g in groups)
    a_pad = cupy.zeros((total, m, k), dtype=cupy.float32)
    b_pad = cupy.zeros((total, k, n), dtype=cupy.float32)
    lo = 0
    for group, (a, b, _) in zip(groups, operands):
        a_pad[lo:lo + group.batch, :group.m, :group.k] = a
        b_pad[lo:lo + group.batch, :group.k, :group.n] = b
        lo += group.batch
    return a_pad, b_pad, nan_operand((total, m, n), "fp32")


def _grouped(handle: int, *arrays: Any) -> None:
    """One strided call per size class; ``arrays`` is A, B, C of each class in turn."""
    for lo in range(0, len(arrays), 3):
        cublas.gemm_strided_batched(handle, *arrays[lo:lo + 3])


def _check_padded(groups: Sequence[BatchedShape], operands: Sequence[tuple[Any, Any, Any]], c_pad: Any) -> None:
    c_host = to_host(c_pad, "fp32")
    lo = 0
    for group, (a, b, _) in zip(groups, operands):
        items = c_host[lo:lo + group.batch]
        assert_gemm_close(items[:, :group.m, :group.n], to_host(a, "fp32"), to_host(b, "fp32"), path="fp32")
        outside = np.ones(items.shape, dtype=bool)
        outside[:, :group.m, :group.n] = False
        assert (items[outside] == 0).all(), f"padding of the {group} items is not zero"
        lo += group.batch


@pytest.mark.correctness
@pytest.mark.parametrize("method", ["padding", "grouping"])
@pytest.mark.parametrize("case", VARIABLE["correctness"], ids=lambda case: f"fp32-{case['name']}")
def test_variable_size_batch_correct(case: dict[str, Any], method: str, cublas_handle: int,
                                     rng: np.random.Generator) -> None:
    groups = case["groups"]
    operands = _group_operands(rng, groups)
    if method == "padding":
        a_pad, b_pad, c_pad = _padded(groups, operands)
        cublas.gemm_strided_batched(cublas_handle, a_pad, b_pad, c_pad)
        _check_padded(groups, operands, c_pad)
        return
    _grouped(cublas_handle, *itertools.chain.from_iterable(operands))
    for a, b, c in operands:
        assert_gemm_close(to_host(c, "fp32"), to_host(a, "fp32"), to_host(b, "fp32"), path="fp32")


# --- performance: batched GEMM -------------------------------------------------------------------------

@pytest.mark.perf
@pytest.mark.parametrize("shape", PERF["shapes"], ids=str)
@pytest.mark.parametrize("method", PERF["methods"])
def test_batched_gemm_perf(method: str, shape: BatchedShape, cublas_handle: int, rng: np.random.Generator,
                           measure: Any, perf: Any) -> None:
    kind, dtype = _method(method)
    a, b, c = _operands(rng, shape, dtype)
    work = gemm_work(shape.m, shape.n, shape.k, dtype, batch=shape.batch)
    if kind == "pointers":
        pointers = cublas.batch_pointers(a, b, c, dtype=dtype)  # built once, outside the timed calls
        result = measure(lambda: cublas.gemm_batched(cublas_handle, pointers), work, label=f"cuBLAS {method}")
    else:
        result = measure(lambda a, b, c: cublas.gemm_strided_batched(cublas_handle, a, b, c, dtype=dtype), work,
                         operands=(a, b, c), label=f"cuBLAS {method}")
    perf.check(result)


#: The loop case and the stream split run FP32 only: the one path, named in their ids.
LOOP_METHOD = "loop-fp32"
STREAMS_DTYPE = Precision.FP32
STREAMS: int = CASES["streams"]["count"]


def _loop_params() -> Iterator[Any]:
    yield from CASES["loop"]["default"]
    for shape in CASES["loop"]["slow"]:
        yield pytest.param(shape, marks=pytest.mark.slow)


@pytest.mark.perf
@pytest.mark.parametrize("shape", list(_loop_params()), ids=lambda shape: f"{LOOP_METHOD}-{shape}")
def test_batched_loop_perf(shape: BatchedShape, cublas_handle: int, rng: np.random.Generator,
                           measure: Any, perf: Any) -> None:
    """The "loop of cublasSgemm" a batch replaces: one call per item, gated, and the batched call's speed-up over it
    gated as ``#vs_loop``."""
    _, dtype = _method(LOOP_METHOD)
    a, b, c = _operands(rng, shape, dtype)
    work = gemm_work(shape.m, shape.n, shape.k, dtype, batch=shape.batch)
    loop = measure(lambda a, b, c: cublas.gemm_loop(cublas_handle, a, b, c, dtype=dtype), work, operands=(a, b, c),
                   label=f"{shape.batch} × sgemm from a Python loop")
    batched = measure(lambda a, b, c: cublas.gemm_strided_batched(cublas_handle, a, b, c, dtype=dtype), work,
                      operands=(a, b, c), label="sgemmStridedBatched")
    perf.check(loop)
    ratio = perf.check_ratio(batched, loop, name="vs_loop")
    perf.note(f"one sgemmStridedBatched is {ratio.value:.1f}× the loop of {shape.batch} sgemm calls")


@pytest.mark.perf
@pytest.mark.parametrize("shape", CASES["streams"]["shapes"], ids=lambda shape: f"{STREAMS_DTYPE}-{STREAMS}streams-{shape}")
def test_batched_streams_perf(shape: BatchedShape, cublas_handle: int, rng: np.random.Generator, measure: Any,
                              perf: Any) -> None:
    """The multi-stream split: sub-batches on side streams forked from and joined back to the
    test's stream, so its events cover all of them; gated, and against one strided call as ``#vs_single_call``."""
    dtype, streams = STREAMS_DTYPE, STREAMS
    a, b, c = _operands(rng, shape, dtype)
    work = gemm_work(shape.m, shape.n, shape.k, dtype, batch=shape.batch)
    with cublas.stream_split(streams) as split:
        split_m = measure(lambda a, b, c: split.run(a, b, c, dtype=dtype), work, operands=(a, b, c),
                          label=f"sgemmStridedBatched over {streams} streams")
        single = measure(lambda a, b, c: cublas.gemm_strided_batched(cublas_handle, a, b, c, dtype=dtype), work,
                         operands=(a, b, c), label="one sgemmStridedBatched")
        perf.check(split_m)
        ratio = perf.check_ratio(split_m, single, name="vs_single_call")
    perf.note(f"{streams} streams run at {ratio.value:.2f}× one strided call")


# --- performance: batched GEMV -------------------------------------------------------------------------

def _gemv_perf_params() -> Iterator[Any]:
    for table, marks in (("gemv_perf", []), ("gemv_perf_slow", [pytest.mark.slow])):
        for kind, shapes in CASES[table].items():
            for shape in shapes:
                yield pytest.param(kind, shape, id=f"{kind}-fp32-opN-{shape}", marks=marks)


@pytest.mark.gemv
@pytest.mark.perf
@pytest.mark.parametrize(("kind", "shape"), list(_gemv_perf_params()))
def test_batched_gemv_perf(kind: str, shape: BatchedShape, cublas_handle: int, rng: np.random.Generator,
                           measure: Any, perf: Any) -> None:
    """Batched GEMV as strided-batched GEMM with n = 1 (``shared``: strideA = 0), or sgemmBatched with n = 1
    over pointer arrays built once. GB/s counts a shared A once."""
    a, x, y = _gemv_operands(rng, shape, "fp32", shared=kind == "shared")
    work = gemv_work(shape.m, shape.k, "fp32", batch=shape.batch, shared_matrix=kind == "shared")
    if kind == "pointers":
        pointers = cublas.gemv_batch_pointers(a, x, y)
        result = measure(lambda: cublas.gemm_batched(cublas_handle, pointers), work, label="sgemmBatched, n = 1")
    else:
        result = measure(lambda a, x, y: cublas.gemv_batched(cublas_handle, a, x, y), work, operands=(a, x, y),
                         label=f"sgemmStridedBatched, n = 1 ({kind})")
    perf.check(result)


# --- performance: variable-size batches ----------------------------------------------------------------

@pytest.mark.perf
@pytest.mark.parametrize("case", VARIABLE["perf"], ids=lambda case: f"fp32-{case['name']}")
def test_variable_size_batch_perf(case: dict[str, Any], cublas_handle: int, rng: np.random.Generator,
                                  measure: Any, perf: Any) -> None:
    """Grouping (gated) vs padding (gated as ``#padding_vs_grouping``, the ratio of their
    useful TFLOPS); the note names the faster one."""
    groups = case["groups"]
    operands = _group_operands(rng, groups)
    padded = _padded(groups, operands)
    flat = tuple(itertools.chain.from_iterable(operands))
    work = _batched_work(groups, "fp32")
    grouped_m = measure(lambda *arrays: _grouped(cublas_handle, *arrays), work, operands=flat,
                        label=f"{len(groups)} strided calls, one per size class")
    padded_m = measure(lambda a, b, c: cublas.gemm_strided_batched(cublas_handle, a, b, c), work, operands=padded,
                       label="one strided call, zero-padded to the largest size")
    perf.check(grouped_m)
    perf.check_ratio(padded_m, grouped_m, name="padding_vs_grouping")
    times = {"grouping": grouped_m.median_s, "padding": padded_m.median_s}
    faster, slower = sorted(times, key=times.__getitem__)
    perf.note(f"{faster} is faster: {times[slower] / times[faster]:.2f}× less time than {slower}")
