"""This project's tiled SGEMM: correct against float64 on fresh random data, and gated on its speed.

Every fixture here (``stream``, ``rng``, ``measure``, ``perf``) comes from the installed gpuperf plugin; without
CuPy or a GPU each test is skipped with the reason and the fix.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuperf.measure.metrics import gemm_work
from gpuperf.suite.accuracy import assert_gemm_close, random_operand
from gpuperf.suite.cases import GemmShape, load_cases
from own_sgemm import sgemm

CASES = load_cases("gemm")  # cases/gemm.yaml, from the gpuperf_cases ini key
PERF_SHAPES = [shape for group in CASES["perf"] for shape in group["shapes"]]

pytestmark = pytest.mark.gemm


def _operands(rng: Any, shape: GemmShape) -> tuple[Any, Any, Any, Any, Any]:
    """Fresh random A and B on the device (and on the host, for the reference), C poisoned with NaN."""
    import cupy

    a = random_operand(rng, (shape.m, shape.k))
    b = random_operand(rng, (shape.k, shape.n))
    c = cupy.full((shape.m, shape.n), cupy.nan, dtype=cupy.float32)
    return a, b, cupy.asarray(a), cupy.asarray(b), c


@pytest.mark.correctness
@pytest.mark.parametrize("shape", CASES["correctness"]["shapes"], ids=str)
def test_own_sgemm_matches_float64(shape: GemmShape, stream: Any, rng: Any) -> None:
    import cupy

    a, b, a_dev, b_dev, c = _operands(rng, shape)
    sgemm(a_dev, b_dev, c)
    assert_gemm_close(cupy.asnumpy(c), a, b, path="fp32")


@pytest.mark.perf
@pytest.mark.parametrize("shape", PERF_SHAPES, ids=str)
def test_own_sgemm_perf(shape: GemmShape, rng: Any, measure: Any, perf: Any) -> None:
    _, _, a_dev, b_dev, c = _operands(rng, shape)
    m = measure(sgemm, gemm_work(shape.m, shape.n, shape.k, "fp32"), operands=(a_dev, b_dev, c))
    perf.check(m)
