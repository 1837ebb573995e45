"""A traced batch: calls enqueued behind separator kernels and a hold, read back from their kernel records and split
into calls (``TracedCalls``), and the samples the timing loop takes from them (``traced_batch``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuperf.measure.kernel_records import KernelActivity, span_s, split_calls
from gpuperf.measure.separators import Separators
from gpuperf.measure.sm_clock import call_cycles, group_means
from gpuperf.measure.stream_check import stray_kernels


@dataclass(frozen=True)
class Batch:
    """One batch's per-call samples, the GPU time it took, and (traced and stamped) each sample's mean cycles
    per call and SM clock, in step with ``samples``."""

    samples: list[float]
    timed_s: float
    cycles: list[float] = field(default_factory=list)
    clocks_mhz: list[float] = field(default_factory=list)



@dataclass
class TracedCalls:
    """Enqueues traced batches: every call preceded by a separator, one more closing the last, the batch held
    (``held``) until the host has enqueued it all; then reads back each call's kernel records and, where the
    separators stamped them, its SM clock. ``seen``: the calls of the batches kept; ``failure``: why a batch's
    records could not be split into its calls."""

    backend: Any
    tracer: Any
    separators: Separators
    fn: Callable[..., Any]
    operands: Sequence[Any]
    stream: Any
    seen: list[list[KernelActivity]] = field(default_factory=list)
    failure: list[str] = field(default_factory=list)
    found_none: bool = False  # the last batch's records held no kernel of the calls at all

    def __post_init__(self) -> None:
        self.stop = self.backend.event()  # one event for every batch: it only marks the batch's end

    def enqueue(self, count: int, held: bool) -> tuple[list[list[KernelActivity]], list[float]] | None:
        """The calls' kernel records and clocks; ``None`` when the hold timed out (the batch is void); no calls
        when the records did not split into ``count`` calls."""
        separators, stream, stop = self.separators, self.stream, self.stop
        stamped = count + 1 <= separators.slots
        release = self.backend.hold(stream) if held else None
        for index in range(count):
            separators.launch(stream, index if stamped else None)
            self.fn(*self.operands)
        separators.launch(stream, count if stamped else None)  # closes the last call
        stop.record(stream)
        ok = release is None or release()
        stop.synchronize()
        records = self.tracer.collect()
        stray = stray_kernels(records, count)
        if stray is not None:  # checked before a void batch is dropped: an unordered kernel may be why it was void
            raise Unmeasurable(stray.describe())
        found = split_calls(records)
        self.found_none = not found
        if not ok:
            return None
        if len(found) != count:
            self.failure.append(f"{count} calls enqueued, {len(found)} found in the kernel records")
            return [], []
        return found, separators.clocks(count + 1) if stamped else []


def traced_batch(found: list[list[KernelActivity]], clocks: list[float], group: int) -> Batch:
    """A traced batch's samples: the mean span of each ``group`` consecutive calls, with their cycles and clocks."""
    spans = [span_s(call) for call in found]
    # the batch's GPU time, flushes included, is what the rule's minimum sampling time counts
    batch_s = (max(a.end_ns for a in found[-1]) - min(a.start_ns for a in found[0])) / 1e9
    samples = [statistics.fmean(spans[i:i + group]) for i in range(0, len(spans), group)]
    if not clocks:
        return Batch(samples, batch_s)
    return Batch(samples, batch_s, group_means(call_cycles(spans, clocks), group), group_means(clocks, group))


class TraceMismatch(Exception):
    """The kernel records of a batch could not be split into its calls."""


class Unmeasurable(Exception):
    """The call's kernels cannot be measured (no kernel, or kernels unordered with the measuring stream); the
    message is the one line ``UnmeasurableCall`` carries."""
