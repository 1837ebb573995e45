"""Checks the suite's figures of a project's perf tests against an independent torch.profiler trace of the same calls.

Two steps, each a process of its own on the same GPU, back to back:

1. the project's suite runs as usual (``python3 -m pytest … --results-dir DIR``) and writes ``results.json``;
2. ``python3 tools/gpu_host/profiler_check.py trace --out PROFILE.json -- <the same pytest arguments>`` runs the same
tests
   (all of them, so the process has the same history when a perf test starts: ``torch.compile``'s autotuner, for
   one, picks a kernel configuration at the first call it sees), but each ``measure(fn, work, operands)`` is
   answered by torch.profiler instead of the suite: the call is warmed up for ``--warmup`` seconds, then traced for
   at least ``--trace`` seconds (``--calls`` calls at least), each call after a flush that reads a buffer (256 MiB;
   ``--flush-mib``, e.g. the suite's own 2 × L2, for a power-capped case whose speed follows what the flush draws)
   (PyTorch's own ``sum``, no kernel of the suite's: a flush that *writes*, as ``triton.testing.do_bench``'s
   ``zero_()`` does, leaves the L2 full of dirty lines whose write-back the next call pays, seen as +7 % on a 4096³
   bf16 GEMM and +13 % on a 45 µs add); a call's time is its kernels' span (first kernel start to last kernel end,
   from kineto's device events between two flushes), the median over the calls. Each call's SM clock is read on
   the GPU, by a kernel of this tool's own that stamps every SM's cycle counter (``%clock64``) and the global timer
   just before the call and just after it: cycles over nanoseconds, per SM, averaged; its cycles are its span × that
   clock. The suite's measuring loop and its CUPTI
   tracer are not used in this process at all (kineto and the suite's tracer would share CUPTI's one set of
   activity callbacks).

``python3 tools/gpu_host/profiler_check.py compare RESULTS.json PROFILE.json`` prints the Markdown table of both figures
per case and their difference, and exits 1 when one differs by more than ``--limit`` per cent. The states are matched by
the method (cold, the L2 flushed before each call, the same operands, the same tests before) and, for a case whose
time follows the SM clock (``clock_bound`` in the results) when either run was below the maximum clock, by
comparing cycles instead of time: the suite's cycles per call against the profiler's median of span × clock. A
power-capped GEMM runs at whatever clock its load sets, which a trace of another length need not reproduce (two
ways were tried first and failed: NVML's polled clock read 1980 MHz through a trace whose GEMMs ran at 1634 MHz, and
one mean clock over the whole trace is partly the flushes' and the host gaps' clock).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The flush buffer of the trace: larger than twice any L2 (the H200's is 60 MiB).
FLUSH_BYTES = 256 * 2**20


def _split_spans(events: Sequence[tuple[str, float, float]], flush: frozenset[str]) -> list[float]:
    """Each call's span in seconds from (name, start_us, end_us) device events: the kernels between two flushes
    (kernels named in ``flush``)."""
    spans: list[float] = []
    current: list[tuple[float, float]] = []
    for name, start, end in sorted(events, key=lambda event: event[1]):
        if name in flush:
            if current:
                spans.append((max(e for _, e in current) - min(s for s, _ in current)) / 1e6)
            current = []
        elif not name.startswith(("Memcpy", "Memset")):
            current.append((start, end))
    if current:
        spans.append((max(e for _, e in current) - min(s for s, _ in current)) / 1e6)
    return spans


def _kernel_names(events: Sequence[tuple[str, float, float]], flush: frozenset[str]) -> list[str]:
    return sorted({name[:120] for name, _, _ in events
                   if name not in flush and not name.startswith(("Memcpy", "Memset"))})


def _flush_kernels(buffer: Any) -> frozenset[str]:
    """The names of the kernels the flush (a ``sum`` of ``buffer``) runs, as the trace will show them."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        buffer.sum()
        torch.cuda.synchronize()
    names = frozenset(name for name, _, _ in _device_events(prof) if not name.startswith(("Memcpy", "Memset")))
    if not names:
        raise RuntimeError("the flush ran no kernel the trace shows")
    return names


def _device_events(prof: Any) -> list[tuple[str, float, float]]:
    import torch

    events = []
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            events.append((event.name, float(event.time_range.start), float(event.time_range.end)))
    return events


_STAMP_SOURCE = r"""
extern "C" __global__ void profiler_check_stamp(unsigned long long* out) {
    if (threadIdx.x != 0) return;
    unsigned int sm;
    unsigned long long now;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    out[3 * blockIdx.x] = sm;
    out[3 * blockIdx.x + 1] = clock64();
    out[3 * blockIdx.x + 2] = now;
}
"""


class ClockStamps:
    """Stamps of every SM's cycle counter and the global timer, enqueued on the current stream (a block per slot,
    twice as many as SMs, so each SM is hit); the SM clock between two stamps is cycles over nanoseconds on each SM
    stamped both times, averaged."""

    def __init__(self, count: int) -> None:
        import cupy
        import torch

        self._cupy, self._torch = cupy, torch
        self.blocks = 2 * torch.cuda.get_device_properties(0).multi_processor_count
        self._kernel = cupy.RawKernel(_STAMP_SOURCE, "profiler_check_stamp")
        self._stamps = cupy.zeros((count, self.blocks * 3), dtype=cupy.uint64)

    def stamp(self, index: int) -> None:
        stream = self._cupy.cuda.ExternalStream(self._torch.cuda.current_stream().cuda_stream)
        self._kernel((self.blocks,), (32,), (self._stamps[index],), stream=stream)

    def clocks_mhz(self, pairs: Sequence[tuple[int, int]]) -> list[float]:
        """The SM clock between each pair of stamps (call after synchronising)."""
        stamps = self._cupy.asnumpy(self._stamps).reshape(len(self._stamps), -1, 3)
        clocks = []
        for first, last in pairs:
            before = {int(sm): (int(c), int(t)) for sm, c, t in stamps[first]}
            clocks.append(statistics.fmean((int(c) - before[int(sm)][0]) / (int(t) - before[int(sm)][1]) * 1e3
                                           for sm, c, t in stamps[last]
                                           if int(sm) in before and int(t) > before[int(sm)][1]))
        return clocks


def profile_calls(fn: Callable[..., Any], operands: Sequence[Any], calls: int, warmup_s: float, trace_s: float,
                  cold: bool, flush_bytes: int = FLUSH_BYTES) -> dict[str, Any]:
    """Each traced call's span (seconds) and SM clock, their medians and cycles, the kernels seen."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    buffer = torch.ones(flush_bytes // 4, dtype=torch.int32, device="cuda")
    flush = _flush_kernels(buffer)
    start, warm = time.perf_counter(), 0
    while time.perf_counter() - start < warmup_s or warm < 3:
        if cold:
            buffer.sum()
        fn(*operands)
        torch.cuda.synchronize()
        warm += 1
    per_call = (time.perf_counter() - start) / warm
    count = max(calls, math.ceil(trace_s / per_call))
    clock = ClockStamps(2 * count)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for index in range(count):
            buffer.sum()  # the separator of the calls, hot or cold
            clock.stamp(2 * index)
            fn(*operands)
            clock.stamp(2 * index + 1)
        buffer.sum()
        torch.cuda.synchronize()
    events = _device_events(prof)
    separators = flush | {"profiler_check_stamp"}
    spans = _split_spans(events, separators)
    if len(spans) != count:
        raise RuntimeError(f"{count} calls traced, {len(spans)} found between the flushes")
    clocks = clock.clocks_mhz([(2 * index, 2 * index + 1) for index in range(count)])
    return {"spans": spans, "median_s": statistics.median(spans), "calls": len(spans),
            "kernels": _kernel_names(events, separators), "sm_clock_mhz": statistics.median(clocks),
            "cycles_per_call": statistics.median(span * mhz * 1e6 for span, mhz in zip(spans, clocks)),
            "max_sm_clock_mhz": _max_sm_clock_mhz()}


def _max_sm_clock_mhz() -> float:
    import pynvml

    pynvml.nvmlInit()
    return float(pynvml.nvmlDeviceGetMaxClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))


class ProfilerOnly:
    """A pytest plugin: the suite's ``measure`` answered by torch.profiler, its CUPTI tracer never opened."""

    def __init__(self, calls: int, warmup_s: float, trace_s: float, flush_bytes: int = FLUSH_BYTES) -> None:
        self.calls, self.warmup_s, self.trace_s, self.flush_bytes = calls, warmup_s, trace_s, flush_bytes
        self.figures: dict[str, dict[str, Any]] = {}

    def pytest_configure(self, config: Any) -> None:
        from gpuperf.measure.measurement import Measurement
        from gpuperf.wiring import fixtures

        plugin = self
        fixtures.GpuPool.tracer = lambda pool: None  # type: ignore[method-assign]

        def measure(measurer: Any, fn: Callable[..., Any], work: Any, operands: Sequence[Any] = (),
                    flush: str | None = None, label: str = "") -> Measurement:
            mode = flush or measurer.flush_mode
            with measurer.current():
                traced = profile_calls(fn, operands, plugin.calls, plugin.warmup_s, plugin.trace_s, mode == "cold",
                                       plugin.flush_bytes)
            nodeid = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
            spans = traced.pop("spans")
            # A case's figure is its test's first measured call; a later one is a ratio's denominator.
            plugin.figures.setdefault(fixtures.case_id_of(nodeid), {**traced, "label": label})
            return Measurement(samples_s=tuple(spans), work=work, flush=mode, method="torch-profiler", label=label)

        fixtures.Measurer.__call__ = measure  # type: ignore[method-assign]


def trace(args: argparse.Namespace) -> int:
    import pytest

    plugin = ProfilerOnly(args.calls, args.warmup, args.trace, args.flush_mib * 2**20)
    code = pytest.main(["-p", "no:cacheprovider", "--results-dir", "none", "--history", "none", *args.pytest],
                       plugins=[plugin])
    import torch

    document = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": args.calls,
                "warmup_s": args.warmup, "trace_s": args.trace, "flush_mib": args.flush_mib, "cases": plugin.figures}
    Path(args.out).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    print(f"profiler_check: {len(plugin.figures)} cases traced into {args.out} (pytest exit {int(code)})")
    return 0 if plugin.figures else 1


#: A run within this fraction of the maximum SM clock ran at it (the clocks step by 15 MHz).
AT_MAX_CLOCK = 0.985
def judged(record: dict[str, Any], traced: dict[str, Any]) -> tuple[str, float, float]:
    """(basis, Δ % of time, Δ % of the judged figure): cycles for a clock-bound case when either run was below
    the maximum clock, time otherwise."""
    delta_time = 100 * (traced["median_s"] / record["median_s"] - 1)
    maximum = traced["max_sm_clock_mhz"]
    below = min(record.get("call_clock_mhz") or maximum, traced["sm_clock_mhz"]) < AT_MAX_CLOCK * maximum
    if record.get("clock_bound") and below and record.get("cycles_per_call"):
        return "cycles", delta_time, 100 * (traced["cycles_per_call"] / record["cycles_per_call"] - 1)
    return "time", delta_time, delta_time


def comparison(results: dict[str, Any], profile: dict[str, Any], limit_pct: float) -> tuple[list[str], bool]:
    """The Markdown table of every case in both files, and whether each is within ``limit_pct``."""
    records = {record["case_id"]: record for record in results["records"] if record.get("median_s")}
    uuid = (results.get("run", {}).get("extra") or {}).get("uuid", "")
    lines = [f"Suite: {results['run']['gpu_name']} {uuid}, {results['run']['started']}; torch.profiler: "
             f"{profile['gpu']}, torch {profile['torch']}, at least {profile['calls']} calls and "
             f"{profile['trace_s']} s after {profile['warmup_s']} s of warm-up"
             + (f", {profile['flush_mib']} MiB read before each call." if "flush_mib" in profile else "."),
             "",
             "| case | suite µs | profiler µs | Δ time % | suite SM MHz | trace SM MHz | judged on | Δ % |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    deltas = []
    shared = sorted(set(records) & set(profile["cases"]))
    for case in shared:
        record, traced = records[case], profile["cases"][case]
        basis, delta_time, delta = judged(record, traced)
        deltas.append(abs(delta))
        clock = f"{record['call_clock_mhz']:.0f}" if record.get("call_clock_mhz") else "–"
        lines.append(f"| `{case}` | {1e6 * record['median_s']:.2f} | {1e6 * traced['median_s']:.2f} | "
                     f"{delta_time:+.2f} | {clock} | {traced['sm_clock_mhz']:.0f} | {basis} | {delta:+.2f} |")
    worst = max(deltas, default=math.nan)
    lines += ["", f"{len(shared)} cases; largest difference {worst:.2f} % (limit {limit_pct:g} %)."]
    return lines, bool(shared) and worst <= limit_pct


def compare(args: argparse.Namespace) -> int:
    results = json.loads(Path(args.results).read_text())
    profile = json.loads(Path(args.profile).read_text())
    lines, ok = comparison(results, profile, args.limit)
    print("\n".join(lines))
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    traced = commands.add_parser("trace", help="run the perf tests with torch.profiler answering measure()")
    traced.add_argument("--out", required=True, help="the profile JSON to write")
    traced.add_argument("--calls", type=int, default=50)
    traced.add_argument("--warmup", type=float, default=1.0, help="seconds of calls before the trace")
    traced.add_argument("--trace", type=float, default=1.0, help="seconds of calls traced at least")
    traced.add_argument("--flush-mib", type=int, default=FLUSH_BYTES // 2**20,
                        help="MiB the flush before each cold call reads (default 256: more than twice any L2)")
    traced.add_argument("pytest", nargs=argparse.REMAINDER, help="-- then pytest's arguments")
    compared = commands.add_parser("compare", help="the suite's figures beside the profiler's")
    compared.add_argument("results")
    compared.add_argument("profile")
    compared.add_argument("--limit", type=float, default=2.0, help="largest difference allowed, per cent")
    args = parser.parse_args(argv)
    if args.command == "trace":
        args.pytest = args.pytest[1:] if args.pytest[:1] == ["--"] else args.pytest
        return trace(args)
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
