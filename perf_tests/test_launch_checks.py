"""The measuring stream's check, on the GPU (trigger cases: run with ``-m trigger``).

A call's figure is its kernels' span between the separator kernels on the measuring stream, so a kernel that
runs on another stream without being joined back, or a call that launches nothing, leaves no interval to read:
``measure`` raises ``UnmeasurableCall`` naming what ran where (``kernel_records.stray_kernels``). Each trigger
builds that mistake and asserts the error, and one control forks onto side streams and joins back, which is
measured whole. They never call ``perf.check``: they judge the measuring loop, not a kernel.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuperf.measure.measurement import Method, UnmeasurableCall
from gpuperf.measure.metrics import elementwise_work

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")

N = 1 << 26  # 256 MiB of float32 per vector: each add runs ~0.2 ms
WORK = elementwise_work(N, "fp32")
SCALE_SOURCE = r'''extern "C" __global__ void gpuperf_trigger_scale(const float* x, float* y, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) { y[i] = 2.0f * x[i]; }
}'''


@pytest.fixture
def vectors(stream: Any) -> tuple[Any, Any]:
    x = cupy.random.default_rng(11).standard_normal(N, dtype=cupy.float32)
    return x, cupy.empty_like(x)


def _scale(x: Any, y: Any, on: Any) -> None:
    kernel = cupy.RawKernel(SCALE_SOURCE, "gpuperf_trigger_scale")
    kernel((1024,), (256,), (x, y, cupy.uint64(min(x.size, y.size))), stream=on)


@pytest.mark.trigger
def test_trigger_a_kernel_on_an_unjoined_side_stream_is_an_error(vectors: tuple[Any, Any], measure: Any) -> None:
    side = cupy.cuda.Stream(non_blocking=True)
    with pytest.raises(UnmeasurableCall, match=r"^fn launched 1 kernel a call on stream \d+ "
                                               r"\(gpuperf_trigger_scale\), not on the measuring stream \d+"):
        measure(lambda x, y: _scale(x, y, side), WORK, operands=vectors)


@pytest.mark.trigger
def test_trigger_a_call_that_launches_nothing_is_an_error(vectors: tuple[Any, Any], measure: Any) -> None:
    with pytest.raises(UnmeasurableCall, match="^fn launched no kernel on any stream"):
        measure(lambda x, y: x.view(), WORK, operands=vectors)


@pytest.mark.trigger
def test_trigger_control_side_streams_forked_and_joined_back_are_measured(vectors: tuple[Any, Any],
                                                                          measure: Any, stream: Any) -> None:
    sides = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    half = N // 2

    def forked(x: Any, y: Any) -> None:
        fork = stream.record()
        for index, side in enumerate(sides):
            side.wait_event(fork)
            _scale(x[index * half:(index + 1) * half], y[index * half:(index + 1) * half], side)
            stream.wait_event(side.record())

    m = measure(forked, WORK, operands=vectors)
    assert Method.traced(m.method) and [k.name for k in m.kernels] == ["gpuperf_trigger_scale"] * 2


# -- the measuring stream handed to launchers that take one (docs/adding-a-kernel.md) -------------------------

def _doubled(x: Any, y: Any) -> bool:
    return bool(cupy.allclose(y, 2 * x))


@pytest.mark.trigger
def test_trigger_a_numba_kernel_launched_on_stream_numba_is_measured(vectors: tuple[Any, Any], measure: Any,
                                                                     stream: Any) -> None:
    cuda = pytest.importorskip("numba.cuda", reason="Numba-CUDA is not installed: pip install numba-cuda")

    @cuda.jit
    def scale(x: Any, y: Any) -> None:  # pragma: no cover (compiled for the GPU)
        i = cuda.grid(1)
        if i < x.size:
            y[i] = 2.0 * x[i]

    threads = 256
    launch = scale[(N + threads - 1) // threads, threads, stream.numba]
    m = measure(lambda x, y: launch(x, y), WORK, operands=vectors)
    assert Method.traced(m.method) and len(m.kernels) == 1 and _doubled(*vectors)


@pytest.mark.trigger
def test_trigger_a_cuda_core_kernel_launched_on_stream_cuda_core_is_measured(vectors: tuple[Any, Any],
                                                                             measure: Any, stream: Any) -> None:
    core = pytest.importorskip("cuda.core", reason="cuda.core is not installed: pip install cuda-core")
    if not hasattr(core, "Program"):  # cuda.core before 0.4 kept its API under experimental
        core = pytest.importorskip("cuda.core.experimental")
    device = core.Device(stream.device_id)
    device.set_current()
    arch = "".join(str(part) for part in device.compute_capability)
    code = core.Program(SCALE_SOURCE, "c++", core.ProgramOptions(arch=f"sm_{arch}")).compile("cubin")
    kernel = code.get_kernel("gpuperf_trigger_scale")
    config = core.LaunchConfig(grid=1024, block=256)
    x, y = vectors
    m = measure(lambda: core.launch(stream.cuda_core, config, kernel, x.data.ptr, y.data.ptr, cupy.uint64(N)), WORK)
    assert Method.traced(m.method) and [k.name for k in m.kernels] == ["gpuperf_trigger_scale"] and _doubled(x, y)
