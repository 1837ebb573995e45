"""Ten operators of different kinds at sizes a user gates, written as a user's tests are (no stream code), each
right against float64 on fresh random data and measured; ``tools/gpu_host/profiler_check.py`` traces the same calls with
torch.profiler for the comparison in evidence/opinfo-sweep.md. ``layer_norm`` (fp16 16384×8192) and ``softmax`` (fp32
4096×393216) are two whose kernels live in anonymous namespaces (``void at::native::(anonymous namespace)::…``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

from gpuperf.measure.metrics import Work, attention_work, elementwise_work, gemm_work, reduction_work

pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install torch")


@dataclass(frozen=True)
class Operator:
    """One operator: its operands from a generator, the call, its float64 reference and its work."""

    name: str
    operands: Callable[[Any], tuple[Any, ...]]
    call: Callable[..., Any]
    reference: Callable[..., Any]  # the same operation on float64 copies of the operands
    work: Callable[[], Work]
    rtol: float
    #: The part of the operands the float64 check runs on (attention's float64 scores at full size: 34 GB).
    checked: Callable[[tuple[Any, ...]], tuple[Any, ...]] = lambda operands: operands


def _rand(rng: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    generator = torch.Generator(device="cuda").manual_seed(int(rng.integers(2**31)))
    return torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32).to(dtype)


def _operators() -> list[Operator]:
    if torch is None:
        return []
    f16, f32, bf16 = torch.float16, torch.float32, torch.bfloat16
    n_add, rows, cols, sm_rows, sm_cols = 2**26, 16384, 8192, 4096, 393216
    index_rows, index_cols = 2**20, 64
    compiled_gelu = torch.compile(lambda x: F.gelu(x, approximate="tanh") * 1.7, dynamic=False)
    return [
        Operator("add", lambda r: (_rand(r, (n_add,), f32), _rand(r, (n_add,), f32)), torch.add, torch.add,
                 lambda: elementwise_work(n_add, "fp32", inputs=2, outputs=1), 1e-6),
        Operator("sum", lambda r: (_rand(r, (rows, cols), f32),), lambda x: torch.sum(x, dim=1),
                 lambda x: torch.sum(x, dim=1), lambda: reduction_work(rows, cols, "fp32"), 1e-4),
        Operator("layer_norm", lambda r: (_rand(r, (rows, cols), f16),), lambda x: F.layer_norm(x, (cols,)),
                 lambda x: F.layer_norm(x, (cols,)), lambda: reduction_work(rows, cols, "fp16", outputs_per_row=cols,
                                                                            flops_per_element=5), 4e-3),
        Operator("softmax", lambda r: (_rand(r, (sm_rows, sm_cols), f32),), lambda x: torch.softmax(x, dim=1),
                 lambda x: torch.softmax(x, dim=1), lambda: reduction_work(sm_rows, sm_cols, "fp32",
                                                                          outputs_per_row=sm_cols,
                                                                          flops_per_element=4), 1e-4),
        Operator("index_add",
                 lambda r: (_rand(r, (index_rows, index_cols), f32),
                            torch.randint(0, index_rows, (index_rows,), device="cuda",
                                          generator=torch.Generator(device="cuda").manual_seed(int(r.integers(2**31)))),
                            _rand(r, (index_rows, index_cols), f32)),
                 lambda x, i, s: x.index_add(0, i, s), lambda x, i, s: x.index_add(0, i, s),
                 lambda: elementwise_work(index_rows * index_cols, "fp32", inputs=2, outputs=1), 1e-5),
        Operator("sort", lambda r: (_rand(r, (2**24,), f32),), lambda x: torch.sort(x).values,
                 lambda x: torch.sort(x).values, lambda: elementwise_work(2**24, "fp32", inputs=1, outputs=1), 0.0),
        Operator("conv2d", lambda r: (_rand(r, (32, 256, 56, 56), bf16), _rand(r, (256, 256, 3, 3), bf16) * 0.05),
                 lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: F.conv2d(x, w, padding=1),
                 lambda: gemm_work(32 * 56 * 56, 256, 256 * 9, "bf16"), 2e-2),
        Operator("mm", lambda r: (_rand(r, (4096, 4096), bf16), _rand(r, (4096, 4096), bf16)), torch.mm, torch.mm,
                 lambda: gemm_work(4096, 4096, 4096, "bf16"), 2e-2),
        Operator("sdpa", lambda r: tuple(_rand(r, (8, 32, 4096, 128), bf16) for _ in range(3)),
                 lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                 lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                 lambda: attention_work(8, 32, 4096, 4096, 128, "bf16", causal=True), 2e-2,
                 checked=lambda operands: tuple(o[:1, :4] for o in operands)),
        Operator("compiled_gelu", lambda r: (_rand(r, (n_add,), bf16),), compiled_gelu,
                 lambda x: F.gelu(x, approximate="tanh") * 1.7,
                 lambda: elementwise_work(n_add, "bf16", inputs=1, outputs=1, flops_per_element=10), 2e-2),
    ]


OPERATORS = {op.name: op for op in _operators()}


@pytest.mark.correctness
@pytest.mark.parametrize("name", list(OPERATORS) or ["none"])
def test_operator_matches_float64(name: str, stream: Any, rng: Any) -> None:
    op = OPERATORS[name]
    operands = op.checked(op.operands(rng))
    got = op.call(*operands).double()
    ref = op.reference(*[o.double() if o.is_floating_point() else o for o in operands])
    error = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
    assert math.isfinite(error) and error <= max(op.rtol, 1e-12), f"{name}: relative error {error:.3g}"


@pytest.mark.perf
@pytest.mark.parametrize("name", list(OPERATORS) or ["none"])
def test_operator_perf(name: str, rng: Any, measure: Any, perf: Any) -> None:
    op = OPERATORS[name]
    operands = op.operands(rng)
    perf.check(measure(op.call, op.work(), operands=operands, label=name))
