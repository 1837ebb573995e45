"""Checks the suite's per-call SM clock and cycles against two independent clocks, on a GPU.

``python -m tools.gpu_host.clock_check --out DIR`` measures power-capped GEMMs with the suite's own measuring loop
(``gpuperf.measure.timing.Timer``, traced, cold, the clock stamped by the flush kernel) and compares:

1. **NVML over a long window.** NVML's polled SM clock cannot follow millisecond power management, but its mean
   over seconds of one sustained workload can: the traced phase is stretched to ``--window`` seconds while a
   thread polls ``nvmlDeviceGetClockInfo(SM)`` every 2 ms; the two means must agree.
2. **Nsight Compute**, when ``ncu`` is on the PATH: ``sm__cycles_elapsed.avg`` of the GEMM's kernel (with
   ``--clock-control none``, so the clocks stay as the host sets them) against the suite's cycles per call of
   the same call. ncu replays and serialises kernels, so its time differs; its cycles of a compute-bound kernel
   should not.

Writes ``clock_check.json`` into ``--out`` and prints one line per check.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

CASES = [("fp16", 8192, 8192, 8192), ("fp64", 4096, 4096, 4096), ("bf16", 8192, 8192, 8192),
         ("fp16", 4096, 4096, 4096), ("tf32", 4096, 4096, 4096), ("fp32", 4096, 4096, 4096)]
#: ncu replays each kernel many times: it checks the first cases only (a tensor-core and an FP64 GEMM).
NCU_CASES = 2


def _poll(nvml: Any, stop: threading.Event, seen: list[int]) -> None:
    while not stop.is_set():
        clock = nvml.sm_clock_mhz()
        if clock:
            seen.append(int(clock))
        time.sleep(0.002)


def measure_cases(window_s: float) -> list[dict[str, Any]]:
    import numpy

    from gpuperf.measure.metrics import gemm_work
    from gpuperf.measure.stats import StoppingRule
    from gpuperf.measure.timing import SamplingConfig, Timer
    from gpuperf.wiring.fixtures import GpuPool
    from kernels import cublas, operands

    pool = GpuPool()
    ctx = pool.context(0)
    rows: list[dict[str, Any]] = []
    stream = pool.stream(ctx)
    with ctx.device, stream:
        from cupy_backends.cuda.libs import cublas as cublas_lib

        handle = pool.cublas_handle(ctx)
        cublas_lib.setStream(handle, stream.ptr)
        rule = StoppingRule(min_samples=10, min_time_s=window_s, noise_target=1e-9, timeout_s=window_s * 3)
        config = SamplingConfig(rule=rule, traced_min_time_s=window_s)
        timer = Timer(ctx.info.l2_bytes, pool.flush_buffer(ctx), ctx.nvml, config, tracer=pool.tracer())
        rng = numpy.random.default_rng(7)
        for dtype, m, n, k in CASES:
            a = operands.random_operand(rng, (m, k), dtype)
            b = operands.random_operand(rng, (k, n), dtype)
            c = operands.random_operand(rng, (m, n), dtype)
            seen: list[int] = []
            stop = threading.Event()
            poller = threading.Thread(target=_poll, args=(ctx.nvml, stop, seen), daemon=True)
            poller.start()
            measured = timer.measure(lambda a, b, c: cublas.gemm(handle, a, b, c, dtype=dtype),
                                     gemm_work(m, n, k, dtype), operands=(a, b, c))
            stop.set()
            poller.join()
            rows.append({
                "case": f"{dtype} {m}x{n}x{k}", "method": measured.method, "samples": len(measured.samples_s),
                "median_us": 1e6 * measured.median_s, "time_rel_iqr": measured.summary.rel_iqr,
                "cycles_per_call": measured.cycles_per_call,
                "cycles_rel_iqr": measured.cycles_summary.rel_iqr if measured.cycles_summary else None,
                "stamped_clock_mhz": measured.call_clock_mhz,
                "nvml_clock_mhz": statistics.fmean(seen) if seen else None, "nvml_polls": len(seen),
                "kernels": [kernel.name for kernel in measured.kernels],
                "clock_events": list(measured.clock_events),
            })
            stamped, polled = rows[-1]["stamped_clock_mhz"], rows[-1]["nvml_clock_mhz"]
            gap = f"{100 * (stamped / polled - 1):+.2f} %" if stamped and polled else "n/a"
            print(f"{rows[-1]['case']}: stamped {stamped or 0:.0f} MHz, NVML mean {polled or 0:.0f} MHz ({gap}); "
                  f"time IQR {100 * measured.summary.rel_iqr:.2f} %, cycles IQR "
                  f"{100 * (rows[-1]['cycles_rel_iqr'] or 0):.2f} %", flush=True)
    return rows


_NCU_PROGRAM = """
import numpy, cupy
from kernels import cublas, operands
from gpuperf.wiring.fixtures import GpuPool
pool = GpuPool(); ctx = pool.context(0)
with ctx.device:
    handle = pool.cublas_handle(ctx)
    rng = numpy.random.default_rng(7)
    dtype, m, n, k = {case!r}
    a = operands.random_operand(rng, (m, k), dtype); b = operands.random_operand(rng, (k, n), dtype)
    c = operands.random_operand(rng, (m, n), dtype)
    for _ in range(12):
        cublas.gemm(handle, a, b, c, dtype=dtype)
    cupy.cuda.Device().synchronize()
"""


def ncu_cycles(case: tuple[str, int, int, int], kernel: str) -> dict[str, Any]:
    """ncu's cycles and duration of launches 6–10 of the case's main kernel, or why not."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"error": "ncu is not on the PATH"}
    command = [ncu, "--clock-control", "none", "--kernel-name-base", "demangled", "--kernel-name",
               f"regex:{kernel}", "--launch-skip", "5", "--launch-count", "5", "--csv", "--metrics",
               "sm__cycles_elapsed.avg,gpu__time_duration.sum", sys.executable, "-c",
               _NCU_PROGRAM.format(case=case)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    cycles, durations = [], []
    for line in out.stdout.splitlines():
        fields = [field.strip('"') for field in line.split('","')]
        if len(fields) > 3 and fields[-3] == "sm__cycles_elapsed.avg":
            cycles.append(float(fields[-1].replace(",", "")))
        if len(fields) > 3 and fields[-3] == "gpu__time_duration.sum":
            durations.append(float(fields[-1].replace(",", "")))
    if not cycles:
        return {"error": f"no ncu metrics (exit {out.returncode}): {(out.stderr or out.stdout)[-600:]}"}
    return {"cycles": statistics.median(cycles), "launches": len(cycles),
            "duration": statistics.median(durations) if durations else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu_host.clock_check", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--window", type=float, default=1.5, help="seconds of traced sampling per case")
    parser.add_argument("--ncu", action="store_true", help="also compare with Nsight Compute's cycles")
    args = parser.parse_args(argv)
    rows = measure_cases(args.window)
    if args.ncu:
        for row, case in list(zip(rows, CASES))[:NCU_CASES]:
            if row["kernels"]:
                row["ncu"] = ncu_cycles(case, row["kernels"][-1].split("<")[0])
                ncu = row["ncu"]
                if "cycles" in ncu and row["cycles_per_call"]:
                    print(f"{row['case']}: ncu {ncu['cycles']:.0f} cycles, suite {row['cycles_per_call']:.0f} "
                          f"({100 * (row['cycles_per_call'] / ncu['cycles'] - 1):+.2f} %)", flush=True)
                else:
                    print(f"{row['case']}: ncu: {ncu.get('error', '')[:300]}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "clock_check.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
