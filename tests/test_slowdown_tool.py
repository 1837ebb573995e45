"""tools/gpu_host/slowdown.py: the reduction grows by the fraction asked, the output (and so the grid) does not; end to
end through pytest with stand-ins for the CuPy-backed ``kernels`` modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.gpu_host.slowdown import gemm_shapes, gemv_shapes, longer

pytest_plugins = ["pytester"]


def test_the_reduction_grows_by_the_fraction_in_whole_aligned_steps() -> None:
    assert longer(1024, 0.05) == 1080 and longer(16384, 0.05) == 17208 and longer(8, 0.001) == 16


@pytest.mark.parametrize(("trans", "expected"), [(False, ((4096, 1080), 1080)), (True, ((4304, 1024), 4304))])
def test_a_gemv_reads_a_longer_reduction_into_the_same_output(trans: bool, expected: tuple) -> None:
    assert gemv_shapes(4096, 1024, trans, 0.05) == expected


def test_a_gemm_keeps_its_output_and_lengthens_k() -> None:
    assert gemm_shapes(4096, 4096, 4096, 0.05) == ((4096, 4304), (4304, 4096))


CONFTEST = '''
import sys, types

calls = []


class Flags:
    f_contiguous = True


class FakeArray:
    flags = Flags()

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


def gemv(handle, a, x, y, *, dtype="fp32", trans=False, **scalars):
    calls.append(("gemv", a.shape, x.shape, y.shape, trans))


def gemm(handle, a, b, c, *, dtype="fp32", trans_a=False, trans_b=False, **scalars):
    calls.append(("gemm", a.shape, b.shape, c.shape, trans_a or trans_b))


cublas = types.ModuleType("kernels.cublas")
cublas.gemv, cublas.gemm, cublas.calls, cublas.FakeArray = gemv, gemm, calls, FakeArray
operands = types.ModuleType("kernels.operands")
operands.random_operand = lambda rng, shape, dtype, order="C": FakeArray(shape)
kernels = types.ModuleType("kernels")
kernels.cublas, kernels.operands = cublas, operands
sys.modules.update({"kernels": kernels, "kernels.cublas": cublas, "kernels.operands": operands})

import pytest


@pytest.fixture
def perf():  # what marks a performance test: the plugin slows only those
    return None
'''

TEST = '''
from kernels import cublas


def test_a_correctness_test_is_not_slowed():
    a, x, y = cublas.FakeArray((4096, 1024)), cublas.FakeArray((1024,)), cublas.FakeArray((4096,))
    cublas.gemv(0, a, x, y, dtype="fp32", trans=False)
    assert cublas.calls.pop() == ("gemv", (4096, 1024), (1024,), (4096,), False)


def test_calls(perf):
    a, x, y = cublas.FakeArray((4096, 1024)), cublas.FakeArray((1024,)), cublas.FakeArray((4096,))
    cublas.gemv(0, a, x, y, dtype="fp32", trans=False)
    cublas.gemv(0, a, x, y, dtype="fp32", trans=False)  # the longer operands are made once per operand set
    a2, b2, c2 = cublas.FakeArray((4096, 4096)), cublas.FakeArray((4096, 4096)), cublas.FakeArray((4096, 4096))
    cublas.gemm(0, a2, b2, c2, dtype="fp16")
    cublas.gemm(0, a2, b2, c2, dtype="fp16", trans_a=True)  # transposed: left as it is
    assert cublas.calls == [("gemv", (4096, 1080), (1080,), (4096,), False),
                            ("gemv", (4096, 1080), (1080,), (4096,), False),
                            ("gemm", (4096, 4304), (4304, 4096), (4096, 4096), False),
                            ("gemm", (4096, 4096), (4096, 4096), (4096, 4096), True)]
'''


@pytest.mark.long
@pytest.mark.parametrize(("fraction", "passes"), [("0.05", True), ("0", False)])
def test_the_plugin_lengthens_the_reduction_of_the_calls_a_test_makes(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      fraction: str, passes: bool) -> None:
    """Through pytest with ``-p tools.gpu_host.slowdown``: with GPUPERF_SLOWDOWN set, the test's own cublas calls reach
    cuBLAS with longer K; unset (0), nothing changes and the same assertions fail."""
    monkeypatch.setenv("GPUPERF_SLOWDOWN", fraction)
    repo = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_slow=TEST)
    result = pytester.runpytest_subprocess("-p", "tools.gpu_host.slowdown", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2) if passes else result.assert_outcomes(passed=1, failed=1)
