"""``torch.nn.functional.scaled_dot_product_attention`` on bf16 (PyTorch picks its flash kernel): right against
float64 and gated on its speed, counted as FlashAttention counts it (``attention_work``)."""

from __future__ import annotations

from typing import Any

import numpy
import pytest

try:
    import torch
except ImportError:  # collected, and skipped with the reason, where PyTorch is missing
    torch = None

from gpuperf.measure.metrics import attention_work
from gpuperf.suite.accuracy import assert_within, random_operand
from gpuperf.suite.cases import SizedCase, load_cases

CASES = load_cases("attention")
pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install torch")
U_BF16 = 2.0**-8


def _qkv(rng: Any, case: SizedCase) -> tuple[Any, Any, Any]:
    shape = (case["batch"], case["heads"], case["seq"], case["dim"])
    return tuple(torch.from_numpy(random_operand(rng, shape)).to("cuda", torch.bfloat16)  # type: ignore[return-value]
                 for _ in range(3))


def _attention(q: Any, k: Any, v: Any, causal: bool) -> Any:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


@pytest.mark.correctness
@pytest.mark.parametrize("case", CASES["correctness"], ids=str)
def test_attention_matches_float64(case: SizedCase, stream: Any, rng: Any) -> None:
    q, k, v = _qkv(rng, case)
    got = _attention(q, k, v, case["causal"]).double().cpu().numpy()
    q64, k64, v64 = (t.double().cpu().numpy() for t in (q, k, v))
    scores = q64 @ k64.swapaxes(-1, -2) / numpy.sqrt(case["dim"])
    if case["causal"]:
        scores = numpy.where(numpy.tril(numpy.ones(scores.shape[-2:], dtype=bool)), scores, -numpy.inf)
    weights = numpy.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    ref = weights @ v64
    # the weights are rounded to bf16 before they multiply V, and the output is rounded to bf16
    bound = 2 * U_BF16 * (weights @ numpy.abs(v64)) + U_BF16 * numpy.abs(ref)
    assert_within(got, ref, bound, "attention")


@pytest.mark.perf
@pytest.mark.parametrize("case", CASES["perf"], ids=str)
def test_attention_perf(case: SizedCase, rng: Any, measure: Any, perf: Any) -> None:
    q, k, v = _qkv(rng, case)
    work = attention_work(case["batch"], case["heads"], case["seq"], case["seq"], case["dim"], "bf16",
                          causal=case["causal"])
    perf.check(measure(lambda q, k, v: _attention(q, k, v, case["causal"]), work, operands=(q, k, v),
                       label="sdpa bf16"))
