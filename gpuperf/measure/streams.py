"""The measuring stream in the form each launcher takes, and PyTorch's current stream made the same stream.

Every GPU test runs on one non-blocking CUDA stream per device (``GpuPool.stream``); the measuring loop brackets
each call with separator kernels on it, so a call's kernels count only when they run on it (or on side streams
forked from it and joined back: ``kernel_records.stray_kernels``). Launchers that take the *current* stream need
nothing from the test writer: CuPy's is set by the ``stream`` fixture, and ``framework_streams`` makes the same
stream PyTorch's current one while a GPU test runs, which is where torch ops, ``torch.compile``d graphs, C++/CUDA
extensions, CUDA-graph replays and Triton launches go. Launchers that take a stream argument get it from the
``stream`` fixture, a ``cupy.cuda.Stream`` with one attribute per form (``MeasuringStream``).

CuPy, PyTorch, Numba and cuda.core are imported lazily, each only when asked for; PyTorch's current stream is set
only in a process that has imported PyTorch already (the suite's own cases never pay for importing it).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from typing import Any


@functools.cache
def _measuring_stream_class() -> Any:
    import cupy

    class MeasuringStream(cupy.cuda.Stream):  # type: ignore[misc]
        """The measuring stream: a ``cupy.cuda.Stream`` (``with stream:``, ``stream.ptr``, ``stream.synchronize()``),
        also in the forms other launchers take."""

        @property
        def torch(self) -> Any:
            """``torch.cuda.ExternalStream`` over this stream (``torch.cuda.stream(stream.torch)``)."""
            import torch

            cached = self.__dict__.get("_torch")
            if cached is None:
                cached = torch.cuda.ExternalStream(self.ptr, device=torch.device("cuda", self.device_id))
                self.__dict__["_torch"] = cached
            return cached

        @property
        def numba(self) -> Any:
            """A Numba-CUDA stream over this stream (``kernel[grid, block, stream.numba](…)``)."""
            from numba import cuda

            return cuda.external_stream(self.ptr)

        @property
        def cuda_core(self) -> Any:
            """A ``cuda.core`` ``Stream`` over this stream (``launch(stream.cuda_core, config, kernel, …)``)."""
            try:
                from cuda.core import Device
            except ImportError:  # cuda.core before 0.4 kept its API under experimental
                from cuda.core.experimental import Device
            return Device(self.device_id).create_stream(self)

        def __cuda_stream__(self) -> tuple[int, int]:
            """The CUDA stream protocol (version 0, the handle): cuda.core and other launchers take the object."""
            return 0, int(self.ptr)

    return MeasuringStream


def new_measuring_stream() -> Any:
    """A new non-blocking measuring stream on the current device."""
    return _measuring_stream_class()(non_blocking=True)


@contextlib.contextmanager
def framework_streams(stream: Any) -> Iterator[None]:
    """Make ``stream`` PyTorch's current stream on its device for the duration, when this process has imported a
    PyTorch that has CUDA (Triton and ``torch.compile`` launch on it too); otherwise nothing. The stream PyTorch had
    is restored afterwards."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available() or not isinstance(stream, _measuring_stream_class()):
        yield
        return
    with cuda.stream(stream.torch):
        yield
