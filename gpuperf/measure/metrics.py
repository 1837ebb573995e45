"""FLOP and byte counts of the operations under test, and the figures derived from a time.

Conventions (the usual ones, so figures compare with other benchmarks):
- GEMM does ``2·M·N·K`` FLOPs (one multiply and one add per term), × batch.
- GEMV does ``2·M·N`` FLOPs, × batch.
- Bytes are the fewest the operation must move: every operand read once and the output written once;
  C is read as well when ``beta ≠ 0``. A matrix shared by every item of a batch (``strideA = 0``) is
  read once.

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


def gemm_work(m: int, n: int, k: int, dtype: str, batch: int = 1, beta_nonzero: bool = False) -> Work:
    """Work of ``batch`` products ``C[m×n] = α·A[m×k]·B[k×n] + β·C``."""
    _check_sizes(m=m, n=n, k=k, batch=batch)
    elements = m * k + k * n + m * n * (2 if beta_nonzero else 1)
    return Work(
        flops=2.0 * m * n * k * batch,
        bytes=float(elements * batch * _element_bytes(dtype)),
        precision=dtype,
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
        precision=dtype,
        metric=Metric.GBPS,
        sizes=(("batch", batch), ("m", m), ("n", n)),
    )


def tflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e12


def gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9


def percent_of(value: float, peak: float) -> float:
    return 100.0 * value / peak
