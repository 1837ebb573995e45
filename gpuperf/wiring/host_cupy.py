"""A dry run's operands (``dry_run.py``): CuPy's array functions on host arrays, PyTorch's CUDA tensors on ``meta``.

``module()`` is what ``import cupy`` gives during a dry run: every name NumPy has is NumPy's (``cupy.full``,
``cupy.asarray``, ``cupy.float32``, ``cupy.random``), ``cupy.asnumpy`` is ``numpy.asarray``, and the names that
would reach the GPU are stand-ins that launch nothing: ``RawKernel``, ``RawModule`` (compiled by nobody, called for
nothing), ``ElementwiseKernel`` and ``ReductionKernel`` (their outputs' shapes and dtypes, no values) and
``cupy.cuda`` (streams, events, the device).
A test's shapes and dtypes therefore meet NumPy's own checks, so a shape that does not chain still fails.

``meta_torch()`` enters a torch function mode (where PyTorch is imported) under which a tensor asked for on a
CUDA device is made on ``meta``: shapes, dtypes and their checks without memory or a driver; ``torch.cuda``'s
streams, events and graphs are stand-ins that do nothing (a graph's capture runs its body on meta tensors).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy


class _Launches:
    """A kernel or module stand-in: built, compiled and called for nothing (the user's kernels are not launched)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def compile(self, *args: Any, **kwargs: Any) -> None:
        return None

    def get_function(self, name: str) -> _Launches:
        return _Launches(name)


class StandInStream:
    """A stream, event or device that does nothing: what ``with``, ``synchronize`` and the rest of them are asked."""

    ptr = 0
    null: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> StandInStream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def record(self, *args: Any) -> None:
        return None

    def wait_event(self, *args: Any) -> None:
        return None

    def use(self) -> StandInStream:
        return self

    def wait_stream(self, *args: Any) -> None:
        return None


class _Device(StandInStream):
    """``cupy.cuda.Device``: a context manager; ``compute_capability`` is the stood-in GPU's (``DryPool.context``)."""

    compute_capability = "90"
    id = 0


class _Elementwise(_Launches):
    """``ElementwiseKernel(in_params, out_params, …)``: computes nothing, but gives what CuPy gives, the outputs (those
    passed after the inputs, else new ones of the broadcast shape and the declared type, the first input's for a
    type variable), so a test that goes on with them meets their shapes and dtypes."""

    def __init__(self, in_params: str = "", out_params: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(in_params, out_params, *args, **kwargs)
        self.inputs = [param for param in in_params.split(",") if param.strip()]
        self.outputs = [param.split()[0] for param in out_params.split(",") if param.strip()]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        given = list(args[len(self.inputs):])
        arrays = [numpy.asarray(arg) for arg in args[:len(self.inputs)]]
        shape = numpy.broadcast_shapes(*(array.shape for array in arrays)) if arrays else ()
        outputs = given or [numpy.empty(shape, dtype=_dtype(kind, arrays)) for kind in self.outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _dtype(kind: str, inputs: list[Any]) -> Any:
    """A declared type (``uint16``), or a type variable's: the first array input's."""
    try:
        return numpy.dtype(kind)
    except TypeError:
        return next((array.dtype for array in inputs if array.ndim), numpy.float32)


def _cuda() -> types.SimpleNamespace:
    stream = StandInStream()
    return types.SimpleNamespace(Stream=StandInStream, Event=StandInStream, Device=_Device, get_current_stream=lambda: stream,
                                 runtime=types.SimpleNamespace(deviceSynchronize=lambda: None),
                                 is_available=lambda: False)


def module() -> types.ModuleType:
    """The stand-in ``cupy`` module."""
    stand_in = types.ModuleType("cupy", "gpuperf --dry-run: NumPy behind CuPy's array functions; nothing launches")
    stand_in.__dict__.update(
        asnumpy=lambda array, *args, **kwargs: numpy.asarray(array), get_array_module=lambda *args: numpy,
        RawKernel=_Launches, RawModule=_Launches, ElementwiseKernel=_Elementwise, ReductionKernel=_Elementwise,
        fuse=lambda *args, **kwargs: (args[0] if args and callable(args[0]) else (lambda fn: fn)),
        cuda=_cuda(), __gpuperf_dry_run__=True)
    setattr(stand_in, "__getattr__", lambda name: getattr(numpy, name))  # PEP 562: what NumPy has, it has
    return stand_in


def _on_cuda(value: Any, torch: Any) -> bool:
    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    return isinstance(value, torch.device) and value.type == "cuda"


def meta_torch() -> None:
    """Enter (for the session) a mode that makes tensors asked for on CUDA on ``meta``; nothing without PyTorch."""
    torch: Any = sys.modules.get("torch")
    if torch is None or getattr(torch, "__gpuperf_meta__", False):
        return
    from torch.overrides import TorchFunctionMode

    class MetaForCuda(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types_: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = {key: (torch.device("meta") if _on_cuda(value, torch) else value)
                      for key, value in (kwargs or {}).items()}
            if func is torch.Tensor.cuda:
                return args[0].to("meta")
            args = tuple(torch.device("meta") if _on_cuda(value, torch) else value for value in args)
            return func(*args, **kwargs)

    mode = MetaForCuda()
    mode.__enter__()
    torch.__gpuperf_meta__ = mode
    _replaced.update({name: getattr(torch.cuda, name) for name in _TORCH_CUDA_STAND_INS})
    stream = StandInStream()
    for name, stand_in in {"Stream": StandInStream, "Event": StandInStream, "CUDAGraph": _Launches, "graph": StandInStream,
                           "stream": lambda *args, **kwargs: stream, "current_stream": lambda *args: stream,
                           "synchronize": lambda *args: None}.items():
        setattr(torch.cuda, name, stand_in)


#: What a dry run's PyTorch gets in ``torch.cuda`` (streams, events and graphs that do nothing: a graph's capture
#: runs its body on meta tensors, its replay launches nothing) and the originals, given back by ``leave_meta_torch``.
_TORCH_CUDA_STAND_INS = ("Stream", "Event", "CUDAGraph", "graph", "stream", "current_stream", "synchronize")
_replaced: dict[str, Any] = {}


def leave_meta_torch() -> None:
    """Leave the mode ``meta_torch`` entered, if it did, and give ``torch.cuda`` its own names back."""
    torch: Any = sys.modules.get("torch")
    mode = getattr(torch, "__gpuperf_meta__", None) if torch is not None else None
    if mode:
        mode.__exit__(None, None, None)
        torch.__gpuperf_meta__ = None
        for name, original in _replaced.items():
            setattr(torch.cuda, name, original)
        _replaced.clear()
