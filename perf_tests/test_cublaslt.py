"""cuBLASLt: how far the default heuristic is from the best candidate.

For each shape, cuBLASLt's heuristic proposes a ranked list of algorithms; every candidate is timed with the
suite's own ``measure``. The default (rank 0) is gated against the baseline like any other GEMM; its gap to
the fastest candidate is reported, and a gap above 30 % is called out as "shape not well covered": that is
where a custom kernel can pay off. The default and the best candidate must also be *right*: a fast wrong
algorithm would make the comparison meaningless.

nvmath-python is optional; without it every case skips with the install command.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
import pytest

from gpuperf.suite.accuracy import assert_gemm_close
from gpuperf.suite.cases import GemmShape, load_cases
from gpuperf.measure.metrics import gemm_work

CASES = load_cases("cublaslt")  # before the importorskip: a broken table fails collection with or without CuPy
cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
from kernels import cublaslt, operands  # noqa: E402  (after the importorskip)

PERF_CASES = [pytest.param(case["dtype"], case["shape"], id=f"{case['dtype']}-{case['shape']}",
                           marks=[pytest.mark.slow] if case.get("slow") else [])
              for case in CASES["perf"]]
CORRECTNESS_SHAPES: list[GemmShape] = CASES["correctness"]["shapes"]
CORRECTNESS_DTYPES: list[str] = CASES["correctness"]["dtypes"]

#: A default this far below the best candidate means the library does not cover the shape well.
NOT_COVERED_GAP = 0.30
#: Rows of C checked against float64 on a perf shape: the first and last rows (edge tiles) and a spread
#: between, all columns. Keeps the CPU reference to ~64·K·N multiply-adds on the largest shapes.
EDGE_ROWS, SPREAD_ROWS = 16, 32


class ShapeNotCoveredWarning(UserWarning):
    """cuBLASLt's default algorithm is more than ``NOT_COVERED_GAP`` behind its best candidate."""


@pytest.fixture(autouse=True)
def _needs_cublaslt() -> None:
    reason = cublaslt.available()
    if reason is not None:
        pytest.skip(reason)


def _checked_rows(m: int) -> np.ndarray:
    edges = np.r_[np.arange(min(EDGE_ROWS, m)), np.arange(max(m - EDGE_ROWS, 0), m)]
    return np.unique(np.r_[edges, np.linspace(0, m - 1, SPREAD_ROWS).astype(np.int64)])


def _assert_candidate_correct(lt: cublaslt.LtMatmul, rank: int, a: Any, b: Any, rows: np.ndarray) -> None:
    """Run candidate ``rank`` once into a NaN-poisoned output and hold the checked rows to the path's bound."""
    out = operands.nan_operand((lt.m, lt.n), lt.dtype)
    lt.run(rank, a, b, out)
    device_rows = cupy.asarray(rows)
    try:
        assert_gemm_close(operands.to_host(out[device_rows], lt.dtype), operands.to_host(a[device_rows], lt.dtype),
                          operands.to_host(b, lt.dtype), path=lt.path.accuracy)
    except AssertionError as exc:
        raise AssertionError(f"cuBLASLt candidate {lt.candidates[rank].label} of {lt!r} is wrong: {exc}") from exc


@pytest.mark.cublaslt
@pytest.mark.gemm
@pytest.mark.perf
@pytest.mark.parametrize(("dtype", "shape"), PERF_CASES)
def test_cublaslt_heuristic_vs_best(dtype: str, shape: GemmShape, stream: Any, rng: np.random.Generator,
                                    measure: Any, perf: Any) -> None:
    m, n, k = shape.m, shape.n, shape.k
    a = operands.random_operand(rng, (m, k), dtype)
    b = operands.random_operand(rng, (k, n), dtype)
    c = operands.nan_operand((m, n), dtype)
    work = gemm_work(m, n, k, dtype)

    with cublaslt.LtMatmul(m, n, k, dtype) as lt:
        timed: list[tuple[cublaslt.Candidate, Any]] = []
        failed: list[str] = []
        for candidate in lt.candidates:
            try:
                measurement = measure(functools.partial(lt.run, candidate.rank), work, operands=(a, b, c),
                                      label=candidate.label)
            except cublaslt.LtError as exc:
                if candidate.rank == 0:
                    raise
                failed.append(f"{candidate.label}: {exc}")
                continue
            timed.append((candidate, measurement))
        default_candidate, default = timed[0]
        best_candidate, best = max(timed, key=lambda pair: pair[1].value)

        rows = _checked_rows(m)
        _assert_candidate_correct(lt, default_candidate.rank, a, b, rows)
        if best_candidate.rank != default_candidate.rank:
            _assert_candidate_correct(lt, best_candidate.rank, a, b, rows)

        measured = {candidate.rank: measurement.value for candidate, measurement in timed}
        print(cublaslt.format_table([(candidate, measured.get(candidate.rank)) for candidate in lt.candidates],
                                    title=f"cuBLASLt {cublaslt.version()} {shape} {dtype} "
                                          f"({lt.types.compute_name}), {default.flush}"))
        gap = cublaslt.gap(default.value, best.value)
        perf.note(f"cuBLASLt {len(lt.candidates)} candidates: default {default_candidate.label} "
                  f"{default.value:.1f}, best {best_candidate.label} {best.value:.1f} TFLOPS, "
                  f"default {100 * gap:.1f} % behind")
        if failed:
            perf.note(f"{len(failed)} candidates did not run: {'; '.join(failed)}")
        if gap > NOT_COVERED_GAP:
            message = (f"shape not well covered: cuBLASLt's default for {shape} {dtype} is {100 * gap:.0f} % "
                       f"behind its best candidate ({best_candidate.label}); a custom kernel could pay off here")
            perf.note(message)
            warnings.warn(ShapeNotCoveredWarning(message), stacklevel=1)
        perf.check(default)  # inside the block: a suspected regression is re-measured with the same plan


@pytest.mark.cublaslt
@pytest.mark.gemm
@pytest.mark.correctness
@pytest.mark.parametrize("shape", CORRECTNESS_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", CORRECTNESS_DTYPES)
def test_cublaslt_every_candidate_correct(dtype: str, shape: GemmShape, stream: Any,
                                          rng: np.random.Generator) -> None:
    """Every candidate the heuristic offers, not just the default, computes the right product."""
    a = operands.random_operand(rng, (shape.m, shape.k), dtype)
    b = operands.random_operand(rng, (shape.k, shape.n), dtype)
    with cublaslt.LtMatmul(shape.m, shape.n, shape.k, dtype) as lt:
        rows = np.arange(shape.m)
        for candidate in lt.candidates:
            _assert_candidate_correct(lt, candidate.rank, a, b, rows)
