"""The cross-checks as GPU cases: two measurements that must relate in a
known way, judged by the cross rules of ``gpuperf.verdict.anomaly``.

Normal cases measure both sides on the suite's normal path and assert the rule stays quiet; their ratio is
gated like any other number (``perf.check_ratio``), so a driver that quietly loses the TF32 speed-up shows
as a regression too. Trigger cases (marker ``trigger``, run only with ``-m trigger``) build the mistake each
rule exists to catch — a forgotten math mode, a flush that never happens — and assert the rule fires.
They never call ``perf.check``: an anomaly is their expected outcome, not a failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from gpuperf.verdict import anomaly
from gpuperf.suite.cases import GemmShape, GemvShape
from gpuperf.measure.measurement import Measurement
from gpuperf.measure.metrics import gemm_work, gemv_work, tflops
from gpuperf.vocabulary import Flush, Precision

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
from kernels import cublas, operands  # noqa: E402  (after the importorskip)

#: TF32 vs FP32 is judged at a large square size, where both paths are compute-bound.
TF32_SHAPES: list[GemmShape] = [GemmShape(8192, 8192, 8192)]
#: The two ways of asking for TF32: way → (kernels.cublas dtype, handle math mode, what the message calls it).
TF32_WAYS: dict[str, tuple[str, str | None, str]] = {
    "mathmode": ("fp32", "tf32", "sgemm with CUBLAS_TF32_TENSOR_OP_MATH"),
    "gemmex": ("tf32", None, "gemmEx with COMPUTE_32F_FAST_TF32"),
}
#: sgemm vs gemmEx(COMPUTE_32F): one square shape and one with no power of two.
PATH_SHAPES: list[GemmShape] = [GemmShape(4096, 4096, 4096), GemmShape(1000, 3000, 2000)]
#: SGEMV working sets far larger than any L2 (4 GiB) and far smaller (4 MiB; the H200's L2 is 60 MiB).
LARGE_GEMV, SMALL_GEMV = GemvShape(32768, 32768), GemvShape(1024, 1024)
FLUSH_SHAPES: list[GemvShape] = [LARGE_GEMV, SMALL_GEMV]

#: Triggers. No hot cuBLAS SGEMV that fits in the H200's L2 reads faster than device memory: measured on
#: the H200 (2026-11-29), single SGEMVs from 1024² to 3072² reached at most 3.3 TB/s hot and L2-resident
#: batches (32×512², 128×256², 12×1024²) at most 3.6 TB/s, against a 4.8 TB/s memory peak. The cache
#: effect that does produce an impossible number is re-reading L2-resident data while counting it as
#: fresh: the shared-weight batch below.
#: A batch of GEMVs sharing one L2-resident weight (strideA = 0), bytes counted as if each read its own.
SHARED_WEIGHT_GEMV: tuple[GemvShape, int] = (GemvShape(1024, 1024), 256)
#: A GEMM for the triggers that mislabel a path (quick, and compute-bound on every path).
TRIGGER_GEMM = GemmShape(4096, 4096, 4096)
#: The flush-ineffective trigger's working set, as a multiple of the L2 (above FLUSH_LARGE_FACTOR, but small
#: enough that a flush inside the timed region is a large share of the call).
INEFFECTIVE_FLUSH_L2_MULTIPLE = 8.5

GemmFn = Callable[[Any, Any, Any], object]


def _gemm_operands(rng: np.random.Generator, shape: GemmShape, dtype: str = "fp32") -> tuple[Any, Any, Any]:
    return (operands.random_operand(rng, (shape.m, shape.k), dtype),
            operands.random_operand(rng, (shape.k, shape.n), dtype),
            operands.nan_operand((shape.m, shape.n), dtype))


def _gemv_operands(rng: np.random.Generator, shape: GemvShape) -> tuple[Any, Any, Any]:
    return (operands.random_operand(rng, (shape.m, shape.n), "fp32"),
            operands.random_operand(rng, (shape.n,), "fp32"),
            operands.nan_operand((shape.m,), "fp32"))


def _gemm(handle: int, dtype: str) -> GemmFn:
    return lambda a, b, c: cublas.gemm(handle, a, b, c, dtype=dtype)


def _gemm_ex(handle: int, compute: str) -> GemmFn:
    return lambda a, b, c: cublas.gemm_ex(handle, a, b, c, compute=compute)


def _sgemv(handle: int) -> GemmFn:
    return lambda a, x, y: cublas.gemv(handle, a, x, y, dtype="fp32")


def _in_mode(handle: int, mode: str | None, fn: GemmFn) -> GemmFn:
    """``fn`` under the handle's math mode on every call (restored after), so a re-measurement (``perf``
    confirms a suspected regression after the test body, outside any block) runs it the same way."""
    if mode is None:
        return fn

    def call(a: Any, b: Any, c: Any) -> None:
        with cublas.math_mode(handle, mode):
            fn(a, b, c)

    return call


def _shown(measurement: Measurement) -> str:
    return f"{measurement.value:.1f} {measurement.work.metric} ({measurement.flush}, {measurement.method})"


def _flush_gap(cold: Measurement, hot: Measurement) -> float:
    return (cold.median_s - hot.median_s) / hot.median_s


def _l2_multiple(work_bytes: float, l2_bytes: int) -> float:
    return work_bytes / l2_bytes


# -- the normal path: every rule quiet -------------------------------------------------------------------

@pytest.mark.crosscheck
@pytest.mark.gemm
@pytest.mark.cublas
@pytest.mark.perf
@pytest.mark.parametrize("way", list(TF32_WAYS))
@pytest.mark.parametrize("shape", TF32_SHAPES, ids=str)
def test_tf32_faster_than_fp32(shape: GemmShape, way: str, cublas_handle: int, rng: np.random.Generator,
                               measure: Any, perf: Any) -> None:
    """TF32 must sit clearly above FP32 (a few per cent apart means TF32 never engaged), for both ways of asking for it."""
    dtype, mode, how = TF32_WAYS[way]
    a, b, c = _gemm_operands(rng, shape)
    fp32 = measure(_gemm(cublas_handle, "fp32"), gemm_work(shape.m, shape.n, shape.k, "fp32"),
                   operands=(a, b, c), label="sgemm")
    tf32 = measure(_in_mode(cublas_handle, mode, _gemm(cublas_handle, dtype)),
                   gemm_work(shape.m, shape.n, shape.k, "tf32"), operands=(a, b, c), label=how)
    found = anomaly.tf32_inactive(fp32.value, tf32.value, how)
    perf.check_ratio(tf32, fp32, name="tf32_over_fp32")
    perf.note(f"FP32 sgemm {_shown(fp32)}; TF32 via {how} {_shown(tf32)}: {tf32.value / fp32.value:.2f}× "
              f"(rule: ≥ {anomaly.TF32_MIN_SPEEDUP}×)")
    assert found is None, str(found)


@pytest.mark.crosscheck
@pytest.mark.gemm
@pytest.mark.cublas
@pytest.mark.perf
@pytest.mark.parametrize("shape", PATH_SHAPES, ids=lambda shape: f"{Precision.FP32}-{shape}")
def test_sgemm_matches_gemmex(shape: GemmShape, cublas_handle: int, rng: np.random.Generator, measure: Any,
                              perf: Any) -> None:
    """Sgemm and gemmEx(COMPUTE_32F) are the same math; more than 5 % apart is flagged."""
    dtype = Precision.FP32
    a, b, c = _gemm_operands(rng, shape, dtype)
    work = gemm_work(shape.m, shape.n, shape.k, dtype)
    sgemm = measure(_gemm(cublas_handle, dtype), work, operands=(a, b, c), label="sgemm")
    gemmex = measure(_gemm_ex(cublas_handle, "32F"), work, operands=(a, b, c), label="gemmEx COMPUTE_32F")
    found = anomaly.paths_disagree(sgemm.value, gemmex.value)
    perf.check_ratio(gemmex, sgemm, name="gemmex_over_sgemm")
    perf.note(f"sgemm {_shown(sgemm)}; gemmEx(COMPUTE_32F) {_shown(gemmex)}: "
              f"{100 * (gemmex.value / sgemm.value - 1):+.1f} % (rule: within {100 * anomaly.PATHS_MAX_GAP:.0f} %)")
    assert found is None, str(found)


@pytest.mark.crosscheck
@pytest.mark.gemv
@pytest.mark.cublas
@pytest.mark.perf
@pytest.mark.parametrize("shape", FLUSH_SHAPES, ids=lambda shape: f"{Precision.FP32}-{shape}")
def test_flush_effective(shape: GemvShape, gpu: Any, cublas_handle: int, rng: np.random.Generator, measure: Any,
                         perf: Any) -> None:
    """Both directions of the L2 flush: ≫ L2, cold and hot agree (the flush does not leak into the timing);
    ≪ L2, cold is slower than hot (the flush really evicts)."""
    dtype = Precision.FP32
    work = gemv_work(shape.m, shape.n, dtype)
    multiple = _l2_multiple(work.bytes, gpu.info.l2_bytes)
    if anomaly.FLUSH_SMALL_FACTOR < multiple < anomaly.FLUSH_LARGE_FACTOR:
        pytest.skip(f"{shape} is {multiple:.2f}× this GPU's L2, in neither regime of the flush rule "
                    f"(≤ {anomaly.FLUSH_SMALL_FACTOR}× or ≥ {anomaly.FLUSH_LARGE_FACTOR}×): pick another shape")
    a, x, y = _gemv_operands(rng, shape)
    cold = measure(_sgemv(cublas_handle), work, operands=(a, x, y), flush=Flush.COLD, label="cold")
    hot = measure(_sgemv(cublas_handle), work, operands=(a, x, y), flush=Flush.HOT, label="hot")
    found = anomaly.flush_check(cold.median_s, hot.median_s, work.bytes, gpu.info.l2_bytes)
    perf.check_ratio(cold, hot, name="cold_over_hot")
    perf.note(f"working set {multiple:.2f}× L2; cold {_shown(cold)}, hot {_shown(hot)}: cold "
              f"{100 * _flush_gap(cold, hot):+.1f} % time vs hot")
    assert found is None, str(found)


# -- triggers: each rule fires on the mistake it exists to catch ------------------------------------------

def _fires(found: anomaly.Anomaly | None | list[anomaly.Anomaly], rule: str) -> bool:
    items = found if isinstance(found, list) else [found]
    return any(item is not None and item.rule == rule for item in items)


def _memory_findings(gpu: Any, measurement: Measurement) -> list[anomaly.Anomaly]:
    work = measurement.work
    return anomaly.check_case(tflops=tflops(work.flops, measurement.median_s), gbps=measurement.value,
                              peak_tflops=gpu.peaks.compute(work.precision), peak_gbps=gpu.peaks.memory_gbps,
                              precision=work.precision, gemv_class=True, cold=measurement.flush == Flush.COLD)


@pytest.mark.trigger
@pytest.mark.crosscheck
@pytest.mark.gemv
@pytest.mark.cublas
def test_trigger_above_memory_peak_wrong_byte_count(gpu: Any, cublas_handle: int, rng: np.random.Generator,
                                                     measure: Any, perf: Any) -> None:
    """Cache-resident data: a batch of GEMVs sharing one weight (strideA = 0)
    counted as if every item read its own matrix — after the first item the weight comes from L2."""
    shape, batch = SHARED_WEIGHT_GEMV
    a = operands.random_operand(rng, (shape.m, shape.n), "fp32")
    x = operands.random_operand(rng, (batch, shape.n), "fp32")
    y = operands.nan_operand((batch, shape.m), "fp32")
    wrong = gemv_work(shape.m, shape.n, "fp32", batch=batch, shared_matrix=False)
    hot = measure(lambda a, x, y: cublas.gemv_batched(cublas_handle, a, x, y, dtype="fp32"), wrong,
                  operands=(a, x, y), flush=Flush.HOT, label="shared weight, bytes counted per item")
    findings = _memory_findings(gpu, hot)
    right = gemv_work(shape.m, shape.n, "fp32", batch=batch, shared_matrix=True)
    summary = (f"{batch}×{shape} shared weight: counted {wrong.bytes / 1e6:.0f} MB → {_shown(hot)}; "
               f"the right count ({right.bytes / 1e6:.1f} MB) gives {right.value(hot.median_s):.0f} GB/s; "
               f"memory peak {gpu.peaks.memory_gbps:.0f} GB/s")
    perf.note(summary)
    print(summary, *map(str, findings), sep="\n")
    assert _fires(findings, "above-memory-peak"), f"above-memory-peak did not fire: {summary}"


@pytest.mark.trigger
@pytest.mark.crosscheck
@pytest.mark.gemm
@pytest.mark.cublas
def test_trigger_above_compute_peak_wrong_peak(gpu: Any, cublas_handle: int, rng: np.random.Generator,
                                               measure: Any, perf: Any) -> None:
    """A TF32 GEMM held to the FP32 peak (the precision mislabelled, so the wrong peak and FLOP rate apply)."""
    shape = TRIGGER_GEMM
    mislabelled = gemm_work(shape.m, shape.n, shape.k, "fp32")
    tf32 = measure(_gemm(cublas_handle, "tf32"), mislabelled, operands=_gemm_operands(rng, shape),
                   label="gemmEx FAST_TF32 counted as fp32")
    peak = gpu.peaks.compute("fp32")
    found = anomaly.above_compute_peak(tf32.value, peak, "fp32")
    summary = f"TF32 {shape} {_shown(tf32)} against the FP32 peak {peak:.1f} TFLOPS"
    perf.note(summary)
    print(summary, found, sep="\n")
    assert _fires(found, "above-compute-peak"), f"above-compute-peak did not fire: {summary}"


@pytest.mark.trigger
@pytest.mark.crosscheck
@pytest.mark.gemm
@pytest.mark.cublas
@pytest.mark.parametrize("mistake", ["no-mathmode", "compute-32f"])
def test_trigger_tf32_inactive(mistake: str, cublas_handle: int, rng: np.random.Generator, measure: Any,
                               perf: Any) -> None:
    """Both silent fallbacks: sgemm without CUBLAS_TF32_TENSOR_OP_MATH, and
    gemmEx with COMPUTE_32F where COMPUTE_32F_FAST_TF32 was meant."""
    shape = TRIGGER_GEMM
    a, b, c = _gemm_operands(rng, shape)
    fp32 = measure(_gemm(cublas_handle, "fp32"), gemm_work(shape.m, shape.n, shape.k, "fp32"),
                   operands=(a, b, c), label="sgemm")
    call, how = ((_gemm(cublas_handle, "fp32"), "sgemm, math mode never set") if mistake == "no-mathmode"
                 else (_gemm_ex(cublas_handle, "32F"), "gemmEx with COMPUTE_32F"))
    fake = measure(_in_mode(cublas_handle, "default", call), gemm_work(shape.m, shape.n, shape.k, "tf32"),
                   operands=(a, b, c), label=how)
    found = anomaly.tf32_inactive(fp32.value, fake.value, how)
    summary = f"FP32 {_shown(fp32)}; 'TF32' via {how} {_shown(fake)}"
    perf.note(summary)
    print(summary, found, sep="\n")
    assert _fires(found, "tf32-inactive"), f"tf32-inactive did not fire: {summary}"


@pytest.mark.trigger
@pytest.mark.crosscheck
@pytest.mark.gemm
@pytest.mark.cublas
def test_trigger_sgemm_gemmex_gap(cublas_handle: int, rng: np.random.Generator, measure: Any,
                                  perf: Any) -> None:
    """Two paths that are *not* the same math: gemmEx with FAST_TF32 where COMPUTE_32F was meant."""
    shape = TRIGGER_GEMM
    a, b, c = _gemm_operands(rng, shape)
    work = gemm_work(shape.m, shape.n, shape.k, "fp32")
    sgemm = measure(_gemm(cublas_handle, "fp32"), work, operands=(a, b, c), label="sgemm")
    gemmex = measure(_gemm_ex(cublas_handle, "32F_FAST_TF32"), work, operands=(a, b, c),
                     label="gemmEx FAST_TF32 posing as COMPUTE_32F")
    found = anomaly.paths_disagree(sgemm.value, gemmex.value)
    summary = f"sgemm {_shown(sgemm)}; gemmEx FAST_TF32 posing as COMPUTE_32F {_shown(gemmex)}"
    perf.note(summary)
    print(summary, found, sep="\n")
    assert _fires(found, "sgemm-gemmex-gap"), f"sgemm-gemmex-gap did not fire: {summary}"


@pytest.mark.trigger
@pytest.mark.crosscheck
@pytest.mark.gemv
@pytest.mark.cublas
def test_trigger_flush_not_happening(gpu: Any, cublas_handle: int, rng: np.random.Generator, measure: Any,
                                     perf: Any) -> None:
    """A 'cold' measurement whose flush never happens is a second hot one: on a working set ≪ L2 cold and
    hot then agree, which the rule reports."""
    shape = SMALL_GEMV
    work = gemv_work(shape.m, shape.n, "fp32")
    gemv_operands = _gemv_operands(rng, shape)
    no_flush_cold = measure(_sgemv(cublas_handle), work, operands=gemv_operands, flush=Flush.HOT,
                            label="'cold' without a flush")
    hot = measure(_sgemv(cublas_handle), work, operands=gemv_operands, flush=Flush.HOT, label="hot")
    found = anomaly.flush_check(no_flush_cold.median_s, hot.median_s, work.bytes, gpu.info.l2_bytes)
    summary = (f"{shape} ({_l2_multiple(work.bytes, gpu.info.l2_bytes):.2f}× L2): 'cold' without a flush "
               f"{_shown(no_flush_cold)}, hot {_shown(hot)}: {100 * _flush_gap(no_flush_cold, hot):+.1f} % time")
    perf.note(summary)
    print(summary, found, sep="\n")
    assert _fires(found, "flush-not-happening"), f"flush-not-happening did not fire: {summary}"


@pytest.mark.trigger
@pytest.mark.crosscheck
@pytest.mark.gemv
@pytest.mark.cublas
def test_trigger_flush_ineffective(gpu: Any, cublas_handle: int, rng: np.random.Generator, measure: Any,
                                   perf: Any) -> None:
    """A flush that leaks into the timed region: on a working set ≫ L2 the flush cost makes 'cold' slower
    than hot, which no cache explains."""
    from gpuperf.measure.timing import FlushBuffer

    side = 512 * math.ceil(math.sqrt(INEFFECTIVE_FLUSH_L2_MULTIPLE * gpu.info.l2_bytes / 4) / 512)
    shape = GemvShape(side, side)
    work = gemv_work(shape.m, shape.n, "fp32")
    gemv_operands = _gemv_operands(rng, shape)
    flush = FlushBuffer(gpu.info.l2_bytes)
    sgemv = _sgemv(cublas_handle)

    def flush_then_sgemv(a: Any, x: Any, y: Any) -> None:
        flush.enqueue(cupy.cuda.get_current_stream())
        sgemv(a, x, y)

    leaky_cold = measure(flush_then_sgemv, work, operands=gemv_operands, flush=Flush.HOT,
                         label="flush inside the timed region")
    hot = measure(sgemv, work, operands=gemv_operands, flush=Flush.HOT, label="hot")
    found = anomaly.flush_check(leaky_cold.median_s, hot.median_s, work.bytes, gpu.info.l2_bytes)
    summary = (f"{shape} ({_l2_multiple(work.bytes, gpu.info.l2_bytes):.1f}× L2): flush inside the timing "
               f"{_shown(leaky_cold)}, hot {_shown(hot)}: {100 * _flush_gap(leaky_cold, hot):+.1f} % time")
    perf.note(summary)
    print(summary, found, sep="\n")
    assert _fires(found, "flush-ineffective"), f"flush-ineffective did not fire: {summary}"
