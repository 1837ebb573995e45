"""What user launchers say they compiled (``launchers.py``), and PyTorch's current stream made the measuring
stream (``streams.py``), on the CPU with stand-ins for Triton's hooks, CuPy's raw kernels and PyTorch."""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Iterator
from typing import Any

from pathlib import Path

import pytest

from gpuperf.measure import launchers
from gpuperf.measure.kernel_records import code_digest
from gpuperf.measure.streams import framework_streams


class RawKernel:
    """Stands for ``cupy.RawKernel``: its source, name, options and backend."""

    def __init__(self, code: str, name: str, options: tuple[str, ...] = ()) -> None:
        self.code, self.name, self.options, self.backend = code, name, options, "nvrtc"

    def __call__(self, *args: Any) -> None:
        pass


class RawModule:
    def __init__(self, code: str, options: tuple[str, ...] = ()) -> None:
        self.code, self.options, self.backend = code, options, "nvrtc"


SAXPY = 'extern "C" __global__ void saxpy(float a, const float* x, float* y) { }'
MODULE = ('extern "C" __global__ void __launch_bounds__(256) scale(float* x) { }\n'
          'template <int N> __global__ void tiled(float* x) { }\n__device__ void helper() { }')


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("cupy")
    module.RawKernel = RawKernel  # type: ignore[attr-defined]
    module.RawModule = RawModule  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)
    return module


KERNEL = RawKernel(SAXPY, "saxpy", ("-O3",))
MODULE_OBJECT = RawModule(MODULE)


def launch_global(x: Any) -> None:
    KERNEL((1,), (1,), (x,))


def test_a_raw_kernel_named_by_the_callable_s_globals_gets_its_source_s_digest(fake_cupy: Any) -> None:
    codes = launchers.cupy_kernel_codes(lambda x: launch_global(x), ())
    assert codes == {"saxpy": code_digest(SAXPY, repr(("-O3",)), "nvrtc")}


def test_an_edited_source_or_other_options_give_another_digest(fake_cupy: Any) -> None:
    edited = RawKernel(SAXPY.replace("{ }", "{ y[0] = a; }"), "saxpy", ("-O3",))
    other_options = RawKernel(SAXPY, "saxpy", ("-O2",))
    digests = {launchers.cupy_kernel_codes(functools.partial(kernel, (1,), (1,)))["saxpy"]
               for kernel in (KERNEL, edited, other_options)}
    assert len(digests) == 3


def test_every_global_function_of_a_module_reached_through_a_closure_is_named(fake_cupy: Any) -> None:
    module = MODULE_OBJECT

    def run(x: Any) -> Any:
        return module

    codes = launchers.cupy_kernel_codes(run)
    assert set(codes) == {"scale", "tiled"} and len(set(codes.values())) == 1


def test_kernels_are_reached_through_bound_methods_partials_and_defaults(fake_cupy: Any) -> None:
    class Op:
        def __init__(self) -> None:
            self.kernel = KERNEL

        def __call__(self, x: Any) -> None:
            self.kernel(x)

    def with_default(x: Any, kernel: Any = KERNEL) -> None:
        kernel(x)

    for fn in (Op().__call__, functools.partial(launch_global), with_default):
        assert set(launchers.cupy_kernel_codes(fn)) == {"saxpy"}


def test_without_cupy_imported_nothing_is_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert launchers.cupy_kernel_codes(lambda x: launch_global(x)) == {}


def test_the_search_stops_at_modules_and_classes() -> None:
    found = launchers.reachable(lambda: sys.modules, (), (RawKernel,))
    assert found == []


class LazyDict:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


class HookChain:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def add(self, func: Any) -> None:
        self.calls.append(func)

    def __call__(self, *args: Any) -> None:
        for call in self.calls:
            call(*args)


@pytest.fixture
def fake_triton(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.SimpleNamespace]:
    runtime = types.SimpleNamespace(kernel_load_end_hook=HookChain(), launch_enter_hook=HookChain())
    triton = types.ModuleType("triton")
    knobs = types.ModuleType("triton.knobs")
    knobs.runtime = runtime  # type: ignore[attr-defined]
    triton.knobs = knobs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.knobs", knobs)
    launchers._triton_watch.cache_clear()
    yield runtime
    launchers._triton_watch.cache_clear()


def test_a_triton_kernel_is_known_by_the_hash_of_the_compiled_kernel_it_launched(
        fake_triton: types.SimpleNamespace) -> None:
    launchers.watch_triton()  # before the kernels load, as the stream fixture does before every GPU test
    for function, hash_ in ((101, "aaaa"), (102, "bbbb")):  # an autotuner loads two configurations of one kernel
        fake_triton.kernel_load_end_hook(None, function, "softmax_kernel", {}, hash_)
    fake_triton.launch_enter_hook(LazyDict({"name": "softmax_kernel", "function": 101, "stream": 0}))  # not measured

    def call() -> None:
        fake_triton.launch_enter_hook(LazyDict({"name": "softmax_kernel", "function": 102, "stream": 0}))

    with launchers.identify(call, ()) as codes:
        call()
    assert codes == {"softmax_kernel": code_digest("triton", "bbbb")}  # the configuration that ran, not the last


def test_a_kernel_loaded_once_is_known_even_when_its_launcher_calls_no_launch_hook(
        fake_triton: types.SimpleNamespace) -> None:
    launchers.watch_triton()
    fake_triton.kernel_load_end_hook(None, 7, "triton_poi_fused_add_0", {}, "cccc")
    with launchers.identify(lambda: None, ()) as codes:
        pass
    assert codes["triton_poi_fused_add_0"] == code_digest("triton", "cccc")


def test_triton_s_loads_are_counted_and_a_kernel_s_compile_options_join_its_identity(
        fake_triton: types.SimpleNamespace, tmp_path: Path) -> None:
    """The count the timer compares before and after its samples (a compile while timed is refused), and the
    configuration read from the loaded kernel's metadata file."""
    from gpuperf.measure.kernel_records import KernelActivity, call_kernels, note_code

    assert launchers.compiled_count() == 0
    launchers.watch_triton()
    metadata = tmp_path / "add_kernel.json"
    metadata.write_text('{"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": null}')
    fake_triton.kernel_load_end_hook(None, 8, "add_kernel", {"add_kernel.json": str(metadata)}, "dddd")
    fake_triton.kernel_load_end_hook(None, 8, "add_kernel", {}, "dddd")  # the same handle loaded again
    assert launchers.compiled_count() == 2
    note_code("add_kernel", code_digest("triton", "dddd"))
    kernels = call_kernels([[KernelActivity("add_kernel", 0, 1000)]])
    assert kernels[0].config == "num_warps=4 num_stages=3 num_ctas=1"
    assert "add_kernel (num_warps=4 num_stages=3 num_ctas=1) grid" in kernels[0].describe()


def test_a_triton_without_the_hooks_gives_no_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    triton = types.ModuleType("triton")
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.knobs", types.ModuleType("triton.knobs"))
    launchers._triton_watch.cache_clear()
    try:
        with launchers.identify(lambda: None, ()) as codes:
            pass
        assert codes == {}
    finally:
        launchers._triton_watch.cache_clear()


class Stream:
    torch = "torch-view-of-the-measuring-stream"


@pytest.fixture(autouse=True)
def _measuring_stream_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """The measuring stream's class is made from CuPy's; here ``Stream`` stands for it."""
    from gpuperf.measure import streams

    monkeypatch.setattr(streams, "_measuring_stream_class", lambda: Stream)


def test_pytorch_s_current_stream_is_the_measuring_stream_only_where_pytorch_is_imported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    entered: list[Any] = []

    @contextlib.contextmanager
    def stream(value: Any) -> Iterator[None]:
        entered.append(value)
        yield
        entered.append("restored")

    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(stream=stream, is_available=lambda: True)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    with framework_streams(Stream()):
        assert entered == [Stream.torch]
    assert entered == [Stream.torch, "restored"]
    with framework_streams(object()):  # a stream of CuPy's own, not the measuring stream: left as it is
        pass
    torch.cuda = types.SimpleNamespace(stream=stream, is_available=lambda: False)  # type: ignore[attr-defined]
    with framework_streams(Stream()):  # a PyTorch built without CUDA: nothing to set
        pass
    assert entered == [Stream.torch, "restored"]
    monkeypatch.delitem(sys.modules, "torch")
    with framework_streams(Stream()):
        pass
    assert entered == [Stream.torch, "restored"]  # no PyTorch imported: nothing imported, nothing set
