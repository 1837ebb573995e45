"""This project's Triton kernels (triton_kernels.py): an elementwise add and a row-wise softmax, right against
float64 on fresh random data and gated on their speed. Triton launches on PyTorch's current stream, which gpuperf
makes its measuring stream: no stream code here."""

from __future__ import annotations

from typing import Any

import numpy
import pytest

try:
    import torch
except ImportError:  # collected, and skipped with the reason, where PyTorch is missing
    torch = None
try:
    import triton_kernels
except ImportError:  # likewise where Triton is
    triton_kernels = None

from gpuperf.measure.metrics import elementwise_work, reduction_work
from gpuperf.suite.accuracy import assert_within, random_operand
from gpuperf.suite.cases import SizedCase, load_cases

ADD = load_cases("vector_add")
pytestmark = [
    pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install torch"),
    pytest.mark.skipif(triton_kernels is None, reason="Triton is not installed: pip install triton"),
]
SOFTMAX = load_cases("softmax")
U32 = 2.0**-24
#: Operations of a softmax row counted as FLOPs per element: max, subtract, exp, sum, divide.
SOFTMAX_FLOPS = 5


def _vectors(rng: Any, n: int) -> tuple[Any, Any, Any]:
    x = torch.from_numpy(random_operand(rng, (n,))).cuda()
    y = torch.from_numpy(random_operand(rng, (n,))).cuda()
    return x, y, torch.full((n,), float("nan"), device="cuda")


@pytest.mark.correctness
@pytest.mark.parametrize("case", ADD["correctness"], ids=str)
def test_add_matches_float64(case: SizedCase, stream: Any, rng: Any) -> None:
    x, y, out = _vectors(rng, case["n"])
    triton_kernels.add(x, y, out)
    ref = x.double().cpu().numpy() + y.double().cpu().numpy()
    assert_within(out.cpu().numpy(), ref, U32 * numpy.abs(ref), "add")  # one rounding of the exact sum


@pytest.mark.perf
@pytest.mark.parametrize("case", ADD["perf"], ids=str)
def test_add_perf(case: SizedCase, rng: Any, measure: Any, perf: Any) -> None:
    x, y, out = _vectors(rng, case["n"])
    m = measure(triton_kernels.add, elementwise_work(case["n"], "fp32", sizes=case.sizes), operands=(x, y, out),
                label="triton add fp32")
    perf.check(m)


def _matrix(rng: Any, case: SizedCase) -> tuple[Any, Any]:
    x = torch.from_numpy(random_operand(rng, (case["rows"], case["cols"])) * 4).cuda()
    return x, torch.full_like(x, float("nan"))


@pytest.mark.correctness
@pytest.mark.parametrize("case", SOFTMAX["correctness"], ids=str)
def test_softmax_matches_float64(case: SizedCase, stream: Any, rng: Any) -> None:
    x, out = _matrix(rng, case)
    triton_kernels.softmax(x, out)
    x64 = x.double().cpu().numpy()
    e = numpy.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    # the exp and the division each round once (a few ulps with Triton's fast exp), the row sum adds cols roundings
    bound = (8 + case["cols"]) * U32 * ref
    assert_within(out.cpu().numpy(), ref, bound, "softmax")


@pytest.mark.perf
@pytest.mark.parametrize("case", SOFTMAX["perf"], ids=str)
def test_softmax_perf(case: SizedCase, rng: Any, measure: Any, perf: Any) -> None:
    x, out = _matrix(rng, case)
    work = reduction_work(case["rows"], case["cols"], "fp32", outputs_per_row=case["cols"],
                          flops_per_element=SOFTMAX_FLOPS, sizes=case.sizes)
    perf.check(measure(triton_kernels.softmax, work, operands=(x, out), label="triton softmax fp32"))
