"""``gpuperf.measure.metrics``: FLOP and byte formulas (SPEC "Metrics and peaks") and the derived figures."""

from __future__ import annotations

import pytest

from gpuperf.measure.metrics import (Work, attention_work, elementwise_work, gbps, gemm_work, gemv_work, percent_of,
                                     reduction_work, tflops)
from gpuperf.vocabulary import Metric, Precision


def test_gemm_flops_and_bytes_fp32() -> None:
    w = gemm_work(7, 5, 3, "fp32")
    assert w.flops == 2 * 7 * 5 * 3
    assert w.bytes == (7 * 3 + 3 * 5 + 7 * 5) * 4  # A and B read once, C written once
    assert w.precision == "fp32"
    assert w.metric == Metric.TFLOPS


def test_gemm_beta_nonzero_reads_c_as_well() -> None:
    plain, with_beta = gemm_work(64, 32, 16, "fp16"), gemm_work(64, 32, 16, "fp16", beta_nonzero=True)
    assert with_beta.flops == plain.flops
    assert with_beta.bytes - plain.bytes == 64 * 32 * 2
    assert with_beta.bytes == (64 * 16 + 16 * 32 + 2 * 64 * 32) * 2


def test_batched_gemm_scales_flops_and_bytes_by_batch() -> None:
    one, batched = gemm_work(256, 256, 256, "fp32"), gemm_work(256, 256, 256, "fp32", batch=1024)
    assert batched.flops == 1024 * one.flops == 2 * 1024 * 256**3
    assert batched.bytes == 1024 * one.bytes


@pytest.mark.parametrize(("dtype", "size"), [("fp32", 4), ("tf32", 4), ("fp16", 2), ("bf16", 2), ("fp64", 8)])
def test_element_size_per_math_path(dtype: str, size: int) -> None:
    assert gemm_work(10, 20, 30, dtype).bytes == (10 * 30 + 30 * 20 + 10 * 20) * size
    assert gemv_work(10, 20, dtype).bytes == (10 * 20 + 20 + 10) * size


def test_gemv_flops_and_bytes() -> None:
    w = gemv_work(64, 65536, "fp32")
    assert w.flops == 2 * 64 * 65536
    assert w.bytes == (64 * 65536 + 65536 + 64) * 4  # A, x read; y written
    assert w.metric == Metric.GBPS


def test_gemv_beta_nonzero_reads_y() -> None:
    assert gemv_work(100, 50, "fp32", beta_nonzero=True).bytes == (100 * 50 + 50 + 2 * 100) * 4


def test_batched_gemv_and_shared_matrix() -> None:
    m, n, batch = 128, 256, 32
    own = gemv_work(m, n, "fp32", batch=batch)
    shared = gemv_work(m, n, "fp32", batch=batch, shared_matrix=True)
    assert own.flops == shared.flops == 2 * m * n * batch
    assert own.bytes == (batch * m * n + batch * (n + m)) * 4
    assert shared.bytes == (m * n + batch * (n + m)) * 4  # strideA = 0: A read once
    both = gemv_work(m, n, "fp32", batch=batch, beta_nonzero=True, shared_matrix=True)
    assert both.bytes == (m * n + batch * (n + 2 * m)) * 4


@pytest.mark.parametrize("dtype", ["fp4", "float32", "FP32", ""])
def test_unknown_dtype_raises_listing_the_known_ones(dtype: str) -> None:
    with pytest.raises(ValueError, match="unknown dtype") as info:
        gemm_work(8, 8, 8, dtype)
    assert "fp32" in str(info.value)
    with pytest.raises(ValueError, match="unknown dtype"):
        gemv_work(8, 8, dtype)


@pytest.mark.parametrize("sizes", [(0, 8, 8, 1), (8, 0, 8, 1), (8, 8, 0, 1), (8, 8, 8, 0), (-1, 8, 8, 1)])
def test_nonpositive_gemm_sizes_raise(sizes: tuple[int, int, int, int]) -> None:
    m, n, k, batch = sizes
    with pytest.raises(ValueError, match="positive"):
        gemm_work(m, n, k, "fp32", batch=batch)


@pytest.mark.parametrize("sizes", [(0, 8, 1), (8, 0, 1), (8, 8, 0)])
def test_nonpositive_gemv_sizes_raise(sizes: tuple[int, int, int]) -> None:
    m, n, batch = sizes
    with pytest.raises(ValueError, match="positive"):
        gemv_work(m, n, "fp32", batch=batch)


def test_every_case_dtype_has_an_element_size() -> None:
    for dtype in Precision.ALL:
        assert gemm_work(2, 2, 2, dtype).bytes > 0


def test_work_value_picks_tflops_for_compute_and_gbps_for_memory() -> None:
    compute = Work(flops=2e12, bytes=4e9, precision="fp32", metric=Metric.TFLOPS)
    memory = Work(flops=2e12, bytes=4e9, precision="fp32", metric=Metric.GBPS)
    assert compute.value(0.5) == pytest.approx(4.0)  # 2e12 / 0.5 s = 4 TFLOPS
    assert memory.value(0.5) == pytest.approx(8.0)  # 4e9 / 0.5 s = 8 GB/s


def test_arithmetic_intensity() -> None:
    w = gemm_work(4096, 4096, 4096, "fp32")
    assert w.arithmetic_intensity == pytest.approx(2 * 4096**3 / (3 * 4096**2 * 4))  # 682.7 FLOP/B
    assert gemv_work(4096, 4096, "fp32").arithmetic_intensity < 0.51  # ~ 2 FLOP per 4-byte element


def test_unit_helpers() -> None:
    assert tflops(1e12, 1.0) == 1.0
    assert tflops(5e12, 0.25) == 20.0
    assert gbps(1e9, 1.0) == 1.0
    assert gbps(3e9, 1e-3) == 3000.0
    assert percent_of(33.45, 66.9) == pytest.approx(50.0)


def test_an_fp8_gemm_counts_one_byte_operands_and_its_own_output_type() -> None:
    work = gemm_work(8192, 8192, 8192, "fp8_e4m3", out_dtype="bf16")
    assert work.precision == "fp8"  # the format is storage; the peak is FP8's
    assert work.bytes == 2 * 8192 * 8192 * 1 + 8192 * 8192 * 2
    assert work.flops == 2 * 8192**3


def test_elementwise_work_moves_each_input_and_output_once() -> None:
    work = elementwise_work(2**24, "fp32")  # c = a + b
    assert (work.flops, work.bytes, work.metric) == (2**24, 12 * 2**24, "GB/s")
    assert work.shape == {"n": 2**24}


def test_a_softmax_reads_and_writes_every_element_once() -> None:
    work = reduction_work(4096, 8192, "bf16", outputs_per_row=8192, flops_per_element=5)
    assert work.bytes == 2 * 4096 * 8192 * 2 and work.flops == 5 * 4096 * 8192 and work.metric == "GB/s"


def test_attention_counts_two_products_per_head_and_halves_them_when_causal() -> None:
    full = attention_work(8, 32, 4096, 4096, 128, "bf16")
    assert full.flops == 4 * 8 * 32 * 4096 * 4096 * 128 and full.metric == "TFLOPS"
    assert attention_work(8, 32, 4096, 4096, 128, "bf16", causal=True).flops == full.flops / 2
    assert full.bytes == 8 * 4 * 32 * 4096 * 128 * 2  # Q, K, V read and O written, once each
    gqa = attention_work(8, 32, 4096, 4096, 128, "bf16", kv_heads=8)
    assert gqa.bytes == 8 * (2 * 32 + 2 * 8) * 4096 * 128 * 2 and gqa.shape["kv_heads"] == 8


@pytest.mark.parametrize("bad", [dict(n=0), dict(n=-1)])
def test_helpers_refuse_non_positive_sizes(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="sizes must be positive"):
        elementwise_work(dtype="fp32", **bad)
