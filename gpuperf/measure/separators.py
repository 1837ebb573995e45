"""The separator kernels the measuring loop launches around the measured calls, and what they stamp.

- the *hold* (``StreamHold``): spins on a flag in pinned host memory until the host has enqueued a whole batch,
  so the GPU runs the batch back to back and the host's launch time never shows as idle time between events;
- the *flush* and the *marker* (``FlushBuffer``): a read of ``2 × L2`` before each cold call, an empty kernel
  between hot calls; in a traced batch each also writes a clock stamp per block (``sm_clock.py``), from which
  every call's SM clock is read back (``Separators``).

CuPy is imported lazily so that ``gpuperf`` imports on machines without it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuperf.measure.kernel_records import MARK_KERNEL
from gpuperf.measure.measurement import DEFAULT_MAX_TRACED_CALLS
from gpuperf.measure.sm_clock import STAMP_FIELDS, call_clocks_mhz

HOLD_TIMEOUT_S = 0.5
_HOLD_SOURCE = r"""
extern "C" __global__ void gpuperf_hold(volatile int* flag, unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (*flag == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) { *flag = 2; return; }
    }
}
"""


class StreamHold:
    """Blocks a stream until released by the host, with a timeout so a host-side synchronisation inside the
    measured callable cannot deadlock the run (the batch is then discarded and holding switched off)."""

    def __init__(self) -> None:
        import cupy
        import numpy

        self._memory = cupy.cuda.alloc_pinned_memory(4)  # pinned memory is device-visible under UVA
        self._flag = numpy.frombuffer(self._memory, dtype=numpy.int32, count=1)
        self._kernel = cupy.RawKernel(_HOLD_SOURCE, "gpuperf_hold")
        self._args = (numpy.uint64(self._memory.ptr), numpy.uint64(int(HOLD_TIMEOUT_S * 1e9)))

    def hold(self, stream: Any) -> Callable[[], bool]:
        self._flag[0] = 0
        self._kernel((1,), (1,), self._args, stream=stream)

        def release() -> bool:
            held = int(self._flag[0]) == 0
            self._flag[0] = 1
            return held

        return release


#: Thread 0 of every block of a separator kernel writes one stamp (``sm_clock.STAMP_FIELDS`` words: smid, clock
#: and time at block start, clock and time at block end) into its launch's slot, when given one (``stamps``
#: non-null): the per-call SM clock of ``sm_clock.py``.
_STAMP_SOURCE = r"""
__device__ __forceinline__ unsigned long long gpuperf_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void gpuperf_stamp(unsigned long long* stamps, unsigned long long c0,
                                              unsigned long long t0) {
    unsigned long long c1 = clock64();
    unsigned long long t1 = gpuperf_now();
    unsigned int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    unsigned long long* s = stamps + 5ull * blockIdx.x;
    s[0] = sm; s[1] = c0; s[2] = t0; s[3] = c1; s[4] = t1;
}
"""

_FLUSH_SOURCE = _STAMP_SOURCE + r"""
extern "C" __global__ void gpuperf_flush(const int4* buffer, unsigned long long count, int4* sink,
                                         unsigned long long* stamps) {
    unsigned long long c0 = 0, t0 = 0;
    if (stamps != 0 && threadIdx.x == 0) { t0 = gpuperf_now(); c0 = clock64(); }
    int4 acc = make_int4(0, 0, 0, 0);
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        int4 v = buffer[i];
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    if (acc.x == 0x7fffffff && acc.y == acc.x && acc.z == acc.x && acc.w == acc.x) *sink = acc;
    if (stamps != 0) {
        __syncthreads();
        if (threadIdx.x == 0) gpuperf_stamp(stamps, c0, t0);
    }
}
"""

_MARK_SOURCE = _STAMP_SOURCE + f"""
extern "C" __global__ void {MARK_KERNEL}(unsigned long long* stamps) {{
    if (stamps != 0 && threadIdx.x == 0) {{ unsigned long long t0 = gpuperf_now(); gpuperf_stamp(stamps, clock64(), t0); }}
}}
"""


class FlushBuffer:
    """Owns a device buffer of ``2 × L2`` bytes (read from the device) and *reads* it through the L2 on a
    stream, which evicts whatever the last sample left there. It also owns the other separator kernel (the
    marker between hot calls) and the clock stamps both write (``sm_clock.py``): one slot per separator
    launch of a traced batch.

    Reading rather than overwriting (nvbench's memset) matters: a memset leaves the L2 full of dirty lines,
    and their write-back then competes with the timed call's own traffic, so a memory-bound call looks a
    few per cent slower after a memset flush than with rotated operands. After a read the L2 is clean;
    the previous sample's dirty output is written back during the flush, outside the events. The buffer
    holds zeros, so the kernel's guarded store never happens, but the compiler cannot drop the loads.
    """

    def __init__(self, l2_bytes: int, stamp_slots: int = DEFAULT_MAX_TRACED_CALLS + 1) -> None:
        import cupy

        if l2_bytes <= 0:
            raise ValueError(f"L2 size must be positive, got {l2_bytes}")
        self.nbytes = 2 * l2_bytes + (-2 * l2_bytes) % 16
        self.buffer = cupy.zeros(self.nbytes, dtype=cupy.uint8)
        self.sink = cupy.zeros(4, dtype=cupy.int32)
        self._kernel = cupy.RawKernel(_FLUSH_SOURCE, "gpuperf_flush")
        self._mark = cupy.RawKernel(_MARK_SOURCE, MARK_KERNEL)
        device = cupy.cuda.Device()
        self._grid = (4 * int(device.attributes["MultiProcessorCount"]),)
        self.stamps = cupy.zeros((stamp_slots, self._grid[0], STAMP_FIELDS), dtype=cupy.uint64)

    @property
    def stamp_slots(self) -> int:
        return int(self.stamps.shape[0])

    def _stamp_pointer(self, slot: int | None) -> Any:
        import numpy

        if slot is None:
            return numpy.uint64(0)
        if not 0 <= slot < self.stamp_slots:
            raise ValueError(f"stamp slot {slot} outside 0..{self.stamp_slots - 1}")
        return numpy.uint64(self.stamps.data.ptr + slot * self.stamps.strides[0])

    def enqueue(self, stream: Any, slot: int | None = None) -> None:
        import numpy

        self._kernel(self._grid, (256,), (self.buffer, numpy.uint64(self.nbytes // 16), self.sink,
                                          self._stamp_pointer(slot)), stream=stream)

    def mark(self, stream: Any, slot: int | None = None) -> None:
        """The separator between two traced hot calls: no work, a stamp per block when given a slot."""
        self._mark(self._grid, (32,), (self._stamp_pointer(slot),), stream=stream)

    def read_stamps(self, separators: int) -> Any:
        """The stamps of the first ``separators`` slots, on the host (after the stream was synchronised)."""
        import cupy

        return cupy.asnumpy(self.stamps[:separators])


@dataclass(frozen=True)
class Separators:
    """How a traced batch separates its calls: ``launch(stream, slot)`` enqueues a separator, stamping into
    ``slot`` when it is not ``None`` (``slots`` of them; 0: no stamps), ``clocks(n)`` reads the first ``n``
    slots' stamps back as each call's SM clock."""

    launch: Callable[[Any, int | None], None]
    slots: int
    owner: Any

    def clocks(self, separators: int) -> list[float]:
        return call_clocks_mhz(self.owner.read_stamps(separators))
