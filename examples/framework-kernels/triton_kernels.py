"""This project's Triton kernels: an elementwise add and a row-wise softmax.

Each launcher enqueues one kernel on PyTorch's current stream (Triton launches there), which gpuperf makes its
measuring stream while a GPU test runs: no stream code here. A ``@triton.jit`` function's parameters carry no
annotation but ``tl.constexpr`` (Triton compiles its source and reads no global but constants), and the module does
not postpone annotations, so Triton sees ``tl.constexpr`` itself.
"""

import torch
import triton
import triton.language as tl

ADD_BLOCK = 1024


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    """``out = x + y`` for contiguous tensors of one size (no synchronisation)."""
    n = out.numel()
    add_kernel[(triton.cdiv(n, ADD_BLOCK),)](x, y, out, n, BLOCK=ADD_BLOCK)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(in_ptr + row * in_stride + offsets, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * out_stride + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


def softmax(x: torch.Tensor, out: torch.Tensor) -> None:
    """``out[i] = softmax(x[i])`` row by row, one program per row (a row must fit one block)."""
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=block,
                            num_warps=8 if block >= 2048 else 4)
