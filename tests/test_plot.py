"""Plots: one non-empty PNG per family plus a roofline, from synthetic records and a synthetic baseline."""

from __future__ import annotations

from dataclasses import replace

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.image
import pytest

from gpuperf import plot
from gpuperf.metrics import gemm_work, gemv_work
from gpuperf.records import Record
from gpuperf.vocabulary import Status

PEAKS: dict[str, Any] = {"memory_gbps": 1000.0,
         "compute_tflops": {"fp32": 50.0, "tf32": 400.0, "fp16": 800.0, "bf16": 800.0, "fp64": 50.0}}


def gemm_record(n: int, dtype: str, tflops: float, family: str = "gemm") -> Record:
    work = gemm_work(n, n, n, dtype)
    case = f"perf_tests/test_{family}.py::test_{family}_perf[{dtype}-{n}x{n}x{n}-cold]"
    return Record(case_id=case, nodeid=case, family=family,
                  params={"dtype": dtype, "shape": f"{n}x{n}x{n}", "flush": "cold"},
                  metric="TFLOPS", value=tflops, unit="TFLOPS", status=Status.PASS, flops=work.flops,
                  bytes=work.bytes, arithmetic_intensity=work.arithmetic_intensity, tflops=tflops,
                  peak=PEAKS["compute_tflops"][dtype], flush="cold")


def gemv_record(m: int, n: int, op: str, gbps: float) -> Record:
    work = gemv_work(m, n, "fp32")
    case = f"perf_tests/test_gemv.py::test_sgemv_perf[op{op}-{m}x{n}-cold]"
    seconds = work.bytes / (gbps * 1e9)
    return Record(case_id=case, nodeid=case, family="gemv", params={"op": op, "m": str(m), "n": str(n)},
                  metric="GB/s", value=gbps, unit="GB/s", status=Status.PASS, flops=work.flops,
                  bytes=work.bytes, tflops=work.flops / seconds / 1e12, gbps=gbps, flush="cold")


@pytest.fixture
def records() -> list[Record]:
    gemm = [gemm_record(n, dtype, value)
            for n, scale in ((512, 0.3), (1024, 0.6), (4096, 0.9))
            for dtype, value in (("fp32", 40 * scale), ("fp16", 600 * scale))]
    gemv = [gemv_record(m, n, op, 700.0 + m / 100) for m, n in ((1024, 1024), (8192, 8192)) for op in "NT"]
    ratio = Record(case_id="perf_tests/test_custom.py::test_tiled[1024x1024x1024-cold]#vs_cublas",
                   nodeid="x", family="custom", params={}, metric="ratio", value=0.5, unit="ratio",
                   status=Status.PASS)
    return gemm + gemv + [ratio]


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels, read back with matplotlib."""
    image = matplotlib.image.imread(path)
    return image.shape[1], image.shape[0]


def test_one_throughput_png_per_family(tmp_path: Path, records: list[Record]) -> None:
    written = plot.plot_throughput(records, tmp_path / "plots", gpu="Synthetic GPU", peaks=PEAKS)
    assert sorted(p.name for p in written) == ["throughput-gemm.png", "throughput-gemv.png"]  # ratios left out
    for path in written:
        assert path.stat().st_size > 10_000
        width, height = png_size(path)
        assert (width, height) == (plot.FIGSIZE[0] * plot.THROUGHPUT_WIDTH[1] * plot.DPI, plot.FIGSIZE[1] * plot.DPI)


def test_a_family_with_both_metrics_gets_two_panels(tmp_path: Path, records: list[Record]) -> None:
    mixed = [r for r in records if r.metric in ("TFLOPS", "GB/s")]
    mixed = [Record(**{**r.__dict__, "family": "batched"}) for r in mixed]
    (path,) = plot.plot_throughput(mixed, tmp_path)
    width, _ = png_size(path)
    assert width == plot.FIGSIZE[0] * plot.THROUGHPUT_WIDTH[2] * plot.DPI


def test_roofline_png(tmp_path: Path, records: list[Record]) -> None:
    path = plot.plot_roofline(records, PEAKS, tmp_path, gpu="Synthetic GPU")
    assert path.name == "roofline.png" and path.stat().st_size > 10_000
    assert png_size(path) == (plot.FIGSIZE[0] * plot.DPI, plot.FIGSIZE[1] * plot.DPI)


def test_roofline_without_peaks_still_places_the_cases(tmp_path: Path, records: list[Record]) -> None:
    path = plot.plot_roofline(records, None, tmp_path)
    assert path.stat().st_size > 5_000


def test_series_are_code_paths_not_sizes(records: list[Record]) -> None:
    assert plot.series_label(records[0]) == "gemm · fp32 · cold"
    gemv = next(r for r in records if r.family == "gemv")
    assert plot.series_label(gemv) == f"sgemv · {gemv.params['op']}"


def test_only_square_sweeps_are_lines() -> None:
    square, odd = gemm_record(4096, "fp16", 700.0), gemm_record(4096, "fp16", 140.0)
    odd = replace(odd, params={**odd.params, "shape": "4096x4096x4095"})
    assert plot.shape_class(square) == "" and plot.shape_class(odd) == plot.IRREGULAR


def test_compute_ceilings_merge_equal_peaks() -> None:
    ceilings = plot._compute_ceilings(PEAKS)
    assert ceilings[0] == (800.0, "FP16/BF16 tensor")
    assert (50.0, "FP32 vector = FP64 tensor") in ceilings
    assert plot._compute_ceilings({"memory_gbps": 1.0, "compute_tflops": {"fp64": None}}) == []


def test_records_from_baseline_derive_work_from_the_case_id() -> None:
    header = {"gpu": "Synthetic GPU", "peaks": PEAKS}
    entries = {
        "perf_tests/test_gemm.py::test_gemm_perf[fp16-4096x4096x4096-cold]":
            SimpleNamespace(metric="TFLOPS", value=400.0, unit="TFLOPS", samples=10, flush="cold", spread=0.01),
        "perf_tests/test_gemv.py::test_sgemv_perf[opN-1024x2048-cold]":
            SimpleNamespace(metric="GB/s", value=500.0, unit="GB/s", samples=10, flush="cold", spread=0.01),
        "perf_tests/test_custom.py::test_tiled_perf[1024x1024x1024-cold]#vs_cublas":
            SimpleNamespace(metric="ratio", value=0.5, unit="ratio", samples=10, flush="cold", spread=0.01),
    }
    gemm, gemv, ratio = plot.records_from_baseline(header, entries)
    assert gemm.family == "gemm" and gemm.params["dtype"] == "fp16"
    assert gemm.flops == gemm_work(4096, 4096, 4096, "fp16").flops
    assert gemm.pct_of_peak == pytest.approx(50.0)
    assert gemv.family == "gemv" and gemv.params["dtype"] == "fp32" and gemv.params["variant"] == "opN"
    assert gemv.bytes == gemv_work(1024, 2048, "fp32").bytes
    assert gemv.flops is not None and gemv.bytes is not None
    assert gemv.tflops == pytest.approx(500.0 * gemv.flops / gemv.bytes / 1000.0)
    assert ratio.flops is None


def test_plots_from_a_baseline(tmp_path: Path) -> None:
    header = {"gpu": "Synthetic GPU", "peaks": PEAKS}
    entries = {
        f"perf_tests/test_gemm.py::test_dgemm_perf[{n}x{n}x{n}-cold]":
            SimpleNamespace(metric="TFLOPS", value=n / 200, unit="TFLOPS") for n in (1024, 2048, 4096)
    }
    records = plot.records_from_baseline(header, entries)
    assert {r.params["dtype"] for r in records} == {"fp64"}
    (path,) = plot.plot_throughput(records, tmp_path, peaks=PEAKS)
    assert png_size(path)[0] == plot.FIGSIZE[0] * plot.THROUGHPUT_WIDTH[1] * plot.DPI
    assert plot.plot_roofline(records, PEAKS, tmp_path).stat().st_size > 10_000


def test_no_plottable_records_writes_no_throughput_png(tmp_path: Path) -> None:
    assert plot.plot_throughput([], tmp_path) == []


@pytest.mark.parametrize(("shape", "expected"), [
    ("4096x4096", ""), ("64x65536", "N≫M"), ("65536x64", "M≫N"), ("4096x4096x64", "M,N≫K"),
    ("64x64x65536", "K≫M,N"), ("8x64x64x64", ""),
])
def test_tall_wide_and_square_shapes_are_separate_series(shape: str, expected: str) -> None:
    record = Record(case_id="x", nodeid="x", family="gemv", params={"shape": shape}, metric="GB/s",
                    value=1.0, unit="GB/s", status=Status.PASS)
    assert plot.shape_class(record) == expected


def test_shape_class_falls_back_to_the_case_id() -> None:
    record = Record(case_id="perf_tests/test_gemv.py::test_sgemv_perf[opT-65536x64-cold]", nodeid="x",
                    family="gemv", params={"op": "T"}, metric="GB/s", value=1.0, unit="GB/s", status=Status.PASS)
    assert plot.shape_class(record) == "M≫N"
