"""Issue 15 device probe: every custom-kernel variant against cuBLAS on the issue's table, in one run.

Usage, from the repo root on the GPU machine:  python3 tools/custom_probe.py OUT_DIR
Prints one line per (case, variant) and writes OUT_DIR/custom_probe.json: custom TFLOPS, cuBLAS TFLOPS (the same
operands, measured in the same run), their ratio against the issue's target, the kernel's registers / shared
memory / spills / blocks per SM, and a check of sampled output rows (items) against float64.

Timing: CUDA events around one call on a non-blocking stream; before each call a spin kernel holds the GPU
while the host enqueues [L2 flush, start event, call, end event], so no host gap is timed, and the flush reads a
buffer of 2 x L2 (a read: a memset would leave dirty lines). Median of SAMPLES calls after WARMUP. Every variant
is compiled up front, in parallel. A variant that fails (compile, launch, wrong output) is recorded with its error
and the run goes on; the defaults of every case run first, the alternatives after, and once BUDGET_S seconds
have passed the remaining ones are recorded as skipped. PROBE_VARIANTS=default times the defaults only
(with the first SGEMM default, ``bk16-s3``, for comparison).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

from kernels import cublas, custom, custom_plan  # noqa: E402
from kernels.operands import random_operand, to_host  # noqa: E402

SAMPLES = 30
WARMUP = 3
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "95"))  # no variant starts after this many seconds
HOLD_CYCLES = 600_000  # spin before each sample (300 µs at 2 GHz): longer than the host takes to enqueue the rest
START = time.monotonic()

_AUX = r"""
extern "C" __global__ void probe_hold(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
extern "C" __global__ void probe_flush_read(const float4* __restrict__ p, long long n, float* sink) {
    float s = 0.f;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float4 v = p[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 1234.5f) *sink = s;  // never true (the buffer is zero): keeps the loads
}
"""


@dataclass
class Case:
    """One row of the issue's table: a shape, its cuBLAS reference and the custom variants worth comparing."""

    name: str
    kind: str  # a kernels.custom launcher kind: "batched", "optimized", "wmma", "mma"
    shape: tuple[int, int, int, int]  # batch, m, n, k
    dtype: str
    target: float  # custom / cuBLAS the issue asks for
    variants: list[tuple[str, dict[str, Any]]]  # (label, launcher options); the first is the suite's default
    operands: tuple[Any, Any, Any] | None = None
    cublas_ms: float | None = None
    cublas_error: str | None = None
    launchers: dict[str, Any] = field(default_factory=dict)
    compile_errors: dict[str, str] = field(default_factory=dict)

    @property
    def flops(self) -> float:
        batch, m, n, k = self.shape
        return 2.0 * batch * m * n * k


def _sgemm_variants() -> list[tuple[str, dict[str, Any]]]:
    default = custom_plan.SGEMM_DEFAULT
    return [(n, {"config": n}) for n in [default, *(n for n in custom_plan.SGEMM_CONFIGS if n != default)]]


def _batched_tiled_variants() -> list[tuple[str, dict[str, Any]]]:
    """The suite's default plan first, then every other build on the tiled path."""
    default = custom_plan.BATCHED_TILED_DEFAULT
    return [(f"default (tiled {default})", {}),
            *((f"tiled {n}", {"path": "tiled", "config": n}) for n in custom_plan.SGEMM_CONFIGS if n != default)]


def _mma_variants() -> list[tuple[str, dict[str, Any]]]:
    default = custom_plan.MMA_DEFAULT
    return [(n, {"config": n}) for n in [default, *(n for n in custom_plan.MMA_CONFIGS if n != default)]]


CASES = [
    Case("batched 100000x8^3", "batched", (100000, 8, 8, 8), "fp32", 5.0,
         [("default", {}), ("reg32", {"path": "reg32"})]),
    Case("batched 10000x32^3", "batched", (10000, 32, 32, 32), "fp32", 1.0,
         [("default", {}), ("reg32-mats8", {"path": "reg32", "mats": 8}), ("reg32-mats2", {"path": "reg32", "mats": 2}),
          ("small (issue-5 kernel)", {"path": "small"})]),
    Case("batched 4096x64^3", "batched", (4096, 64, 64, 64), "fp32", 1.0,
         [("default", {}), ("reg64-mats2", {"path": "reg64", "mats": 2}), ("tiled", {"path": "tiled"})]),
    Case("batched 512x128^3", "batched", (512, 128, 128, 128), "fp32", 1.0, _batched_tiled_variants()),
    Case("batched 1024x256^3", "batched", (1024, 256, 256, 256), "fp32", 0.9, _batched_tiled_variants()),
    Case("WMMA FP16 4096^3", "wmma", (1, 4096, 4096, 4096), "fp16", 0.25, [("wmma (seed reference)", {})]),
    Case("mma.sync FP16 4096^3", "mma", (1, 4096, 4096, 4096), "fp16", 0.5, _mma_variants()),
    Case("optimized SGEMM 4096^3", "optimized", (1, 4096, 4096, 4096), "fp32", 0.9, _sgemm_variants()),
]

#: The SGEMM build that was the default before issue 15's third round: kept next to the defaults for comparison.
FIRST_DEFAULT = "bk16-s3"
if os.environ.get("PROBE_VARIANTS") == "default":  # the table: each case's default (and the first one)
    for _case in CASES:
        _case.variants[1:] = [v for v in _case.variants[1:] if v[1].get("config") == FIRST_DEFAULT]


class Timer:
    """Device time of one call: hold, flush (read 2 x L2), event, call, event; median of SAMPLES."""

    def __init__(self, stream: Any) -> None:
        module = cupy.RawModule(code=_AUX, options=("-std=c++17",))
        self.hold = module.get_function("probe_hold")
        self.flush_read = module.get_function("probe_flush_read")
        device = cupy.cuda.Device()
        self.l2_bytes = int(device.attributes["L2CacheSize"])
        self.sms = int(device.attributes["MultiProcessorCount"])
        self.buffer = cupy.zeros(2 * self.l2_bytes // 4, dtype=cupy.float32)
        self.sink = cupy.zeros(1, dtype=cupy.float32)
        self.stream = stream
        self.start, self.end = cupy.cuda.Event(), cupy.cuda.Event()

    def _flush(self) -> None:
        n = self.buffer.size // 4
        self.flush_read((self.sms * 4,), (256,), (self.buffer, np.int64(n), self.sink))

    def median_ms(self, fn: Any, operands: tuple[Any, ...]) -> float:
        for _ in range(WARMUP):
            fn(*operands)
        self.stream.synchronize()
        times = []
        cycles = np.int64(HOLD_CYCLES)
        for _ in range(SAMPLES):
            self.hold((1,), (1,), (cycles,))
            self._flush()
            self.start.record(self.stream)
            fn(*operands)
            self.end.record(self.stream)
            self.end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(self.start, self.end))
        return float(statistics.median(times))


def _operands(case: Case, rng: np.random.Generator) -> tuple[Any, Any, Any]:
    batch, m, n, k = case.shape
    if case.kind == "batched":
        a = random_operand(rng, (batch, m, k), case.dtype)
        b = random_operand(rng, (batch, k, n), case.dtype)
        c = cupy.full((batch, m, n), np.nan, dtype=a.dtype)
    else:
        a = random_operand(rng, (m, k), case.dtype)
        b = random_operand(rng, (k, n), case.dtype)
        c = cupy.full((m, n), np.nan, dtype=a.dtype)
    return a, b, c


def _check(case: Case, a: Any, b: Any, c: Any) -> str:
    """The output's first and last rows (items, for a batch) against float64: "ok" or the failure."""
    try:  # the suite's own bound (FP32 accumulation; one FP16 rounding for fp16)
        from gpuperf.suite.accuracy import assert_gemm_close
    except ImportError as exc:
        return f"not checked: {exc}"
    edge = 4 if case.kind == "batched" else 16
    pick = np.r_[0:edge, -edge:0] if c.shape[0] > 2 * edge else np.arange(c.shape[0])
    try:
        out = to_host(c[pick], case.dtype)
        if case.kind == "batched":
            assert_gemm_close(out, to_host(a[pick], case.dtype), to_host(b[pick], case.dtype), path=case.dtype)
        else:
            assert_gemm_close(out, to_host(a[pick], case.dtype), to_host(b, case.dtype), path=case.dtype)
        return "ok"
    except AssertionError as exc:
        return f"WRONG: {str(exc)[:300]}"


def _cublas_call(case: Case, handle: int) -> Any:
    if case.kind == "batched":
        return lambda a, b, c: cublas.gemm_strided_batched(handle, a, b, c, dtype=case.dtype)
    return lambda a, b, c: cublas.gemm(handle, a, b, c, dtype=case.dtype)


def _plans(case: Case, options: dict[str, Any]) -> list[Any]:
    assert case.operands is not None
    planned = custom_plan.planner_for(case.kind)(*case.operands, **options)
    return planned if isinstance(planned, list) else [planned]


def _compile_all(cases: list[Case]) -> None:
    """Plan every variant, then build each distinct module once, in parallel threads (NVRTC runs without
    the GIL); a variant whose planning or build fails keeps its error in ``case.compile_errors``."""
    planned: dict[tuple[str, str], list[Any]] = {}
    for case in cases:
        for label, options in case.variants:
            try:
                planned[(case.name, label)] = _plans(case, options)
            except Exception as exc:  # noqa: BLE001 - recorded, the probe goes on
                case.compile_errors[label] = f"planning: {type(exc).__name__}: {exc}"[:500]
    unique = {(p.source, p.kernel, p.defines): p for plans in planned.values() for p in plans}

    def build(plan: Any) -> str | None:
        try:
            custom.get_kernel(plan)
            return None
        except Exception as exc:  # noqa: BLE001
            return f"compile {plan.source} {plan.defines}: {type(exc).__name__}: {exc}"[:800]

    with ThreadPoolExecutor(max_workers=8) as pool:
        errors: dict[tuple[str, str, Any], str | None] = dict(zip(unique, pool.map(build, unique.values())))
    for case in cases:
        for label, options in case.variants:
            plans = planned.get((case.name, label), [])
            failed = [e for e in (errors[(p.source, p.kernel, p.defines)] for p in plans) if e is not None]
            if failed:
                case.compile_errors[label] = failed[0]
            elif label not in case.compile_errors:
                case.launchers[label] = custom.launcher(case.kind, **options)
    print(f"probe: built {len(unique)} kernels for {len(planned)} variants in {time.monotonic() - START:.1f} s",
          flush=True)


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    header = {"device": props["name"].decode(), "cc": device.compute_capability, "cupy": cupy.__version__,
              "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "samples": SAMPLES, "warmup": WARMUP,
              "flush": "read 2 x L2 before each call", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    print(f"probe: {header}", flush=True)
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(15)
    stream = cupy.cuda.Stream(non_blocking=True)
    from cupy_backends.cuda.libs import cublas as cublas_lib

    with stream:
        handle = cublas_lib.create()
        timer = Timer(stream)
        for case in CASES:
            case.operands = _operands(case, rng)
        stream.synchronize()
        _compile_all(CASES)

        order = [(case, i) for i in range(max(len(c.variants) for c in CASES)) for case in CASES if i < len(case.variants)]
        for case, index in order:
            label, options = case.variants[index]
            row: dict[str, Any] = {"case": case.name, "variant": label, "default": index == 0, "options": options,
                                   "target": case.target}
            rows.append(row)
            if time.monotonic() - START > BUDGET_S:
                row["error"] = f"skipped: past the {BUDGET_S:.0f} s budget"
                continue
            try:
                assert case.operands is not None
                if case.cublas_ms is None and case.cublas_error is None:
                    try:
                        case.cublas_ms = timer.median_ms(_cublas_call(case, handle), case.operands)
                    except Exception as exc:  # noqa: BLE001
                        case.cublas_error = f"{type(exc).__name__}: {exc}"[:300]
                if label in case.compile_errors:
                    raise RuntimeError(case.compile_errors[label])
                launcher = case.launchers[label]
                a, b, c = case.operands
                c.fill(np.nan)
                ms = timer.median_ms(launcher, case.operands)
                row["check"] = _check(case, a, b, c)
                row["custom_ms"] = ms
                row["custom_tflops"] = case.flops / ms / 1e9
                row.update(resource_fields(launcher.resources))
            except Exception as exc:  # noqa: BLE001 - one failing kernel never stops the probe
                row["error"] = f"{type(exc).__name__}: {exc}"[:500]
                row["traceback"] = traceback.format_exc()[-1500:]
            row.update(cublas_fields(case, row))
            _print_row(row)
            _write(out_dir, header, rows)
        cublas_lib.destroy(handle)

    print("\nprobe: best variant per case (ratio = custom / cuBLAS)")
    for case in CASES:
        done = [r for r in rows if r["case"] == case.name and "ratio" in r and r.get("check") == "ok"]
        if not done:
            print(f"  {case.name:26s} no valid measurement")
            continue
        best = max(done, key=lambda r: r["ratio"])
        default = next((r for r in done if r["default"]), None)
        default_text = f"default {default['ratio']:.3f}x" if default else "default failed"
        print(f"  {case.name:26s} best {best['variant']:24s} {best['ratio']:.3f}x (target {case.target}) | "
              f"{default_text}")
    _write(out_dir, header, rows)
    print(f"probe: {time.monotonic() - START:.1f} s, wrote {out_dir / 'custom_probe.json'}")
    return 0


def resource_fields(res: Any) -> dict[str, Any]:
    """A row's kernel and resources (registers, shared memory, spills, occupancy), when the launcher has them."""
    if res is None:
        return {}
    return {"kernel": res.kernel, "note": res.note(),
            "resources": {"regs": res.num_regs, "smem_bytes": res.shared_bytes, "spill_bytes": res.local_bytes,
                          "blocks_per_sm": res.blocks_per_sm, "threads": res.block_threads}}


def cublas_fields(case: Any, row: dict[str, Any]) -> dict[str, Any]:
    """cuBLAS's time on the same operands, the ratio and whether a correct build meets the case's target."""
    if case.cublas_ms is None:
        return {"cublas_error": case.cublas_error} if case.cublas_error else {}
    fields: dict[str, Any] = {"cublas_ms": case.cublas_ms, "cublas_tflops": case.flops / case.cublas_ms / 1e9}
    if "custom_ms" in row:
        fields["ratio"] = case.cublas_ms / row["custom_ms"]
        fields["meets_target"] = fields["ratio"] >= case.target and str(row.get("check", "")).startswith("ok")
    return fields


def _print_row(row: dict[str, Any]) -> None:
    if "error" in row:
        print(f"{row['case']:26s} {row['variant']:24s} ERROR {row['error'][:200]}", flush=True)
        return
    ratio = f"{row['ratio']:.3f}x" if "ratio" in row else "-"
    cublas_tf = f"{row['cublas_tflops']:8.2f}" if "cublas_tflops" in row else "       -"
    print(f"{row['case']:26s} {row['variant']:24s} custom {row['custom_tflops']:8.2f} cuBLAS {cublas_tf} TFLOPS "
          f"ratio {ratio:>7s} (target {row['target']}) check {row['check'][:60]} | {row.get('note', '')}", flush=True)


def _write(out_dir: Path, header: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    payload = {**header, "elapsed_s": round(time.monotonic() - START, 1), "rows": rows}
    (out_dir / "custom_probe.json").write_text(json.dumps(payload, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
