"""Issue 15 third device probe (round 3; it keeps probe 2's file, log and JSON format): the third-round SGEMM builds
(cuBLAS's K step BK = 8 and warp_sgemm.cu's options -ak, -fast, -pipe, -sw<G>; their batched tiled kernels) checked
against float64, then timed against cuBLAS with the current defaults and the best second-round builds in the same run.

Usage, from the repo root on the GPU machine:  python3 tools/custom_probe2.py OUT_DIR   (or tools/custom_probe2.sh)

(1) Compile every module once, in parallel threads (NVRTC releases the GIL).
(2) Correctness of every THIRD-ROUND build on fresh random data (the defaults and the second-round builds were checked
    on the GPU by the suite and probe 2): per shape one operand set (shared by that kind's builds), a float64
    reference and magnitude computed on the GPU, the suite's bound (gpuperf.suite.accuracy.tolerance: 1e-5 for fp32)
    checked on every element, NaN-poisoned C when beta = 0, the padding of C checked untouched. Shapes: 127x129x65,
    1000x3000x2000, 4096x4096x4095 (K not a multiple of any BK: the guard-free K-tiles, then the guarded tail),
    a padded vector case with partial tiles, alpha/beta, a misaligned start (the scalar kernels); batched
    3x257x255x129, 4x256x256x256 with beta, 2x1000x300x200. A swizzled build (-sw<G>) only reorders the 2-D grid: its
    batched kernel is its unswizzled twin's, so it is checked and timed as SGEMM only.
(3) Timing as tools/custom_probe.py (hold, L2 flush by reading 2 x L2, events, median of 30): optimized SGEMM 4096^3
    (the default, wt128x256-t16x8-bk16-s3 and wt128x128-t16x8-bk32-s3 of round 2, then every third-round build),
    batched 1024x256^3 on the tiled path (the default, wt128x128-t8x8-bk16-s3 and wt128x256-t16x8-bk16-s3, then every
    third-round build) and mma.sync FP16 4096^3 (the default only), cuBLAS in the same run; none starts past
    PROBE_BUDGET_S.
Every failure (planning, compile, launch, wrong output) is recorded with its error and the run goes on. Writes
OUT_DIR/custom_probe2.json after every row and prints the best build per case at the end.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import custom_probe as p1  # noqa: E402  (tools/custom_probe.py: Timer, Case, cuBLAS calls, row printing)
from gpuperf.suite.accuracy import tolerance  # noqa: E402
from kernels import custom, custom_plan  # noqa: E402
from kernels.operands import random_operand  # noqa: E402

START = p1.START
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "88"))
#: The SGEMM builds of the first two probes (already checked on the GPU); every other SGEMM_CONFIGS entry is new.
ROUND1_SGEMM = {"bk16-s3", "bk16-s2", "bk16-s4", "bk8-s2", "bk8-s3"}
ROUND2_SGEMM = {"wt128x128-t16x8-bk16-s3", "wt128x128-t16x8-bk16-s4", "wt128x128-t16x8-bk32-s3",
                "wt128x128-t8x16-bk16-s3", "wt128x256-t16x8-bk16-s3", "wt256x128-t16x8-bk16-s3",
                "wt128x128-t8x8-bk16-s3"}
OLD_SGEMM = ROUND1_SGEMM | ROUND2_SGEMM
#: The best second-round builds of each case (probe 2), timed again next to the new ones.
BEST2_SGEMM = ["wt128x256-t16x8-bk16-s3", "wt128x128-t16x8-bk32-s3"]
BEST2_BATCHED = ["wt128x128-t8x8-bk16-s3", "wt128x256-t16x8-bk16-s3"]
NEW_SGEMM = [n for n in custom_plan.SGEMM_CONFIGS if n not in OLD_SGEMM]


def _swizzled(name: str) -> bool:
    build = custom_plan.SGEMM_CONFIGS[name]
    return isinstance(build, custom_plan.WarpSgemmConfig) and build.swizzle > 0


#: The new builds whose batched tiled kernel differs from another's (a swizzle only reorders the 2-D grid).
NEW_BATCHED = [n for n in NEW_SGEMM if not _swizzled(n)]
#: No mma build is new in this round: the default is timed as a reference only.
NEW_MMA: list[str] = []
OLD_MMA = set(custom_plan.MMA_CONFIGS)
SGEMM_ORDER = list(dict.fromkeys([custom_plan.SGEMM_DEFAULT, "bk16-s3", *BEST2_SGEMM, *NEW_SGEMM]))
BATCHED_ORDER = list(dict.fromkeys([custom_plan.BATCHED_TILED_DEFAULT, "bk16-s3", *BEST2_BATCHED, *NEW_BATCHED]))
CASES = [
    p1.Case("optimized SGEMM 4096^3", "optimized", (1, 4096, 4096, 4096), "fp32", 0.9,
            [(n, {"config": n}) for n in SGEMM_ORDER]),
    p1.Case("batched 1024x256^3", "batched", (1024, 256, 256, 256), "fp32", 0.9,
            [(f"tiled {n}", {"path": "tiled", "config": n}) for n in BATCHED_ORDER]),
    p1.Case("mma.sync FP16 4096^3", "mma", (1, 4096, 4096, 4096), "fp16", 0.5,
            [(custom_plan.MMA_DEFAULT, {"config": custom_plan.MMA_DEFAULT})]),
]
#: The builds checked for correctness, per check kind.
NEW = {"optimized": NEW_SGEMM, "batched": NEW_BATCHED, "mma": NEW_MMA}

# (label, batch, m, n, k, options): pad = extra leading-dimension elements of (A, B, C); offset = every matrix starts
# one element into its buffer (misaligned: the scalar kernels).
CHECKS: dict[str, list[tuple[str, int, int, int, int, dict[str, Any]]]] = {
    "optimized": [
        ("127x129x65", 1, 127, 129, 65, {}),
        ("1000x3000x2000", 1, 1000, 3000, 2000, {}),
        ("4096x4096x4095", 1, 4096, 4096, 4095, {}),
        ("130x260x36 padded ld", 1, 130, 260, 36, {"pad": (4, 8, 4)}),
        ("1000x3000x2000 alpha -1.5 beta 0.75", 1, 1000, 3000, 2000, {"alpha": -1.5, "beta": 0.75}),
        ("129x131x47 misaligned, beta -2", 1, 129, 131, 47, {"offset": True, "alpha": 0.5, "beta": -2.0}),
    ],
    "mma": [
        ("127x129x65", 1, 127, 129, 65, {}),
        ("1000x3000x2000", 1, 1000, 3000, 2000, {}),
        ("4096x4096x4095", 1, 4096, 4096, 4095, {}),
        ("4096x4096x4096 alpha 0.5 beta 0.25", 1, 4096, 4096, 4096, {"alpha": 0.5, "beta": 0.25}),
        ("130x264x200 padded ld", 1, 130, 264, 200, {"pad": (8, 8, 16)}),
        ("129x131x47 misaligned, beta -2", 1, 129, 131, 47, {"offset": True, "alpha": 0.5, "beta": -2.0}),
    ],
    "batched": [
        ("3x257x255x129", 3, 257, 255, 129, {}),
        ("4x256x256x256 alpha 2 beta 0.5", 4, 256, 256, 256, {"alpha": 2.0, "beta": 0.5}),
        ("2x1000x300x200", 2, 1000, 300, 200, {}),
    ],
}


def _buffer(rng: np.random.Generator, batch: int, rows: int, cols: int, dtype: str, pad: int, offset: bool,
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
    """One shape's operands and float64 reference, shared by every build of its kind."""

    def __init__(self, kind: str, label: str, batch: int, m: int, n: int, k: int, options: dict[str, Any],
                 rng: np.random.Generator) -> None:
        self.kind, self.label = kind, label
        self.dtype = "fp16" if kind == "mma" else "fp32"
        self.alpha = float(options.get("alpha", 1.0))
        self.beta = float(options.get("beta", 0.0))
        pad = options.get("pad", (0, 0, 0))
        offset = bool(options.get("offset", False))
        _, self.a = _buffer(rng, batch, m, k, self.dtype, pad[0], offset, False)
        _, self.b = _buffer(rng, batch, k, n, self.dtype, pad[1], offset, False)
        self.c_buf, self.c = _buffer(rng, batch, m, n, self.dtype, pad[2], offset, self.beta == 0.0)
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


def _compile(cases: list[p1.Case], checks: list[Check]) -> dict[tuple[str, str, Any], str | None]:
    """Build every module the timing and the checks need, once, in parallel; return each kernel's error or None."""
    wanted: dict[tuple[str, str, Any], Any] = {}
    for case in cases:
        for label, options in case.variants:
            try:
                for plan in p1._plans(case, options):
                    wanted[(plan.source, plan.kernel, plan.defines)] = plan
            except Exception as exc:  # noqa: BLE001
                case.compile_errors[label] = f"planning: {type(exc).__name__}: {exc}"[:500]
    for check in checks:
        for config in NEW[check.kind]:
            try:
                for plan in check.plans(config):
                    wanted[(plan.source, plan.kernel, plan.defines)] = plan
            except Exception:  # noqa: BLE001 - reported when the check runs
                pass
    # one thread per module: the vec and scalar kernels of a module share one NVRTC compile
    modules: dict[tuple[str, Any], Any] = {}
    for (source, _, defines), plan in wanted.items():
        modules.setdefault((source, defines), plan)

    def build(plan: Any) -> None:
        try:
            custom.get_kernel(plan)
        except Exception:  # noqa: BLE001 - each kernel's own error is taken below
            pass

    with ThreadPoolExecutor(max_workers=min(32, os.cpu_count() or 8)) as pool:
        list(pool.map(build, modules.values()))
    errors: dict[tuple[str, str, Any], str | None] = {}
    for key, plan in wanted.items():
        try:
            custom.get_kernel(plan)
            errors[key] = None
        except Exception as exc:  # noqa: BLE001
            errors[key] = f"compile {plan.source} {plan.kernel} {plan.defines}: {type(exc).__name__}: {exc}"[:800]
    for case in cases:
        for label, options in case.variants:
            if label in case.compile_errors:
                continue
            failed = [errors[(p.source, p.kernel, p.defines)] for p in p1._plans(case, options)]
            failed = [e for e in failed if e]
            if failed:
                case.compile_errors[label] = failed[0]
            else:
                case.launchers[label] = custom.launcher(case.kind, **options)
    print(f"probe2: built {len(modules)} modules ({len(wanted)} kernels) in {time.monotonic() - START:.1f} s", flush=True)
    return errors


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    header = {"device": props["name"].decode(), "cc": device.compute_capability, "cupy": cupy.__version__,
              "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "samples": p1.SAMPLES, "warmup": p1.WARMUP,
              "flush": "read 2 x L2 before each call", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "new_sgemm": NEW_SGEMM, "new_batched": NEW_BATCHED, "new_mma": NEW_MMA,
              "round2_sgemm": BEST2_SGEMM, "round2_batched": BEST2_BATCHED}
    print(f"probe2: {header}", flush=True)
    payload: dict[str, Any] = {**header, "correctness": [], "rows": []}

    def write() -> None:
        payload["elapsed_s"] = round(time.monotonic() - START, 1)
        (out_dir / "custom_probe2.json").write_text(json.dumps(payload, indent=1, default=str))

    rng = np.random.default_rng(152)
    stream = cupy.cuda.Stream(non_blocking=True)
    from cupy_backends.cuda.libs import cublas as cublas_lib

    with stream:
        handle = cublas_lib.create()
        timer = p1.Timer(stream)
        for case in CASES:
            case.operands = p1._operands(case, rng)
        checks: list[Check] = []
        for kind, specs in CHECKS.items():
            if not NEW[kind]:  # nothing new of this kind to check: no operands, no reference
                continue
            for label, batch, m, n, k, options in specs:
                try:
                    checks.append(Check(kind, label, batch, m, n, k, options, rng))
                except Exception as exc:  # noqa: BLE001
                    payload["correctness"].append({"kind": kind, "check": label, "status": f"SETUP ERROR: {exc}"[:400]})
        stream.synchronize()
        print(f"probe2: operands and float64 references ready in {time.monotonic() - START:.1f} s", flush=True)
        _compile(CASES, checks)
        write()

        # (2) correctness of the new builds
        verdict: dict[tuple[str, str], str] = {}  # (kind, config) -> "ok" or the first failure
        for kind in ("optimized", "batched", "mma"):
            for config in NEW[kind]:
                lines = []
                for check in (c for c in checks if c.kind == kind):
                    try:
                        result = check.run(config)
                    except Exception as exc:  # noqa: BLE001
                        result = {"check": check.label, "status": f"ERROR {type(exc).__name__}: {exc}"[:500],
                                  "traceback": traceback.format_exc()[-1200:]}
                    payload["correctness"].append({"kind": kind, "config": config, **result})
                    if result["status"] != "ok" and (kind, config) not in verdict:
                        verdict[(kind, config)] = f"{check.label}: {result['status']}"
                    lines.append(result["status"] == "ok")
                verdict.setdefault((kind, config), "ok")
                status = verdict[(kind, config)]
                print(f"check {kind:9s} {config:36s} {sum(lines)}/{len(lines)} ok"
                      + ("" if status == "ok" else f"  FIRST FAILURE {status[:220]}"), flush=True)
                write()
        for c in checks:  # free the references before timing
            del c.ref, c.mag, c.bound
        checks.clear()
        cupy.get_default_memory_pool().free_all_blocks()

        # (3) timing
        order = [(case, i) for i in range(max(len(c.variants) for c in CASES)) for case in CASES if i < len(case.variants)]
        for case, index in order:
            label, options = case.variants[index]
            config = options["config"]
            row: dict[str, Any] = {"case": case.name, "variant": label, "config": config, "default": index == 0,
                                   "new": config not in (OLD_MMA if case.kind == "mma" else OLD_SGEMM),
                                   "options": options, "target": case.target}
            row["check"] = verdict.get((case.kind, config),
                                       "ok (checked on the GPU before: the suite's correctness tests, probes 1 and 2)")
            payload["rows"].append(row)
            if time.monotonic() - START > BUDGET_S:
                row["error"] = f"skipped: past the {BUDGET_S:.0f} s budget"
                p1._print_row(row)
                continue
            try:
                assert case.operands is not None
                if case.cublas_ms is None and case.cublas_error is None:
                    try:
                        case.cublas_ms = timer.median_ms(p1._cublas_call(case, handle), case.operands)
                    except Exception as exc:  # noqa: BLE001
                        case.cublas_error = f"{type(exc).__name__}: {exc}"[:300]
                if label in case.compile_errors:
                    raise RuntimeError(case.compile_errors[label])
                launcher = case.launchers[label]
                case.operands[2].fill(np.nan)
                ms = timer.median_ms(launcher, case.operands)
                row["custom_ms"] = ms
                row["custom_tflops"] = case.flops / ms / 1e9
                row.update(p1.resource_fields(launcher.resources))
            except Exception as exc:  # noqa: BLE001 - one failing build never stops the probe
                row["error"] = f"{type(exc).__name__}: {exc}"[:500]
                row["traceback"] = traceback.format_exc()[-1500:]
            row.update(p1.cublas_fields(case, row))
            p1._print_row(row)
            write()
        cublas_lib.destroy(handle)

    print("\nprobe2: best build per case (ratio = cuBLAS time / custom time; only builds whose check passed)")
    summary = []
    for case in CASES:
        done = [r for r in payload["rows"] if r["case"] == case.name and "ratio" in r and r["check"].startswith("ok")]
        default = next((r for r in payload["rows"] if r["case"] == case.name and r["default"] and "ratio" in r), None)
        if not done:
            print(f"  {case.name:24s} no valid measurement")
            continue
        best = max(done, key=lambda r: r["ratio"])
        top3 = ", ".join(f"{r['config']} {r['ratio']:.3f}x" for r in sorted(done, key=lambda r: -r["ratio"])[:3])
        default_text = f"default {default['config']} {default['ratio']:.3f}x" if default else "default not measured"
        print(f"  {case.name:24s} best {best['config']:36s} {best['ratio']:.3f}x ({best['custom_tflops']:.1f} vs "
              f"{best['cublas_tflops']:.1f} TFLOPS, target {case.target}) | {default_text} | top: {top3}")
        summary.append({"case": case.name, "best": best["config"], "ratio": best["ratio"],
                        "custom_tflops": best["custom_tflops"], "cublas_tflops": best["cublas_tflops"],
                        "target": case.target, "default_ratio": default["ratio"] if default else None})
    failed = sorted(f"{k} {c}: {v[:160]}" for (k, c), v in verdict.items() if v != "ok")
    print(f"probe2: correctness of the new builds: {len(verdict) - len(failed)} of {len(verdict)} ok"
          + "".join(f"\n  FAILED {f}" for f in failed))
    payload["summary"] = summary
    write()
    print(f"probe2: {time.monotonic() - START:.1f} s, wrote {out_dir / 'custom_probe2.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
