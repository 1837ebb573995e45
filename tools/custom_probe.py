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

Probes 2 and 3 (tools/custom_probe2.py, tools/custom_probe3.py) import this module as ``p1`` and share its pieces:
``Timer``, ``Case``, ``compile_variants`` / ``compile_modules``, the correctness ``Check``, ``run_header``,
``measuring`` and ``write_json``.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

from gpuperf.suite.accuracy import tolerance  # noqa: E402
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


def plan_variants(case: Case) -> dict[str, list[Any]]:
    """Each variant's launch plans on the case's operands; a variant whose planning fails is left out, with its
    error in ``case.compile_errors``."""
    planned: dict[str, list[Any]] = {}
    for label, options in case.variants:
        try:
            planned[label] = _plans(case, options)
        except Exception as exc:  # noqa: BLE001 - recorded, the probe goes on
            case.compile_errors[label] = f"planning: {type(exc).__name__}: {exc}"[:500]
    return planned


def compile_modules(plans: Iterable[Any]) -> int:
    """Build the module of every plan once, in parallel threads (NVRTC runs without the GIL): one NVRTC compile per
    (source, defines), which every kernel of that file shares. A failed build is left to the per-kernel step: the
    kernel's ``custom.get_kernel`` raises its error again. Returns the number of modules."""
    modules: dict[tuple[str, Any], Any] = {}
    for plan in plans:
        modules.setdefault((plan.source, plan.defines), plan)

    def build(plan: Any) -> None:
        try:
            custom.get_kernel(plan)
        except Exception:  # noqa: BLE001 - each kernel's own error is taken afterwards
            pass

    with ThreadPoolExecutor(max_workers=min(32, os.cpu_count() or 8)) as pool:
        list(pool.map(build, modules.values()))
    return len(modules)


def compile_variants(cases: Sequence[Case], error_head: Callable[[Any], str], more_plans: Iterable[Any] = ()
                     ) -> tuple[int, int, int]:
    """Plan every variant of ``cases``, build every module those plans and ``more_plans`` (a probe's correctness
    checks) need (``compile_modules``), then give each variant its launcher in ``case.launchers``, or its error in
    ``case.compile_errors``: its planning's, or its first failing kernel's ``"{error_head(plan)}: {type}: {error}"``.
    Returns the numbers of modules, kernels and variants planned."""
    planned = {(case.name, label): plans for case in cases for label, plans in plan_variants(case).items()}
    wanted = {(p.source, p.kernel, p.defines): p for plans in planned.values() for p in plans}
    wanted.update({(p.source, p.kernel, p.defines): p for p in more_plans})
    modules = compile_modules(wanted.values())
    errors: dict[tuple[str, str, Any], str | None] = {}
    for key, plan in wanted.items():
        try:
            custom.get_kernel(plan)
            errors[key] = None
        except Exception as exc:  # noqa: BLE001
            errors[key] = f"{error_head(plan)}: {type(exc).__name__}: {exc}"[:800]
    for case in cases:
        for label, options in case.variants:
            if (case.name, label) not in planned:  # its planning failed: that error is recorded
                continue
            failed = [e for e in (errors[(p.source, p.kernel, p.defines)] for p in planned[(case.name, label)]) if e]
            if failed:
                case.compile_errors[label] = failed[0]
            else:
                case.launchers[label] = custom.launcher(case.kind, **options)
    return modules, len(wanted), len(planned)


def _compile_all(cases: list[Case]) -> None:
    """Plan and build every variant (``compile_variants``); a variant whose planning or build fails keeps its error
    in ``case.compile_errors``."""
    _, kernels, variants = compile_variants(cases, lambda plan: f"compile {plan.source} {plan.defines}")
    print(f"probe: built {kernels} kernels for {variants} variants in {time.monotonic() - START:.1f} s", flush=True)


def _check_buffer(rng: np.random.Generator, batch: int, rows: int, cols: int, dtype: str, pad: int, offset: bool,
                  nan: bool) -> tuple[Any, Any]:
    """(whole buffer, matrix view): random values (NaN when ``nan``) in the matrix, NaN in the padding and before an
    offset start."""
    shape = (batch, rows, cols) if batch > 1 else (rows, cols)
    lead = 1 if offset else 0
    wide = (*shape[:-1], lead + cols + pad)
    buf = random_operand(rng, wide, dtype)
    if buf.base is not None:  # random_operand may return a view; keep a plain buffer
        buf = buf.copy()
    nanv = cupy.asarray(np.nan, dtype=buf.dtype)
    view = buf[..., lead:lead + cols]
    buf[..., :lead] = nanv
    buf[..., lead + cols:] = nanv
    if nan:
        view[...] = nanv
    return buf, view


class Check:
    """A correctness check of probes 2 and 3: one shape's operands and float64 reference, shared by every build of
    its kind ("optimized", "batched": the tiled path, "mma") that it checks.

    ``options``: alpha, beta (C NaN-poisoned when beta = 0), pad = extra leading-dimension elements of (A, B, C),
    holding NaN (a read past K or N shows; a write into C's padding is counted), offset = every matrix starts one
    element into its buffer (misaligned: the scalar kernels). The bound is the suite's
    (gpuperf.suite.accuracy.tolerance), on every element."""

    def __init__(self, kind: str, label: str, batch: int, m: int, n: int, k: int, options: dict[str, Any],
                 rng: np.random.Generator) -> None:
        self.kind, self.label = kind, label
        self.dtype = "fp16" if kind == "mma" else "fp32"
        self.alpha = float(options.get("alpha", 1.0))
        self.beta = float(options.get("beta", 0.0))
        pad = options.get("pad", (0, 0, 0))
        offset = bool(options.get("offset", False))
        _, self.a = _check_buffer(rng, batch, m, k, self.dtype, pad[0], offset, False)
        _, self.b = _check_buffer(rng, batch, k, n, self.dtype, pad[1], offset, False)
        self.c_buf, self.c = _check_buffer(rng, batch, m, n, self.dtype, pad[2], offset, self.beta == 0.0)
        self.c0 = self.c.copy()
        self.c_buf0 = self.c_buf.copy()
        a64, b64 = self.a.astype(cupy.float64), self.b.astype(cupy.float64)
        self.ref = self.alpha * cupy.matmul(a64, b64)
        self.mag = abs(self.alpha) * cupy.matmul(cupy.abs(a64), cupy.abs(b64))
        if self.beta != 0.0:
            c064 = self.c0.astype(cupy.float64)
            self.ref += self.beta * c064
            self.mag += abs(self.beta) * cupy.abs(c064)
        self.bound = tolerance(self.dtype, k) * self.mag
        del a64, b64

    def plans(self, config: str) -> list[Any]:
        if self.kind == "batched":
            return custom_plan.plan_batched(self.a, self.b, self.c, self.alpha, self.beta, path="tiled", config=config)
        planner = custom_plan.plan_mma if self.kind == "mma" else custom_plan.plan_optimized
        return [planner(self.a, self.b, self.c, self.alpha, self.beta, config=config)]

    def run(self, config: str) -> dict[str, Any]:
        """The ``config`` build's result: check, kernel, max_err_over_bound and status ("ok", "WRONG: ..."), or
        check, status ("ERROR ...") and traceback when it fails to plan or launch."""
        try:
            return self._run(config)
        except Exception as exc:  # noqa: BLE001 - a failing build never stops the probe
            return {"check": self.label, "status": f"ERROR {type(exc).__name__}: {exc}"[:500],
                    "traceback": traceback.format_exc()[-1200:]}

    def _run(self, config: str) -> dict[str, Any]:
        self.c_buf[...] = self.c_buf0  # the original C (or NaN) and NaN padding
        plans = self.plans(config)
        custom.launch_all(plans)
        cupy.cuda.get_current_stream().synchronize()
        got = self.c.astype(cupy.float64)
        err = cupy.abs(got - self.ref)
        bad = ~(err <= self.bound)  # NaN (unwritten, or read past an edge) counts as bad
        nbad = int(bad.sum())
        outside = cupy.ones(self.c_buf.shape, dtype=bool)
        lead = self.c.data.ptr - self.c_buf.data.ptr  # bytes: 0, or one element for the misaligned case
        outside[..., lead // self.c.itemsize:lead // self.c.itemsize + self.c.shape[-1]] = False
        before, after = self.c_buf0[outside], self.c_buf[outside]
        touched = int((~((before == after) | (cupy.isnan(before) & cupy.isnan(after)))).sum())
        ratio = float(cupy.max(cupy.where(self.bound > 0, err / cupy.where(self.bound > 0, self.bound, 1), 0)))
        result: dict[str, Any] = {"check": self.label, "kernel": plans[0].kernel, "max_err_over_bound": ratio}
        if nbad or touched:
            worst = tuple(int(i) for i in cupy.unravel_index(int(cupy.argmax(cupy.where(bad, err, -1))), err.shape))
            result["status"] = (f"WRONG: {nbad} of {err.size} outside the bound (NaN: "
                                f"{int(cupy.isnan(got).sum())}), {touched} padding elements written; worst at {worst}")
        else:
            result["status"] = "ok"
        return result


def check_plans(checks: Sequence[Check], configs: Callable[[Check], Sequence[str]]) -> list[Any]:
    """The plans of every check's builds (``configs(check)``), to compile with the timed ones; a build whose planning
    fails is left out (its check reports the error)."""
    plans: list[Any] = []
    for check in checks:
        for config in configs(check):
            try:
                plans += check.plans(config)
            except Exception:  # noqa: BLE001 - reported when the check runs
                pass
    return plans


def run_checks(checks: Sequence[Check], config: str) -> tuple[list[dict[str, Any]], str]:
    """The ``config`` build's result on every check (``Check.run``), and its verdict: "ok", or the first failure
    as "{check}: {status}"."""
    results = [check.run(config) for check in checks]
    failures = (f"{check.label}: {r['status']}" for check, r in zip(checks, results) if r["status"] != "ok")
    return results, next(failures, "ok")


def release(checks: list[Check]) -> None:
    """Drop the checks, their float64 references first, and free CuPy's memory pool (before timing)."""
    for c in checks:
        del c.ref, c.mag, c.bound
    checks.clear()
    cupy.get_default_memory_pool().free_all_blocks()


def run_header(rounds: int | None = None, **extra: Any) -> dict[str, Any]:
    """A probe run's JSON header (and first log line): the device, CuPy and the CUDA runtime, the timing settings
    (``rounds`` with them, for a probe that times in rounds), the start time, then ``extra``."""
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    timing = {"samples": SAMPLES, "warmup": WARMUP, **({} if rounds is None else {"rounds": rounds})}
    return {"device": props["name"].decode(), "cc": device.compute_capability, "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), **timing, "flush": "read 2 x L2 before each call",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra}


@contextmanager
def measuring() -> Iterator[tuple[int, Timer]]:
    """A non-blocking stream, current inside the block, with a cuBLAS handle and a ``Timer`` on it:
    ``with measuring() as (handle, timer):``."""
    stream = cupy.cuda.Stream(non_blocking=True)
    from cupy_backends.cuda.libs import cublas as cublas_lib

    with stream:
        handle = cublas_lib.create()
        yield handle, Timer(stream)
        cublas_lib.destroy(handle)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """``payload`` as JSON to ``path``, its ``elapsed_s`` set to the seconds since the start (probes write after
    every step, so a run that is killed keeps what it measured)."""
    payload["elapsed_s"] = round(time.monotonic() - START, 1)
    path.write_text(json.dumps(payload, indent=1, default=str))


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    header = run_header()
    print(f"probe: {header}", flush=True)
    rows: list[dict[str, Any]] = []
    payload = {**header, "elapsed_s": 0.0, "rows": rows}  # elapsed_s: set by every write
    write = functools.partial(write_json, out_dir / "custom_probe.json", payload)
    rng = np.random.default_rng(15)

    with measuring() as (handle, timer):
        for case in CASES:
            case.operands = _operands(case, rng)
        timer.stream.synchronize()
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
            write()

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
    write()
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


if __name__ == "__main__":
    sys.exit(main())
