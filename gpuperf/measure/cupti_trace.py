"""CUPTI kernel tracing: the device's own start and end of every kernel the process launches.

``cupti-python`` (NVIDIA's bindings, in the ``cuda13`` / ``cuda12`` extras) delivers activity records of kind
``CONCURRENT_KERNEL`` for any kernel a CuPy program launches, cuBLAS's included: name, start and end
timestamps, grid, block, cluster, registers and shared memory. ``KernelTracer`` turns them into
``kernel_records.KernelActivity`` between ``start()`` and ``stop()``; recording is off outside them, so the
event-timed phase of a measurement runs without CUPTI's launch overhead.

``open_tracer()`` never raises: where CUPTI cannot be used (the package or its library missing, another
profiler such as Nsight Systems or Nsight Compute already subscribed) it returns ``None`` and the reason,
which the run prints once, and the suite times with CUDA events instead.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import threading
from importlib import metadata
from typing import Any

from gpuperf.install.command import cuda_extra_command
from gpuperf.measure.kernel_records import KernelActivity

#: CUPTI's activity buffers: 8 MiB holds ~ 40 000 kernel records between two flushes.
BUFFER_BYTES = 8 * 1024 * 1024


class KernelTracer:
    """Collects ``CONCURRENT_KERNEL`` records of this process while started."""

    def __init__(self) -> None:
        from cupti import cupti

        self._cupti = cupti
        self._kind = cupti.ActivityKind.CONCURRENT_KERNEL
        self._lock = threading.Lock()
        self._records: list[KernelActivity] = []
        self._recording = False
        cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        cupti.activity_enable(self._kind)  # fails here, not mid-run, when another profiler holds CUPTI
        cupti.activity_disable(self._kind)
        self.version = f"cupti-python {metadata.version('cupti-python')}"

    def _buffer_requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities: list[Any]) -> None:
        with self._lock:
            if self._recording:
                self._records.extend(_activity(record) for record in activities if record.kind == self._kind)

    def start(self) -> None:
        with self._lock:
            self._records = []
            self._recording = True
        self._cupti.activity_enable(self._kind)

    def collect(self) -> list[KernelActivity]:
        """The records of every kernel that has finished since the last call (synchronise first)."""
        self._cupti.activity_flush_all(1)
        with self._lock:
            records, self._records = self._records, []
        return records

    def stop(self) -> None:
        self._cupti.activity_disable(self._kind)
        self._cupti.activity_flush_all(1)
        with self._lock:
            self._records = []
            self._recording = False


def _activity(record: Any) -> KernelActivity:
    return KernelActivity(
        symbol=str(record.name or ""), start_ns=int(record.start), end_ns=int(record.end),
        grid=(int(record.grid_x), int(record.grid_y), int(record.grid_z)),
        block=(int(record.block_x), int(record.block_y), int(record.block_z)),
        cluster=(int(record.cluster_x), int(record.cluster_y), int(record.cluster_z)),
        registers=int(record.registers_per_thread),
        shared_memory=int(record.static_shared_memory) + int(record.dynamic_shared_memory),
        stream=int(record.stream_id))


@functools.cache
def open_tracer() -> tuple[KernelTracer | None, str]:
    """``(tracer, "")``, or ``(None, why not)`` — never an exception. One tracer per process: CUPTI takes one
    set of buffer callbacks."""
    try:
        return KernelTracer(), ""
    except ImportError as exc:
        return None, f"cupti-python is not installed or its CUPTI library is missing ({exc}): {cuda_extra_command()}"
    except Exception as exc:  # cuptiError and friends: CUPTI is there but refuses to trace
        return None, (f"CUPTI refused to trace ({type(exc).__name__}: {exc}); another profiler (Nsight Systems "
                      "or Nsight Compute) may be attached")


def timer_description() -> str:
    """How this process times a call, for the run header: said once, so a fallback is never silent."""
    tracer, reason = open_tracer()
    if tracer is not None:
        return f"CUPTI kernel records ({tracer.version}); CUDA events as the cross-check"
    return f"CUDA events only: {reason}"
