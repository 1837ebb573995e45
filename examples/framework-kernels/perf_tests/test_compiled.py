"""A ``torch.compile``d fused elementwise function (ops.fused_gelu: gelu(x + bias) * scale, which Inductor fuses
into one Triton kernel), right against float64 and gated on its speed."""

from __future__ import annotations

from typing import Any

import numpy
import pytest

try:
    import torch
except ImportError:  # collected, and skipped with the reason, where PyTorch is missing
    torch = None

from gpuperf.measure.metrics import elementwise_work
from gpuperf.suite.accuracy import assert_within, random_operand
from gpuperf.suite.cases import SizedCase, load_cases
from references import gelu_tanh_float64

CASES = load_cases("fused_gelu")
pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install torch")
SCALE = 1.7
U_BF16 = 2.0**-8
#: FLOPs per element: the add, the tanh approximation's polynomial and tanh, and the two products.
GELU_FLOPS = 10


def _operands(rng: Any, n: int) -> tuple[Any, Any]:
    x = torch.from_numpy(random_operand(rng, (n,)) * 3).to("cuda", torch.bfloat16)
    bias = torch.from_numpy(random_operand(rng, (n,))).to("cuda", torch.bfloat16)
    return x, bias


@pytest.mark.correctness
@pytest.mark.parametrize("case", CASES["correctness"], ids=str)
def test_fused_gelu_matches_float64(case: SizedCase, stream: Any, rng: Any) -> None:
    from ops import fused_gelu

    x, bias = _operands(rng, case["n"])
    got = fused_gelu(x, bias, SCALE)
    ref = gelu_tanh_float64(x.double().cpu().numpy() + bias.double().cpu().numpy()) * SCALE
    # computed in float32 inside the kernel, rounded once to bf16 on the way out
    assert_within(got.double().cpu().numpy(), ref, U_BF16 * numpy.abs(ref) + 1e-6, "fused gelu")


@pytest.mark.perf
@pytest.mark.parametrize("case", CASES["perf"], ids=str)
def test_fused_gelu_perf(case: SizedCase, rng: Any, measure: Any, perf: Any) -> None:
    from ops import fused_gelu

    x, bias = _operands(rng, case["n"])
    work = elementwise_work(case["n"], "bf16", inputs=2, outputs=1, flops_per_element=GELU_FLOPS, sizes=case.sizes)
    perf.check(measure(lambda x, bias: fused_gelu(x, bias, SCALE), work, operands=(x, bias),
                       label="torch.compile gelu bf16"))
