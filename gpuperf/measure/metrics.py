"""FLOP and byte counts of the operations under test, and the figures derived from a time.

Conventions (the usual ones, so figures compare with other benchmarks):
- GEMM does ``2·M·N·K`` FLOPs (one multiply and one add per term), × batch.
- GEMV does ``2·M·N`` FLOPs, × batch.
- Bytes are the fewest the operation must move: every operand read once and the output written once;
  C is read as well when ``beta ≠ 0``. A matrix shared by every item of a batch (``strideA = 0``) is
  read once.
- Any other operation states its own ``Work(flops, bytes, precision, metric, sizes)``; the helpers below count
  the common ones (elementwise, reduction, attention) so a user need not: each says what it counts.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuperf.vocabulary import Metric, Precision


@dataclass(frozen=True)
class Work:
    """What one call does: the numerators of every derived figure, and the sizes they were counted from."""

    flops: float
    bytes: float
    precision: str
    metric: str  # the primary, gated metric: TFLOPS (compute-bound) or GB/s (memory-bound)
    sizes: tuple[tuple[str, int], ...] = ()  # (("batch", B), ("m", M), ("n", N), ("k", K)); empty if not one shape

    @property
    def shape(self) -> dict[str, int]:
        """The sizes by name, as records and baseline entries carry them (plain data, no id to parse)."""
        return dict(self.sizes)

    @property
    def arithmetic_intensity(self) -> float:
        """FLOP per byte of device memory traffic."""
        return self.flops / self.bytes

    def value(self, seconds: float) -> float:
        """The primary metric for a call that took ``seconds``."""
        return tflops(self.flops, seconds) if self.metric == Metric.TFLOPS else gbps(self.bytes, seconds)


def _element_bytes(dtype: str) -> int:
    try:
        return Precision.ELEMENT_BYTES[dtype]
    except KeyError as exc:
        raise ValueError(f"unknown dtype {dtype!r}: use one of {sorted(Precision.ELEMENT_BYTES)}") from exc


def _check_sizes(**sizes: int) -> None:
    bad = {name: size for name, size in sizes.items() if size < 1}
    if bad:
        raise ValueError(f"sizes must be positive, got {bad}")


def gemm_work(m: int, n: int, k: int, dtype: str, batch: int = 1, beta_nonzero: bool = False,
              out_dtype: str | None = None) -> Work:
    """Work of ``batch`` products ``C[m×n] = α·A[m×k]·B[k×n] + β·C``; ``out_dtype`` when C is stored in another
    type than A and B (an FP8 product with a BF16 output: ``gemm_work(m, n, k, "fp8", out_dtype="bf16")``)."""
    _check_sizes(m=m, n=n, k=k, batch=batch)
    out_bytes = _element_bytes(out_dtype or dtype)
    operands = (m * k + k * n) * _element_bytes(dtype) + m * n * out_bytes * (2 if beta_nonzero else 1)
    return Work(
        flops=2.0 * m * n * k * batch,
        bytes=float(operands * batch),
        precision=Precision.of(dtype),
        metric=Metric.TFLOPS,
        sizes=(("batch", batch), ("m", m), ("n", n), ("k", k)),
    )


def gemv_work(
    m: int, n: int, dtype: str, batch: int = 1, beta_nonzero: bool = False, shared_matrix: bool = False
) -> Work:
    """Work of ``batch`` products ``y[m] = α·A[m×n]·x[n] + β·y``; ``shared_matrix``: one A for all."""
    _check_sizes(m=m, n=n, batch=batch)
    matrix = m * n * (1 if shared_matrix else batch)
    vectors = (n + m * (2 if beta_nonzero else 1)) * batch
    return Work(
        flops=2.0 * m * n * batch,
        bytes=float((matrix + vectors) * _element_bytes(dtype)),
        precision=Precision.of(dtype),
        metric=Metric.GBPS,
        sizes=(("batch", batch), ("m", m), ("n", n)),
    )


def elementwise_work(n: int, dtype: str, inputs: int = 2, outputs: int = 1, flops_per_element: int = 1,
                     sizes: tuple[tuple[str, int], ...] = ()) -> Work:
    """Work of an elementwise operation over ``n`` elements (``c = a + b``: 2 inputs, 1 output, 1 FLOP each):
    each input and output moved once; memory-bound, so its figure is GB/s."""
    _check_sizes(n=n, inputs=max(inputs, 1), outputs=outputs)
    return Work(flops=float(flops_per_element * n), bytes=float((inputs + outputs) * n * _element_bytes(dtype)),
                precision=Precision.of(dtype), metric=Metric.GBPS, sizes=sizes or (("n", n),))


def reduction_work(rows: int, cols: int, dtype: str, outputs_per_row: int = 1, flops_per_element: int = 1,
                   sizes: tuple[tuple[str, int], ...] = ()) -> Work:
    """Work of a reduction of each of ``rows`` rows of ``cols`` elements to ``outputs_per_row`` values (a row sum:
    1; a softmax, which writes every element back: ``cols``; count its exp, max and sum as ``flops_per_element``):
    the input read once, the outputs written once; GB/s."""
    _check_sizes(rows=rows, cols=cols, outputs_per_row=outputs_per_row)
    element = _element_bytes(dtype)
    return Work(flops=float(flops_per_element * rows * cols),
                bytes=float(rows * (cols + outputs_per_row) * element), precision=Precision.of(dtype),
                metric=Metric.GBPS, sizes=sizes or (("rows", rows), ("cols", cols)))


def attention_work(batch: int, heads: int, seq_q: int, seq_k: int, dim: int, dtype: str, causal: bool = False,
                   kv_heads: int | None = None) -> Work:
    """Work of scaled-dot-product attention's forward pass, ``O = softmax(Q·Kᵀ/√d)·V``, as FlashAttention counts
    it: two products of ``2·seq_q·seq_k·dim`` FLOPs per head (``Q·Kᵀ`` and ``P·V``), halved when causal (the masked
    half is skipped); Q, K, V read once and O written once (K and V shared by ``heads / kv_heads`` query heads
    under grouped-query attention); TFLOPS."""
    kv = heads if kv_heads is None else kv_heads
    _check_sizes(batch=batch, heads=heads, seq_q=seq_q, seq_k=seq_k, dim=dim, kv_heads=kv)
    flops = 4.0 * batch * heads * seq_q * seq_k * dim * (0.5 if causal else 1.0)
    elements = batch * (2 * heads * seq_q * dim + 2 * kv * seq_k * dim)
    sizes = (("batch", batch), ("heads", heads), ("seq_q", seq_q), ("seq_k", seq_k), ("dim", dim))
    return Work(flops=flops, bytes=float(elements * _element_bytes(dtype)), precision=Precision.of(dtype),
                metric=Metric.TFLOPS, sizes=sizes + ((("kv_heads", kv),) if kv != heads else ()))


def tflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e12


def gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9


def percent_of(value: float, peak: float) -> float:
    return 100.0 * value / peak
