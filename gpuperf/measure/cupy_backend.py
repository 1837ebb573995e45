"""The device operations the measurement loop (``timing.py``) needs, on CuPy: the current stream, events, copies of
operands and the stream hold. Tests swap in a synthetic backend; CuPy is imported only when one is made.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuperf.measure.separators import StreamHold


class CupyBackend:
    """The device operations the loop needs, on CuPy. Tests swap in a synthetic backend."""

    def __init__(self) -> None:
        import cupy

        self.cupy = cupy

    def current_stream(self) -> Any:
        return self.cupy.cuda.get_current_stream()

    def event(self) -> Any:
        return self.cupy.cuda.Event()

    def elapsed_s(self, start: Any, stop: Any) -> float:
        return float(self.cupy.cuda.get_elapsed_time(start, stop)) / 1e3

    def copy(self, operand: Any) -> Any:
        """A copy of the same kind: a PyTorch tensor is cloned (on PyTorch's current stream, the measuring one),
        anything else copied by CuPy."""
        clone = getattr(operand, "clone", None)
        return clone() if callable(clone) else self.cupy.copy(operand)

    def hold(self, stream: Any) -> Callable[[], bool]:
        if not hasattr(self, "_hold"):
            self._hold = StreamHold()
        return self._hold.hold(stream)
