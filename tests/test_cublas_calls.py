"""``kernels.cublas`` on the CPU, over a stand-in CuPy whose cuBLAS binding records its calls: a GEMM, strided-batched
GEMM or GEMV is planned once per operand layout and then issued with each call's own addresses (a cold-rotated
measurement's copies share the plan), with the arguments ``kernels.blas_args`` plans; a bad operand is refused on
every call, a plan never cached for it."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernels import blas_args

ROOT = Path(__file__).resolve().parents[1]


class FakeArray:
    """What ``kernels.cublas`` reads of a CuPy array: dtype, shape, byte strides, item size and address."""

    _next = 1 << 20

    def __init__(self, shape: tuple[int, ...], dtype: str, order: str = "C", strides: tuple[int, ...] | None = None,
                 ptr: int | None = None) -> None:
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)
        self.itemsize, self.ndim = self.dtype.itemsize, len(shape)
        self.strides = strides or np.empty(shape, dtype=self.dtype, order=order).strides
        if ptr is None:
            ptr, FakeArray._next = FakeArray._next, FakeArray._next + (1 << 24)
        self.data = types.SimpleNamespace(ptr=ptr)

    def copy_elsewhere(self) -> FakeArray:
        return FakeArray(self.shape, self.dtype.name, strides=self.strides)

    def __getitem__(self, key: Any) -> FakeArray:
        assert key == (Ellipsis, None)
        return FakeArray(self.shape + (1,), self.dtype.name, strides=self.strides + (self.itemsize,),
                         ptr=self.data.ptr)


@pytest.fixture
def cublas(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[tuple[str, tuple[Any, ...]]]]]:
    """``kernels/cublas.py`` loaded under a private name against the stand-in modules, and its binding's calls."""
    calls: list[tuple[str, tuple[Any, ...]]] = []
    binding = types.ModuleType("cupy_backends.cuda.libs.cublas")
    for name in ("sgemm", "dgemm", "gemmEx", "sgemmStridedBatched", "dgemmStridedBatched", "gemmStridedBatchedEx",
                 "sgemv", "dgemv"):
        setattr(binding, name, lambda *args, _name=name: calls.append((_name, args)))
    for name, value in {"CUBLAS_OP_N": 0, "CUBLAS_OP_T": 1, "CUBLAS_GEMM_DEFAULT": -1, "CUBLAS_COMPUTE_32F": 68,
                        "CUBLAS_COMPUTE_32F_FAST_TF32": 77, "CUBLAS_COMPUTE_64F": 70, "CUBLAS_COMPUTE_16F": 64,
                        "CUBLAS_COMPUTE_32F_PEDANTIC": 69}.items():
        setattr(binding, name, value)
    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeArray  # type: ignore[attr-defined]
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(  # type: ignore[attr-defined]
        CUDA_R_32F=0, CUDA_R_64F=1, CUDA_R_16F=2, CUDA_R_16BF=14))
    modules = {"cupy": cupy, "cupy_backends": types.ModuleType("cupy_backends"),
               "cupy_backends.cuda": types.ModuleType("cupy_backends.cuda"),
               "cupy_backends.cuda.libs": types.ModuleType("cupy_backends.cuda.libs"),
               "cupy_backends.cuda.libs.cublas": binding}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("_cublas_under_test", ROOT / "kernels" / "cublas.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module, calls


def test_a_gemm_issues_the_planned_call_with_each_call_s_own_addresses(cublas: Any) -> None:
    module, calls = cublas
    a, b, c = FakeArray((64, 32), "float32"), FakeArray((32, 48), "float32"), FakeArray((64, 48), "float32")
    module.gemm(7, a, b, c, alpha=2.0, beta=0.5)
    plan = blas_args.plan_gemm(*(blas_args.describe_matrix(n, x.shape, x.strides, x.itemsize)
                                 for n, x in (("A", a), ("B", b), ("C", c))))
    first, second = (b, a) if plan.swapped else (a, b)
    (name, args), = calls
    assert name == "sgemm"
    assert args[:6] == (7, int(plan.transa == "T"), int(plan.transb == "T"), plan.m, plan.n, plan.k)
    assert args[7:11] == (first.data.ptr, plan.lda, second.data.ptr, plan.ldb)
    assert args[12:] == (c.data.ptr, plan.ldc)
    assert (ctypes.c_float.from_address(args[6]).value, ctypes.c_float.from_address(args[11]).value) == (2.0, 0.5)
    copies = [x.copy_elsewhere() for x in (a, b, c)]  # a rotated measurement's next operand set
    module.gemm(7, *copies, alpha=2.0, beta=0.5)
    assert module._planned_gemm.cache_info().misses == 1 and module._planned_gemm.cache_info().hits == 1
    name, again = calls[1]
    moved = (copies[1], copies[0]) if plan.swapped else (copies[0], copies[1])
    assert again[7] == moved[0].data.ptr and again[9] == moved[1].data.ptr and again[12] == copies[2].data.ptr
    assert again[:7] == args[:7] and again[10:12] == args[10:12]


@pytest.mark.parametrize("dtype", ["tf32", "fp16", "bf16"])
def test_a_tensor_core_gemm_goes_through_gemm_ex_with_its_compute_type(cublas: Any, dtype: str) -> None:
    module, calls = cublas
    storage = blas_args.gemm_path(dtype).dtype
    a, b, c = (FakeArray(shape, storage, "F") for shape in ((16, 8), (8, 24), (16, 24)))
    module.gemm(3, a, b, c, dtype=dtype, trans_a=False)
    (name, args), = calls
    assert name == "gemmEx"
    assert args[-2] == getattr(sys.modules["cupy_backends.cuda.libs.cublas"],
                               blas_args.compute_type(blas_args.gemm_path(dtype).compute).constant)


def test_strided_batched_and_gemv_calls_are_planned_once_per_layout(cublas: Any) -> None:
    module, calls = cublas
    a, b, c = FakeArray((10, 4, 6), "float32"), FakeArray((10, 6, 5), "float32"), FakeArray((10, 4, 5), "float32")
    for _ in range(3):
        module.gemm_strided_batched(1, a, b, c)
    assert [name for name, _ in calls] == ["sgemmStridedBatched"] * 3
    assert module._planned_strided.cache_info().misses == 1 and calls[0][1][-1] == 10
    matrix, x, y = FakeArray((40, 30), "float64", "F"), FakeArray((30,), "float64"), FakeArray((40,), "float64")
    module.gemv(1, matrix, x, y, dtype="fp64")
    module.gemv(1, matrix.copy_elsewhere(), x.copy_elsewhere(), y.copy_elsewhere(), dtype="fp64")
    assert [name for name, _ in calls[3:]] == ["dgemv", "dgemv"]
    assert module._planned_gemv.cache_info().misses == 1 and calls[3][1][1:4] == (0, 40, 30)


def test_a_bad_operand_is_refused_on_every_call(cublas: Any) -> None:
    module, calls = cublas
    a, b, c = FakeArray((4, 4), "float64"), FakeArray((4, 4), "float32"), FakeArray((4, 4), "float32")
    for _ in range(2):
        with pytest.raises(TypeError, match=r"A is float64, but dtype='fp32' takes float32 arrays"):
            module.gemm(1, a, b, c)
    with pytest.raises(TypeError, match=r"A must be a cupy.ndarray, got list"):
        module.gemm(1, [1.0], b, c)
    with pytest.raises(blas_args.ShapeError):
        module.gemm(1, FakeArray((4, 5), "float32"), b, c)
    with pytest.raises(ValueError, match=r"x and y must be 1-D"):
        module.gemv(1, FakeArray((4, 4), "float32"), FakeArray((4, 1), "float32"), FakeArray((4,), "float32"))
    assert calls == []
