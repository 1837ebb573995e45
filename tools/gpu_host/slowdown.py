"""A pytest plugin that makes chosen cuBLAS calls genuinely slower, to show that the gate catches it.

For demonstrations only (``docs/fleet.md``: "a genuine 5 % slowdown caught on every GPU"). With
``GPUPERF_SLOWDOWN=0.05`` and ``-p tools.gpu_host.slowdown``, every ``kernels.cublas.gemv`` and non-transposed
``kernels.cublas.gemm`` of a performance test runs on operands whose *reduction* dimension is 5 % longer than
the case's (fresh random values): the same kernel, on the same grid (it is set by the output's size), does 5 %
more reads and FMAs, while the case still counts the work of its own shape. No figure is edited: the device
really spends longer. Correctness tests are left alone (their results would be wrong on longer operands).

Only the library call is slowed, never anything else put in the timed region:

- the longer operands of an operand set are made on its first call (the measurement's first, untimed, warm-up
  call) and, for the copies a cold-rotated measurement times in turn, when those copies are made
  (``gpuperf.measure.timing.copy_operands``, before any sample), never inside a timed call;
- a call from inside a slowed call (an FP16 GEMV is a GEMM with n = 1 in ``kernels.cublas``) goes to the
  library unchanged: slowing it twice made the GEMM path extend its operands again on every call, and operand
  generation then ran inside each timed call (an FP16 GEMV opN read -95.9 %, its kernels
  ``gpuperf_uniform_nonzero + cupy_copy…`` around the GEMM's);
- the longer operands are dropped at each test's end, so they hold no device memory beyond their case.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

#: The fraction of extra work, from the environment (unset or 0: the plugin does nothing).
SLOWDOWN_ENV = "GPUPERF_SLOWDOWN"

#: The extension is a whole number of these elements, so the longer operands keep the alignment (16 bytes and
#: more) of the case's own: an odd K cost cuBLAS its vector loads and made a "5 %" call 24 % slower on the H200.
ALIGN_ELEMENTS = 8

MakeOperand = Callable[[tuple[int, ...], str, str], Any]  # (shape, dtype, order) → fresh random operand


def longer(size: int, fraction: float) -> int:
    """The reduction size that carries at least ``fraction`` more work, extended by whole aligned steps."""
    return size + ALIGN_ELEMENTS * max(1, math.ceil(size * fraction / ALIGN_ELEMENTS))


def gemv_shapes(m: int, n: int, trans: bool, fraction: float) -> tuple[tuple[int, int], int]:
    """(A's shape, x's length) of a GEMV whose reduction is ``fraction`` longer: A's columns for ``y = A·x``,
    its rows for ``y = Aᵀ·x``; y keeps its length, so the kernel's grid stays the same."""
    if trans:
        rows = longer(m, fraction)
        return (rows, n), rows
    columns = longer(n, fraction)
    return (m, columns), columns


def gemm_shapes(m: int, n: int, k: int, fraction: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """(A's, B's) shapes of ``C = A·B`` (m×n) with k ``fraction`` longer."""
    k_long = longer(k, fraction)
    return (m, k_long), (k_long, n)


def _order(array: Any) -> str:
    flags = array.flags
    return "F" if flags.f_contiguous and not getattr(flags, "c_contiguous", False) else "C"


class Slowdown:
    """The slowed ``gemv``/``gemm`` around the library's, and the longer operands they use (by the identity of
    the case's operands, which are kept alive with them so an identity is never reused)."""

    def __init__(self, fraction: float, gemv: Callable[..., None], gemm: Callable[..., None],
                 make_operand: MakeOperand, copy: Callable[[Any], Any]) -> None:
        self.fraction, self.library_gemv, self.library_gemm = fraction, gemv, gemm
        self.make_operand, self.copy = make_operand, copy
        self.active = False  # inside a performance test
        self.inside = False  # inside a slowed call: calls from there go to the library unchanged
        self.longer: dict[tuple[int, int], tuple[Any, Any, Any, Any]] = {}
        self.made = 0  # operands made, for the tests

    def _make(self, shape: tuple[int, ...], dtype: str, order: str = "C") -> Any:
        self.made += 1
        return self.make_operand(shape, dtype, order)

    def _gemv_operands(self, a: Any, x: Any, dtype: str, trans: bool) -> tuple[Any, Any]:
        key = (id(a), id(x))
        if key not in self.longer:
            a_shape, x_len = gemv_shapes(a.shape[0], a.shape[1], trans, self.fraction)
            self.longer[key] = (a, x, self._make(a_shape, dtype, _order(a)), self._make((x_len,), dtype))
        return self.longer[key][2], self.longer[key][3]

    def _gemm_operands(self, a: Any, b: Any, dtype: str) -> tuple[Any, Any]:
        key = (id(a), id(b))
        if key not in self.longer:
            a_shape, b_shape = gemm_shapes(a.shape[0], b.shape[1], a.shape[1], self.fraction)
            self.longer[key] = (a, b, self._make(a_shape, dtype, _order(a)), self._make(b_shape, dtype, _order(b)))
        return self.longer[key][2], self.longer[key][3]

    def gemv(self, handle: int, a: Any, x: Any, y: Any, *, dtype: str = "fp32", trans: bool = False,
             **scalars: Any) -> None:
        if not self.active or self.inside:
            self.library_gemv(handle, a, x, y, dtype=dtype, trans=trans, **scalars)
            return
        a_long, x_long = self._gemv_operands(a, x, dtype, trans)
        self.inside = True
        try:
            self.library_gemv(handle, a_long, x_long, y, dtype=dtype, trans=trans, **scalars)
        finally:
            self.inside = False

    def gemm(self, handle: int, a: Any, b: Any, c: Any, *, dtype: str = "fp32", trans_a: bool = False,
             trans_b: bool = False, **scalars: Any) -> None:
        if not self.active or self.inside or trans_a or trans_b or a.ndim != 2:
            self.library_gemm(handle, a, b, c, dtype=dtype, trans_a=trans_a, trans_b=trans_b, **scalars)
            return
        a_long, b_long = self._gemm_operands(a, b, dtype)
        self.inside = True
        try:
            self.library_gemm(handle, a_long, b_long, c, dtype=dtype, **scalars)
        finally:
            self.inside = False

    def copied(self, original: Sequence[Any], copies: Sequence[Sequence[Any]]) -> None:
        """Operand sets copied from ``original`` for a rotated measurement: each gets copies of the original's
        longer operands now, before the samples that time them."""
        position = {id(operand): index for index, operand in enumerate(original)}
        for (first, second), (_, _, long_first, long_second) in list(self._of(original)):
            where = (position[id(first)], position[id(second)])  # by identity: == on arrays is elementwise
            for operands in copies:
                key = (id(operands[where[0]]), id(operands[where[1]]))
                if key not in self.longer:
                    self.longer[key] = (operands[where[0]], operands[where[1]], self.copy(long_first),
                                        self.copy(long_second))

    def _of(self, operands: Sequence[Any]) -> Iterator[tuple[tuple[Any, Any], tuple[Any, Any, Any, Any]]]:
        ids = {id(operand) for operand in operands}
        for (first, second), held in self.longer.items():
            if first in ids and second in ids:
                yield (held[0], held[1]), held

    def forget(self) -> None:
        self.longer.clear()


def _copy_hook(slowdown: Slowdown, copy_operands: Callable[..., list[tuple[Any, ...]]]) -> Callable[..., Any]:
    def copy_with_longer(backend: Any, operands: Sequence[Any], count: int) -> list[tuple[Any, ...]]:
        sets = copy_operands(backend, operands, count)
        slowdown.copied(operands, sets[1:])
        return sets

    return copy_with_longer


def pytest_configure(config: Any) -> None:
    fraction = float(os.environ.get(SLOWDOWN_ENV, "0") or 0)
    if fraction <= 0:
        return
    import numpy

    from gpuperf.measure import timing
    from kernels import cublas
    from kernels.operands import random_operand

    rng = numpy.random.default_rng(2026)
    slowdown = Slowdown(fraction, cublas.gemv, cublas.gemm,
                        lambda shape, dtype, order: random_operand(rng, shape, dtype, order=order),
                        lambda array: array.copy(order="A"))
    copy_operands = timing.copy_operands
    cublas.gemv, cublas.gemm = slowdown.gemv, slowdown.gemm  # type: ignore[assignment]
    timing.copy_operands = _copy_hook(slowdown, copy_operands)  # type: ignore[assignment]
    config.stash[_STATE] = slowdown

    def restore() -> None:
        cublas.gemv, cublas.gemm = slowdown.library_gemv, slowdown.library_gemm  # type: ignore[assignment]
        timing.copy_operands = copy_operands  # type: ignore[assignment]

    config.add_cleanup(restore)


_STATE = pytest.StashKey[Slowdown]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Slowed only inside a performance test (one that uses the ``perf`` fixture)."""
    slowdown = item.config.stash.get(_STATE, None)
    if slowdown is None:
        yield
        return
    slowdown.active = "perf" in getattr(item, "fixturenames", ())
    try:
        yield
    finally:
        slowdown.active = False
        slowdown.forget()
