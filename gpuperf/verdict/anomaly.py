"""Named anomaly rules: the ways a GEMM/GEMV benchmark lies, each a pure function.

A rule returns an ``Anomaly`` (its name and a message naming the likely causes) or ``None``. Rules about
one case (``check_case``) run on every ``perf.check``; rules that compare two measurements run in the
cross-check tests. Thresholds are module-level data so the CPU tests and the docs share them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import statistics

#: TF32 must beat FP32 by at least this factor at a large square size (H200: ~7× in theory).
TF32_MIN_SPEEDUP = 1.5
#: sgemm and gemmEx(COMPUTE_32F) are the same math: more than 5 % apart means one of them took another path.
PATHS_MAX_GAP = 0.05
#: A working set this many times the L2 gains nothing from a warm cache...
FLUSH_LARGE_FACTOR = 8.0
#: ...so cold and hot may differ by at most this much.
FLUSH_LARGE_MAX_GAP = 0.10
#: A working set at most this fraction of the L2 stays resident when hot...
FLUSH_SMALL_FACTOR = 0.25
#: ...so cold must be slower than hot by at least this much, or the flush is not happening.
FLUSH_SMALL_MIN_GAP = 0.03
#: The first timed samples more than this much slower than the median show a warm-up effect.
WARMUP_MAX_EXCESS = 0.20


@dataclass(frozen=True)
class Anomaly:
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


def above_compute_peak(tflops: float, peak_tflops: float, precision: str) -> Anomaly | None:
    if tflops <= peak_tflops:
        return None
    return Anomaly(
        "above-compute-peak",
        f"{tflops:.1f} TFLOPS exceeds the {precision} peak of {peak_tflops:.1f} TFLOPS; likely causes: "
        "operands resident in cache (run cold, without --no-flush), a wrong FLOP count, or a timing error "
        "(host clock, missing synchronisation)",
    )


def above_memory_peak(gbps: float, peak_gbps: float, gemv_class: bool) -> Anomaly | None:
    if gbps <= peak_gbps:
        return None
    what = "a GEMV-class result above 100 % of memory bandwidth: the data was cache-resident" if gemv_class \
        else "more bytes per second than device memory can deliver"
    return Anomaly(
        "above-memory-peak",
        f"{gbps:.0f} GB/s exceeds the memory peak of {peak_gbps:.0f} GB/s ({what}); likely causes: "
        "operands resident in L2 (hot run or working set < L2), a wrong byte count, or a timing error",
    )


def check_case(*, tflops: float, gbps: float, peak_tflops: float | None, peak_gbps: float | None,
               precision: str, gemv_class: bool, cold: bool) -> list[Anomaly]:
    """The single-case rules. Compute-bound cases are held to the memory peak only when cold, since a
    hot working set may legitimately come from L2; GEMV-class cases always are, since
    a GEMV reads each matrix element once and no cache can serve it faster than memory twice over."""
    found: list[Anomaly | None] = []
    if peak_tflops is not None:
        found.append(above_compute_peak(tflops, peak_tflops, precision))
    if peak_gbps is not None and (gemv_class or cold):
        found.append(above_memory_peak(gbps, peak_gbps, gemv_class))
    return [anomaly for anomaly in found if anomaly is not None]


def tf32_inactive(fp32_tflops: float, tf32_tflops: float, how: str,
                  min_speedup: float = TF32_MIN_SPEEDUP) -> Anomaly | None:
    """FP32 and TF32 a few percent apart means TF32 never engaged."""
    speedup = tf32_tflops / fp32_tflops
    if speedup >= min_speedup:
        return None
    return Anomaly(
        "tf32-inactive",
        f"TF32 via {how} is only {speedup:.2f}× FP32 ({tf32_tflops:.1f} vs {fp32_tflops:.1f} TFLOPS, "
        f"expected ≥ {min_speedup}×): the TF32 path is not active; check the math mode "
        "(CUBLAS_TF32_TENSOR_OP_MATH) or the compute type (CUBLAS_COMPUTE_32F_FAST_TF32), and "
        "NVIDIA_TF32_OVERRIDE=0 in the environment",
    )


def paths_disagree(sgemm_tflops: float, gemmex_tflops: float, max_gap: float = PATHS_MAX_GAP
                   ) -> Anomaly | None:
    """Sgemm and gemmEx(COMPUTE_32F) are mathematically the same call."""
    gap = abs(sgemm_tflops - gemmex_tflops) / max(sgemm_tflops, gemmex_tflops)
    if gap <= max_gap:
        return None
    return Anomaly(
        "sgemm-gemmex-gap",
        f"sgemm {sgemm_tflops:.1f} vs gemmEx(COMPUTE_32F) {gemmex_tflops:.1f} TFLOPS differ by "
        f"{100 * gap:.1f} % (> {100 * max_gap:.0f} %): the two paths picked different kernels; record it",
    )


def flush_check(cold_s: float, hot_s: float, working_set_bytes: float, l2_bytes: float) -> Anomaly | None:
    """Both directions of 'is the L2 flush doing what we think': a large working set must not care, a small
    one must."""
    ratio = working_set_bytes / l2_bytes
    gap = (cold_s - hot_s) / hot_s
    if ratio >= FLUSH_LARGE_FACTOR and abs(gap) > FLUSH_LARGE_MAX_GAP:
        return Anomaly(
            "flush-ineffective",
            f"cold and hot differ by {100 * gap:+.1f} % on a working set {ratio:.0f}× the L2, which no cache "
            "holds: the flush (or its cost) is leaking into the timed region",
        )
    if ratio <= FLUSH_SMALL_FACTOR and gap < FLUSH_SMALL_MIN_GAP:
        return Anomaly(
            "flush-not-happening",
            f"cold is only {100 * gap:+.1f} % slower than hot on a working set {ratio:.2f}× the L2: "
            "the L2 flush is not happening (buffer too small, or on another stream)",
        )
    return None


def warmup_effect(samples_s: Sequence[float], leading: int = 3,
                  max_excess: float = WARMUP_MAX_EXCESS) -> Anomaly | None:
    """The first timed samples are slower (handle init, clock ramp): the warm-up was too short."""
    if len(samples_s) < 2 * leading + 1:
        return None
    median = statistics.median(samples_s)
    first = statistics.median(samples_s[:leading])
    excess = first / median - 1.0
    if excess <= max_excess:
        return None
    return Anomaly(
        "warm-up-effect",
        f"the first {leading} samples are {100 * excess:.0f} % slower than the median: warm-up (handle "
        "init, module load, clock ramp) is leaking into the samples; raise --warmup-time",
    )
