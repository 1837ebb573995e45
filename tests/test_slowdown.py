"""tools/gpu_host/slowdown.py on the CPU, with NumPy arrays and a recording stand-in for the library: only the library
call is slowed, its operands are made outside the timed calls, and nothing outside a performance test changes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tools.gpu_host.slowdown import Slowdown, _copy_hook, gemv_shapes, longer


class Library:
    """``kernels.cublas``'s shape: a typed GEMV, and the FP16 path that is a GEMM with n = 1 (through the
    module's ``gemm``, which the plugin replaces)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []
        self.gemm_entry: Any = self.gemm

    def gemv(self, handle: int, a: Any, x: Any, y: Any, *, dtype: str = "fp32", trans: bool = False,
             **scalars: Any) -> None:
        if dtype == "fp16":
            self.gemm_entry(handle, a, x.reshape(-1, 1), y.reshape(-1, 1), dtype=dtype, trans_a=trans)
            return
        self.calls.append(("gemv", a.shape, x.shape))

    def gemm(self, handle: int, a: Any, b: Any, c: Any, *, dtype: str = "fp32", trans_a: bool = False,
             trans_b: bool = False, **scalars: Any) -> None:
        self.calls.append(("gemm", a.shape, b.shape))


def _slowdown(library: Library) -> Slowdown:
    rng = np.random.default_rng(0)
    slowdown = Slowdown(0.05, library.gemv, library.gemm,
                        lambda shape, dtype, order: np.asarray(rng.uniform(0.5, 1.5, shape), order=order),
                        lambda array: array.copy(order="A"))
    library.gemm_entry = slowdown.gemm  # as the plugin replaces cublas.gemm, which cublas.gemv calls
    slowdown.active = True
    return slowdown


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_a_gemv_runs_once_on_longer_operands_made_on_its_first_call_only(dtype: str) -> None:
    library = Library()
    slowdown = _slowdown(library)
    a, x, y = np.ones((4096, 1000), order="F"), np.ones(1000), np.zeros(4096)
    for _ in range(5):
        slowdown.gemv(0, a, x, y, dtype=dtype)
    columns = longer(1000, 0.05)
    assert columns == 1056 and gemv_shapes(4096, 1000, False, 0.05) == ((4096, 1056), 1056)
    shapes = {"fp32": ("gemv", (4096, columns), (columns,)), "fp16": ("gemm", (4096, columns), (columns, 1))}
    assert library.calls == [shapes[dtype]] * 5  # the FP16 path's GEMM is not extended a second time
    assert slowdown.made == 2  # A and x, once: nothing is made inside the later (timed) calls


def test_rotated_copies_get_their_longer_operands_when_copied_not_when_timed() -> None:
    library = Library()
    slowdown = _slowdown(library)
    a, x, y = np.ones((256, 64), order="F"), np.ones(64), np.zeros(256)
    slowdown.gemv(0, a, x, y)  # the warm-up's first call
    copy = _copy_hook(slowdown, lambda backend, operands, count: [tuple(operands)] + [
        tuple(np.copy(op) for op in operands) for _ in range(count - 1)])
    sets = copy(None, (a, x, y), 4)
    made = slowdown.made
    for operands in sets * 3:
        slowdown.gemv(0, *operands)
    assert slowdown.made == made == 2  # copies of the longer operands, no fresh ones in a timed call
    assert len({id(held[2]) for held in slowdown.longer.values()}) == 4  # each copy reads its own (cold) data
    assert all(call == ("gemv", (256, 72), (72,)) for call in library.calls)


def test_outside_a_performance_test_and_for_transposed_gemms_the_library_is_called_unchanged() -> None:
    library = Library()
    slowdown = _slowdown(library)
    a, b, c = np.ones((64, 32)), np.ones((32, 16)), np.zeros((64, 16))
    slowdown.gemm(0, a, b, c, trans_a=True)
    slowdown.active = False
    slowdown.gemm(0, a, b, c)
    slowdown.gemv(0, a, np.ones(32), np.zeros(64))
    assert library.calls == [("gemm", (64, 32), (32, 16))] * 2 + [("gemv", (64, 32), (32,))]
    assert slowdown.made == 0
