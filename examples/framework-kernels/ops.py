"""This project's PyTorch operations: a ``torch.compile``d fused elementwise function and a transformer MLP block
replayed from a CUDA graph. Both enqueue on PyTorch's current stream."""

from __future__ import annotations

import torch
import torch.nn.functional as F

GELU_APPROXIMATION = "tanh"


def gelu_bias_scale(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    return F.gelu(x + bias, approximate=GELU_APPROXIMATION) * scale


#: Compiled for each size it is called with (``dynamic=False``), so Inductor autotunes the kernel of the gated size at
#: that size. One kernel for every size (``dynamic=True``) is autotuned at the first size called, a correctness
#: test's, whatever runs later (evidence/framework-kernels.md: what that did on fresh machines).
fused_gelu = torch.compile(gelu_bias_scale, dynamic=False)


class MlpBlock:
    """``y = gelu(x·W1 + b1)·W2 + b2`` on fixed buffers, captured once into a CUDA graph; ``replay()`` enqueues
    the whole block on the current stream."""

    def __init__(self, x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                 b2: torch.Tensor) -> None:
        self.x, self.w1, self.b1, self.w2, self.b2 = x, w1, b1, w2, b2
        self.out = torch.empty(x.shape[0], w2.shape[1], dtype=x.dtype, device=x.device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up outside the capture, as CUDA graphs require
            self._forward()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._forward()

    def _forward(self) -> None:
        hidden = F.gelu(torch.addmm(self.b1, self.x, self.w1), approximate=GELU_APPROXIMATION)
        torch.addmm(self.b2, hidden, self.w2, out=self.out)

    def replay(self) -> None:
        self.graph.replay()

    @staticmethod
    def flops(tokens: int, hidden: int, intermediate: int) -> float:
        return 2.0 * tokens * hidden * intermediate * 2
