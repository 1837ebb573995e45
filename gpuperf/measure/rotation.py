"""Copies of a call's operands for rotated samples: a short cold call is timed k at a time over copies whose total
exceeds twice the L2 (``timing.py``), so each call finds its data evicted. Copies keep meaning only for contiguous
arrays; a CuPy or NumPy array says so by its flags, a PyTorch tensor by ``is_contiguous()``.

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


def copy_operands(backend: Any, operands: Sequence[Any], count: int) -> list[tuple[Any, ...]]:
    sets = [tuple(operands)]
    for _ in range(count - 1):
        sets.append(tuple(backend.copy(op) if hasattr(op, "nbytes") else op for op in operands))
    return sets
