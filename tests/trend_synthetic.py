"""A synthetic history for the trend page's tests: many cases over many runs, hosts, and a planted step.

Imported as ``trend_synthetic`` (pytest puts tests/ on sys.path). The step is planted in the figures *and*
listed as the change point the history's detector reports, so the page is tested on its own input model.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from gpuperf.trend.data import CaseSeries, ChangePoint, SeriesPoint, TrendData, TrendRun
from gpuperf.vocabulary import Status

FAMILIES = ("gemm", "gemv", "batched", "custom", "crosscheck")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp64")
STEP_CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"
STEP = -0.06  # the planted slowdown: 6 %
OLD_KERNEL = "sm90_xmma_gemm_f32f32_tilesize128x128x8"
NEW_KERNEL = "sm90_xmma_gemm_f32f32_tilesize256x128x8"
#: The hosts' kinds, alternately: every other host is of the second (``TrendRun.host_class``).
HOST_CLASSES = ("NVIDIA H200 · 132 SMs · 1980/3201 MHz", "NVIDIA H200 NVL · 132 SMs · 1785/3201 MHz")


def synthetic_trend(cases: int = 12, runs: int = 40, hosts: int = 3, seed: int = 1) -> TrendData:
    """``cases`` series over ``runs`` runs of one GPU model; the first series is the GEMM that slows down by
    ``STEP`` from run ``runs - 3`` on (inside the last runs), with its kernel change at the same run; cuBLAS
    changes version halfway, so every series shows a version annotation."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    host_names = [f"{0x1e941103 + 977 * h:08x}" for h in range(hosts)]
    run_list = tuple(
        TrendRun(run_id=f"run-{i:05d}", started=(start + timedelta(hours=6 * i)).isoformat(timespec="seconds"),
                 gpu_model="nvidia-h200", host=host_names[i % hosts], commit=f"{i * 7919:040x}", branch="main",
                 ci_job=f"gpu-nightly #{1000 + i}", host_class=HOST_CLASSES[(i % hosts) % 2],
                 versions={"driver": "580.159.04", "cuda_runtime": "13.2",
                           "cublas": "13.1.0" if i < runs // 2 else "13.2.1", "cupy": "14.2.0"})
        for i in range(runs))
    step_at = runs - 3
    series = [_series(run_list, STEP_CASE, "gemm", "fp32", rng, step_at)]
    for c in range(1, cases):
        family = FAMILIES[c % len(FAMILIES)]
        precision = PRECISIONS[(c // len(FAMILIES)) % len(PRECISIONS)]
        case_id = f"perf_tests/test_{family}.py::test_{family}_perf[{precision}-{256 * (c + 1)}x1024x1024-cold]"
        series.append(_series(run_list, case_id, family, precision, rng, None))
    return TrendData(runs=run_list, series=tuple(series), source="a synthetic history")


def _series(runs: tuple[TrendRun, ...], case_id: str, family: str, precision: str, rng: random.Random,
            step_at: int | None) -> CaseSeries:
    level = rng.uniform(20, 600)
    points = []
    for i, run in enumerate(runs):
        stepped = step_at is not None and i >= step_at
        value = level * (1 + (STEP if stepped else 0.0)) * (1 + rng.gauss(0, 0.005))
        status = Status.REGRESSED if stepped else Status.PASS
        points.append(SeriesPoint(
            run_id=run.run_id, value=value, status=status, spread=abs(rng.gauss(0.01, 0.003)),
            baseline=level, tolerance=0.03,
            kernels=(NEW_KERNEL if stepped else OLD_KERNEL,), method="cupti-cold"))
    change_points: tuple[ChangePoint, ...] = ()
    if step_at is not None:
        change_points = (ChangePoint(run_id=runs[step_at].run_id, before=level, after=level * (1 + STEP),
                                     previous_run_id=runs[step_at - 1].run_id),)
    return CaseSeries(case_id=case_id, gpu_model="nvidia-h200", family=family, precision=precision,
                      metric="TFLOPS", unit="TFLOPS", points=tuple(points), shape={"m": 4096, "n": 4096, "k": 4096},
                      kernel=f"cuBLAS {precision}", change_points=change_points)
