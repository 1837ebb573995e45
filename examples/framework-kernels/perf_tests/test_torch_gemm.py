"""torch.mm on bf16 matrices: right against float64 on fresh random data, and gated on its speed.

No stream code: while a GPU test runs, gpuperf makes its measuring stream PyTorch's current stream, so
``torch.mm`` runs where the suite measures. Without PyTorch or a GPU every test is skipped with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest

try:
    import torch
except ImportError:  # collected, and skipped with the reason, where PyTorch is missing
    torch = None

from gpuperf.measure.metrics import gemm_work
from gpuperf.suite.accuracy import assert_gemm_close, random_operand
from gpuperf.suite.cases import SizedCase, load_cases

CASES = load_cases("torch_gemm")  # cases/torch_gemm.yaml

pytestmark = [pytest.mark.gemm,
              pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install torch")]


def _operands(rng: Any, case: SizedCase) -> tuple[Any, Any, Any]:
    a = torch.from_numpy(random_operand(rng, (case["m"], case["k"]))).to("cuda", torch.bfloat16)
    b = torch.from_numpy(random_operand(rng, (case["k"], case["n"]))).to("cuda", torch.bfloat16)
    c = torch.full((case["m"], case["n"]), float("nan"), dtype=torch.bfloat16, device="cuda")
    return a, b, c


@pytest.mark.correctness
@pytest.mark.parametrize("case", CASES["correctness"], ids=str)
def test_bf16_mm_matches_float64(case: SizedCase, stream: Any, rng: Any) -> None:
    a, b, c = _operands(rng, case)
    torch.mm(a, b, out=c)
    assert_gemm_close(c.double().cpu().numpy(), a.double().cpu().numpy(), b.double().cpu().numpy(), path="bf16")


@pytest.mark.perf
@pytest.mark.parametrize("case", CASES["perf"], ids=str)
def test_bf16_mm_perf(case: SizedCase, rng: Any, measure: Any, perf: Any) -> None:
    a, b, c = _operands(rng, case)
    m = measure(lambda a, b, c: torch.mm(a, b, out=c), gemm_work(case["m"], case["n"], case["k"], "bf16"),
                operands=(a, b, c), label="torch.mm bf16")
    perf.check(m)
