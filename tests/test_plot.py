"""Plots: one non-empty PNG per family plus a roofline, from synthetic records and a synthetic baseline."""

from __future__ import annotations

from dataclasses import replace

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.image
import pytest

from gpuperf.output import plot
from gpuperf.measure.metrics import gemm_work, gemv_work
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status

PEAKS: dict[str, Any] = {"memory_gbps": 1000.0,
         "compute_tflops": {"fp32": 50.0, "tf32": 400.0, "fp16": 800.0, "bf16": 800.0, "fp64": 50.0}}


def gemm_record(n: int, dtype: str, tflops: float, family: str = "gemm", k: int | None = None) -> Record:
    work = gemm_work(n, n, k or n, dtype)
    case = f"perf_tests/test_{family}.py::test_{family}_perf[{dtype}-{n}x{n}x{k or n}-cold]"
    return Record(case_id=case, nodeid=case, family=family, params={}, metric="TFLOPS", value=tflops,
                  unit="TFLOPS", status=Status.PASS, flops=work.flops, bytes=work.bytes,
                  arithmetic_intensity=work.arithmetic_intensity, tflops=tflops,
                  peak=PEAKS["compute_tflops"][dtype], flush="cold", kernel=f"cuBLAS {dtype} nn", precision=dtype,
                  shape=work.shape)


def gemv_record(m: int, n: int, op: str, gbps: float) -> Record:
    work = gemv_work(m, n, "fp32")
    case = f"perf_tests/test_gemv.py::test_gemv_perf[fp32-op{op}-{m}x{n}-cold]"
    seconds = work.bytes / (gbps * 1e9)
    return Record(case_id=case, nodeid=case, family="gemv", params={}, metric="GB/s", value=gbps, unit="GB/s",
                  status=Status.PASS, flops=work.flops, bytes=work.bytes, tflops=work.flops / seconds / 1e12,
                  gbps=gbps, flush="cold", kernel=f"cuBLAS gemv fp32 op{op}", precision="fp32", shape=work.shape)


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


@pytest.mark.long
def test_one_throughput_png_per_family(tmp_path: Path, records: list[Record]) -> None:
    written = plot.plot_throughput(records, tmp_path / "plots", gpu="Synthetic GPU", peaks=PEAKS)
    assert sorted(p.name for p in written) == ["throughput-gemm.png", "throughput-gemv.png"]  # ratios left out
    for path in written:
        assert path.stat().st_size > 10_000
        width, height = png_size(path)
        assert (width, height) == (plot.FIGSIZE[0] * plot.THROUGHPUT_WIDTH[1] * plot.DPI, plot.FIGSIZE[1] * plot.DPI)


@pytest.mark.long
def test_a_family_with_both_metrics_gets_two_panels(tmp_path: Path, records: list[Record]) -> None:
    mixed = [r for r in records if r.metric in ("TFLOPS", "GB/s")]
    mixed = [Record(**{**r.__dict__, "family": "batched"}) for r in mixed]
    (path,) = plot.plot_throughput(mixed, tmp_path)
    width, _ = png_size(path)
    assert width == plot.FIGSIZE[0] * plot.THROUGHPUT_WIDTH[2] * plot.DPI


@pytest.mark.long
def test_roofline_png(tmp_path: Path, records: list[Record]) -> None:
    path = plot.plot_roofline(records, PEAKS, tmp_path, gpu="Synthetic GPU")
    assert path.name == "roofline.png" and path.stat().st_size > 10_000
    assert png_size(path) == (plot.FIGSIZE[0] * plot.DPI, plot.FIGSIZE[1] * plot.DPI)


def test_roofline_without_peaks_still_places_the_cases(tmp_path: Path, records: list[Record]) -> None:
    path = plot.plot_roofline(records, None, tmp_path)
    assert path.stat().st_size > 5_000


def test_series_are_the_kernels_that_ran_not_sizes(records: list[Record]) -> None:
    assert plot.series_label(records[0]) == "cuBLAS fp32 nn"
    gemv = next(r for r in records if r.family == "gemv")
    assert plot.series_label(gemv) == "cuBLAS gemv fp32 opN"
    assert plot.series_label(replace(gemv, kernel="")) == "gemv"
    labels = {plot.series_label(r) for r in records}
    assert not any("Shape(" in label or "{" in label for label in labels)  # never a repr


def test_only_square_sweeps_are_lines() -> None:
    square, odd = gemm_record(4096, "fp16", 700.0), gemm_record(4096, "fp16", 140.0, k=4095)
    assert plot.shape_class(square) == "" and plot.shape_class(odd) == plot.IRREGULAR


def test_compute_ceilings_merge_equal_peaks() -> None:
    ceilings = plot._compute_ceilings(PEAKS)
    assert ceilings[0] == (800.0, "FP16/BF16 tensor")
    assert (50.0, "FP32 vector = FP64 tensor") in ceilings
    assert plot._compute_ceilings({"memory_gbps": 1.0, "compute_tflops": {"fp64": None}}) == []


def described(metric: str, value: float, work: Any, kernel: str, family: str) -> SimpleNamespace:
    """A baseline entry with the descriptive fields ``--update-baselines`` writes."""
    return SimpleNamespace(metric=metric, value=value, unit=metric, samples=10, flush="cold", spread=0.01,
                           family=family, kernel=kernel, precision=work.precision,
                           shape=tuple(work.sizes), flops=work.flops, bytes=work.bytes)


def test_records_from_baseline_read_what_each_entry_says_it_is() -> None:
    header = {"gpu": "Synthetic GPU", "peaks": PEAKS}
    wmma = gemm_work(4096, 4096, 4096, "fp16")
    entries = {
        # the WMMA kernel's id names no precision: it is FP16 because its entry says so
        "perf_tests/test_custom.py::test_custom_perf[wmma-4096x4096x4096-cold]":
            described("TFLOPS", 400.0, wmma, "custom wmma", "custom"),
        "perf_tests/test_gemv.py::test_gemv_perf[fp32-opN-1024x2048-cold]":
            described("GB/s", 500.0, gemv_work(1024, 2048, "fp32"), "cuBLAS gemv fp32 opN", "gemv"),
        "perf_tests/test_custom.py::test_custom_perf[wmma-4096x4096x4096-cold]#vs_cublas":
            SimpleNamespace(metric="ratio", value=0.5, unit="×", samples=10, flush="cold", spread=0.01),
    }
    custom, gemv, ratio = plot.records_from_baseline(header, entries)
    assert (custom.family, custom.kernel, custom.precision) == ("custom", "custom wmma", "fp16")
    assert custom.flops == wmma.flops and custom.shape == {"batch": 1, "m": 4096, "n": 4096, "k": 4096}
    assert custom.peak == 800.0 and custom.pct_of_peak == pytest.approx(50.0)  # the FP16 peak, not FP32's
    assert gemv.bytes == gemv_work(1024, 2048, "fp32").bytes
    assert gemv.flops is not None and gemv.bytes is not None
    assert gemv.tflops == pytest.approx(500.0 * gemv.flops / gemv.bytes / 1000.0)
    assert ratio.flops is None  # nothing to place: left out of the plots


@pytest.mark.long
def test_plots_from_a_baseline(tmp_path: Path) -> None:
    header = {"gpu": "Synthetic GPU", "peaks": PEAKS}
    entries = {f"perf_tests/test_gemm.py::test_gemm_perf[fp64-nn-{n}x{n}x{n}-cold]":
               described("TFLOPS", n / 200, gemm_work(n, n, n, "fp64"), "cuBLAS fp64 nn", "gemm")
               for n in (1024, 2048, 4096)}
    records = plot.records_from_baseline(header, entries)
    assert {r.precision for r in records} == {"fp64"}
    (path,) = plot.plot_throughput(records, tmp_path, peaks=PEAKS)
    assert png_size(path)[0] == plot.FIGSIZE[0] * plot.THROUGHPUT_WIDTH[1] * plot.DPI
    assert plot.plot_roofline(records, PEAKS, tmp_path).stat().st_size > 10_000


def test_entries_without_a_description_are_left_out(tmp_path: Path) -> None:
    entries = {"perf_tests/test_gemm.py::test_gemm_perf[fp16-4096x4096x4096-cold]":
               SimpleNamespace(metric="TFLOPS", value=400.0, unit="TFLOPS")}
    [record] = plot.records_from_baseline({"peaks": PEAKS}, entries)
    assert record.flops is None and plot.plot_throughput([record], tmp_path) == []


def test_no_plottable_records_writes_no_throughput_png(tmp_path: Path) -> None:
    assert plot.plot_throughput([], tmp_path) == []


@pytest.mark.parametrize(("sizes", "expected"), [
    ((4096, 4096), ""), ((64, 65536), "N≫M"), ((65536, 64), "M≫N"), ((4096, 4096, 64), "M,N≫K"),
    ((64, 64, 65536), "K≫M,N"), ((8, 64, 64, 64), ""),
])
def test_tall_wide_and_square_shapes_are_separate_series(sizes: tuple[int, ...], expected: str) -> None:
    work = gemv_work(*sizes, "fp32") if len(sizes) == 2 else (
        gemm_work(*sizes, "fp32") if len(sizes) == 3 else gemm_work(*sizes[1:], "fp32", batch=sizes[0]))
    record = Record(case_id="x", nodeid="x", family="gemv", params={}, metric="GB/s", value=1.0, unit="GB/s",
                    status=Status.PASS, shape=work.shape)
    assert plot.shape_class(record) == expected


@pytest.mark.parametrize(("work", "label"), [
    (gemm_work(4096, 4096, 4096, "fp32"), "4096³"), (gemm_work(1000, 3000, 2000, "fp32"), "1000×3000×2000"),
    (gemm_work(64, 64, 64, "fp32", batch=4096), "4096×64³"), (gemv_work(16384, 16384, "fp32"), "16384×16384"),
    (gemv_work(1024, 1024, "fp32", batch=256), "256×1024×1024"),
])
def test_shapes_are_labelled_for_people(work: Any, label: str) -> None:
    assert plot.shape_label(work.shape) == label
    assert plot.shape_label({}) == ""


def test_the_roofline_has_an_fp8_roof_above_the_fp16_one() -> None:
    from gpuperf.measure.peaks import device_peaks
    from gpuperf.output.plot import _compute_ceilings
    from types import SimpleNamespace

    h200 = SimpleNamespace(cc=(9, 0), sm_count=132, sm_clock_max_mhz=1980, mem_clock_mhz=3201, bus_width_bits=6016)
    ceilings = _compute_ceilings(device_peaks(h200).to_dict())
    assert ceilings[0] == (2141.1, "FP8/INT8 tensor") and ceilings[1] == (1070.5, "FP16/BF16 tensor")


def test_log_ticks_are_plain_text_decades() -> None:
    """The log axes' tick labels are drawn as written (mathtext is off for untrusted labels), so they are plain
    ``10ⁿ`` at each power of ten and empty between, never matplotlib's ``$\\mathdefault{…}$``."""
    from gpuperf.output.plot import decade_label

    assert [decade_label(v) for v in (0.01, 1.0, 10.0, 1000.0, 1e15)] == ["10⁻²", "10⁰", "10¹", "10³", "10¹⁵"]
    assert [decade_label(v) for v in (2.0, 300.0, 0.0, -10.0, float("inf"))] == ["", "", "", "", ""]
