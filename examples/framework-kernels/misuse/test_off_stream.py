"""What gpuperf says when a perf test measures work it cannot see: each of these fails, by design, with one ERROR
line naming what ran where and the fix, and no figure is recorded (run ``python3 -m pytest misuse``; the
project's own ``python3 -m pytest`` leaves this folder out)."""

from __future__ import annotations

from typing import Any

import pytest

try:
    import torch
except ImportError:  # collected, and skipped with the reason, where PyTorch is missing
    torch = None

from gpuperf.measure.metrics import gemm_work

SIZE = 4096
pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: pip install torch")


def _matrices() -> tuple[Any, Any, Any]:
    a, b = (torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return a, b, torch.empty_like(a)


@pytest.mark.perf
def test_mm_on_a_side_stream_it_creates(measure: Any, perf: Any) -> None:
    """The kernels run on a stream the measuring stream never waits for: ERROR, never a figure."""
    a, b, c = _matrices()
    side = torch.cuda.Stream()

    def mm_elsewhere() -> None:
        with torch.cuda.stream(side):
            torch.mm(a, b, out=c)

    perf.check(measure(mm_elsewhere, gemm_work(SIZE, SIZE, SIZE, "bf16"), label="torch.mm on a side stream"))


@pytest.mark.perf
def test_a_call_that_launches_no_kernel(measure: Any, perf: Any) -> None:
    """A view is no work on the device: ERROR, never a figure."""
    a, _, _ = _matrices()
    perf.check(measure(lambda: a.view(-1), gemm_work(SIZE, SIZE, SIZE, "bf16"), label="a view"))
