"""Which stream a measured call's kernels ran on: the ones the measuring stream cannot vouch for. Pure.

The separator kernels (hold, flush, marker) run on the measuring stream, so consecutive separators bound each
call's interval there (``kernel_records.split_calls``). A kernel of the call that ran outside every such interval,
on a stream not joined back to the measuring one, holds time no interval on it contains: ``stray_kernels`` finds it
from the stream id of each CUPTI record, and ``StrayKernels.describe`` is the one line the case's ``ERROR`` says.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gpuperf.measure.kernel_records import SEPARATOR_KERNELS, KernelActivity


@dataclass(frozen=True)
class StrayKernels:
    """Kernels of the measured calls that ran outside the calls' intervals on the measuring stream: on another
    stream, not joined back to it (``stray_kernels``)."""

    measuring_stream: int
    kernels: tuple[KernelActivity, ...]
    calls: int  # the calls enqueued in the batch they were found in

    def describe(self) -> str:
        """One line: what ran where, why no figure is taken, and the fix."""
        streams = Counter(kernel.stream for kernel in self.kernels)
        where = ", ".join(f"{_launches(count, self.calls)} on stream {stream}" for stream, count in streams.items())
        names = ", ".join(dict.fromkeys(kernel.name for kernel in self.kernels))
        return (f"fn launched {where} ({_clipped(names)}), not on the measuring stream {self.measuring_stream} nor "
                "joined back to it, so the interval measured there holds none of that work and no figure is "
                "taken; launch on the current stream (gpuperf makes the measuring stream CuPy's and PyTorch's "
                "current stream during a GPU test), pass the stream fixture to launchers that take a stream "
                "(stream.ptr, stream.torch, stream.numba, stream.cuda_core), or join side streams back to it "
                "(an event recorded on the side stream, waited on by the measuring stream) before fn returns")


def _launches(count: int, calls: int) -> str:
    per_call = count // calls if calls and count % calls == 0 else 0
    if per_call:
        return f"{per_call} kernel{'s' if per_call > 1 else ''} a call"
    return f"{count} kernel{'s' if count > 1 else ''} in {calls} call{'s' if calls > 1 else ''}"


def _clipped(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def stray_kernels(activities: Sequence[KernelActivity], calls: int) -> StrayKernels | None:
    """The kernels that did not run inside a call's interval on the measuring stream, or ``None``.

    The separators (hold, flush, marker) run on the measuring stream, so their stream is the measuring stream and
    consecutive separators bound each call's interval there. A kernel on the measuring stream always lies in one
    such interval. A kernel on another stream is part of a call only when the call forked it from the measuring
    stream and joined it back (as the multi-stream batched cases do): then it starts after one separator ended
    and ends before the next one starts. A kernel that overlaps a separator, precedes the first or outlives the
    last ran unordered with the measuring stream: the held batch shows it plainly, since the hold keeps the
    measuring stream waiting while the host enqueues, and an unordered kernel runs meanwhile."""
    separators = sorted((a for a in activities if a.symbol in SEPARATOR_KERNELS), key=lambda a: a.start_ns)
    if not separators:
        return None
    measuring = Counter(a.stream for a in separators).most_common(1)[0][0]
    starts = [a.start_ns for a in separators]
    strays = []
    for activity in activities:
        if activity.symbol in SEPARATOR_KERNELS or activity.stream == measuring:
            continue
        before = bisect.bisect_right(starts, activity.start_ns) - 1
        inside = (0 <= before < len(separators) - 1 and separators[before].end_ns <= activity.start_ns
                  and activity.end_ns <= separators[before + 1].start_ns)
        if not inside:
            strays.append(activity)
    if not strays:
        return None
    return StrayKernels(measuring, tuple(sorted(strays, key=lambda a: a.start_ns)), calls)
