"""A transformer MLP block captured into a CUDA graph and replayed (ops.MlpBlock): right against float64 and gated
on its speed. ``graph.replay()`` enqueues on PyTorch's current stream, which gpuperf makes its measuring stream."""

from __future__ import annotations

from typing import Any

import numpy
import pytest

try:
    import torch
except ImportError:  # collected, and skipped with the reason, where PyTorch is missing
    torch = None

from gpuperf.measure.metrics import Work
from gpuperf.suite.accuracy import assert_within, random_operand
from gpuperf.suite.cases import SizedCase, load_cases
from gpuperf.vocabulary import Metric
from references import gelu_tanh_float64

CASES = load_cases("mlp_block")
pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install torch")
EXPANSION = 4  # the intermediate size, × hidden
U_BF16 = 2.0**-8


def _block(rng: Any, case: SizedCase) -> Any:
    from ops import MlpBlock

    tokens, hidden = case["tokens"], case["hidden"]
    inner = EXPANSION * hidden

    def bf16(*shape: int, scale: float = 1.0) -> Any:
        return torch.from_numpy(random_operand(rng, shape) * scale).to("cuda", torch.bfloat16)

    return MlpBlock(bf16(tokens, hidden), bf16(hidden, inner, scale=hidden**-0.5), bf16(inner),
                    bf16(inner, hidden, scale=inner**-0.5), bf16(hidden))


def _f64(tensor: Any) -> Any:
    return tensor.double().cpu().numpy()


@pytest.mark.correctness
@pytest.mark.parametrize("case", CASES["correctness"], ids=str)
def test_replayed_block_matches_float64(case: SizedCase, stream: Any, rng: Any) -> None:
    block = _block(rng, case)
    block.out.fill_(float("nan"))
    block.replay()
    x, w1, b1, w2, b2 = map(_f64, (block.x, block.w1, block.b1, block.w2, block.b2))
    hidden = gelu_tanh_float64(x @ w1 + b1)
    ref = hidden @ w2 + b2
    # the intermediate is stored in bf16 (one rounding, through a GELU of slope ≤ 1.13) and so is the output;
    # both products accumulate in float32, whose error is far below either rounding
    magnitude = 1.13 * (numpy.abs(x) @ numpy.abs(w1) + numpy.abs(b1)) @ numpy.abs(w2)
    bound = 2 * U_BF16 * (magnitude + numpy.abs(b2)) + U_BF16 * numpy.abs(ref)
    assert_within(_f64(block.out), ref, bound, "MLP block")


@pytest.mark.perf
@pytest.mark.parametrize("case", CASES["perf"], ids=str)
def test_replayed_block_perf(case: SizedCase, rng: Any, measure: Any, perf: Any) -> None:
    block = _block(rng, case)
    tokens, hidden = case["tokens"], case["hidden"]
    inner = EXPANSION * hidden
    moved = 2 * (tokens * hidden * 2 + hidden * inner * 2 + inner + hidden + tokens * inner * 2)  # bf16 bytes
    work = Work(flops=block.flops(tokens, hidden, inner), bytes=float(moved), precision="bf16",
                metric=Metric.TFLOPS, sizes=case.sizes)
    perf.check(measure(block.replay, work, label="CUDA graph MLP block bf16"))
