"""Copies of a call's operands for rotated samples: a short cold call is timed k at a time over copies whose total
exceeds twice the L2 (``timing.py``), so each call finds its data evicted. Copies keep meaning only for contiguous
arrays; a CuPy or NumPy array says so by its flags, a PyTorch tensor by ``is_contiguous()``.

``relocated``: copies in device memory of their own, for the rounds of an A/B run. Where a buffer lands in the
GPU's memory moves a memory-bound call's speed by a few per cent (on an H200, A/A rounds of a GEMV kept one side
1.9–3.1 % slower than the other, round after round, in two processes measuring the same commit): a process keeps
its placement for good, so pairing cannot cancel it. Copying each round's operands to a fresh allocation makes the
placement vary from round to round on both sides, so it becomes noise the paired interval sees instead of a bias.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def array_bytes(operands: Sequence[Any]) -> int:
    return sum(int(getattr(op, "nbytes", 0)) for op in operands)


def rotatable(operands: Sequence[Any]) -> bool:
    """Copies keep meaning only for contiguous arrays (a padded-ld view would lose its padding)."""
    arrays = [op for op in operands if hasattr(op, "nbytes")]
    return bool(arrays) and all(_contiguous(op) for op in arrays)


def _contiguous(array: Any) -> bool:
    """A CuPy or NumPy array's flags, or a PyTorch tensor's ``is_contiguous()``; anything else is not known to be."""
    flags = getattr(array, "flags", None)
    if flags is not None:
        return bool(flags.c_contiguous or flags.f_contiguous)
    is_contiguous = getattr(array, "is_contiguous", None)
    return bool(is_contiguous()) if callable(is_contiguous) else False


def relocated(operands: Sequence[Any]) -> tuple[Any, ...]:
    """The operands with every contiguous CuPy array copied to a fresh ``cudaMalloc`` (outside CuPy's pool, which
    would hand the freed block back) and every contiguous PyTorch tensor cloned; anything else as it is."""
    return tuple(_own_copy(op) if _contiguous(op) else op for op in operands)


def _own_copy(operand: Any) -> Any:
    module = type(operand).__module__.split(".")[0]
    if module == "torch":
        return operand.clone()
    if module != "cupy":
        return operand
    import cupy

    memory = cupy.cuda.memory.Memory(max(int(operand.nbytes), 1))
    copy = cupy.ndarray(operand.shape, operand.dtype, cupy.cuda.MemoryPointer(memory, 0), strides=operand.strides)
    cupy.copyto(copy, operand)
    return copy


def copy_operands(backend: Any, operands: Sequence[Any], count: int) -> list[tuple[Any, ...]]:
    sets = [tuple(operands)]
    for _ in range(count - 1):
        sets.append(tuple(backend.copy(op) if hasattr(op, "nbytes") else op for op in operands))
    return sets
