"""Issue 15 mma probe (round 3 of the mma kernel): mma_hgemm.cu's MMA_FAST builds (the guard-free interior loop,
``MMA_CONFIGS`` entries named ``...-fast``) checked against float64, then timed at FP16 4096^3 against the default,
their non-fast twins and cuBLAS in the same run.

Usage, from the repo root on the GPU machine:  python3 tools/custom_probe3.py OUT_DIR   (or tools/custom_probe3.sh)

(1) Compile every module once, in parallel threads (NVRTC releases the GIL).
(2) Correctness of every -fast build, and of the default as a control, on fresh random data: per shape one operand set
    shared by every build, a float64 reference and magnitude computed on the GPU, the suite's bound
    (gpuperf.suite.accuracy.tolerance("fp16", k)) checked on every element, C NaN-poisoned when beta = 0, C's padding
    checked untouched, A's and B's padding NaN (a read past K or N shows). Shapes: probe 2's mma shapes (127x129x65,
    1000x3000x2000, 4096x4096x4095, 4096^3 with alpha/beta, a padded one, a misaligned one for the scalar kernel) and
    shapes whose blocks are mostly interior, so that the guard-free K-tiles run and hand over to the guarded K tail on
    the vec8 kernel: 4096x4096x4095 with lda 4096, 2048x2048x1000, 1024x1536x4104 with padded leading dimensions,
    2000x1000x520 (edge blocks on both sides) with alpha/beta, 1280x1280x1024 with alpha/beta.
(3) Timing as tools/custom_probe.py (its Timer: hold, L2 flush by reading 2 x L2, events, median of 30 calls) of mma
    FP16 4096^3 for the default, the non-fast twins of the new builds that the table has, every -fast build and
    cuBLAS, in PROBE_ROUNDS rounds (the order rotated each round, cuBLAS timed in every round); a build's time is the
    median of its rounds, its ratio cuBLAS's median over its own. None starts past PROBE_BUDGET_S.
Every failure (planning, compile, launch, wrong output) is recorded with its error and the run goes on. Writes
OUT_DIR/custom_probe3.json after every step and prints the best build at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
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

import custom_probe as p1  # noqa: E402  (tools/custom_probe.py: Timer, Case, cuBLAS calls, resource fields)
from gpuperf.suite.accuracy import tolerance  # noqa: E402
from kernels import custom, custom_plan  # noqa: E402
from kernels.operands import random_operand  # noqa: E402

START = p1.START
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "50"))
ROUNDS = int(os.environ.get("PROBE_ROUNDS", "5"))
DEFAULT = custom_plan.MMA_DEFAULT
#: The new builds: every MMA_FAST build of the table.
NEW_MMA = [n for n, b in custom_plan.MMA_CONFIGS.items() if b.fast]


def _twin(name: str) -> str | None:
    """The table's build with ``name``'s geometry and fast off, if there is one (what -fast changes, alone)."""
    plain = dataclasses.replace(custom_plan.MMA_CONFIGS[name], fast=False)
    return next((n for n, b in custom_plan.MMA_CONFIGS.items() if b == plain), None)


TWINS = [t for t in dict.fromkeys(_twin(n) for n in NEW_MMA) if t is not None and t != DEFAULT]
TIMED = list(dict.fromkeys([DEFAULT, *TWINS, *NEW_MMA]))
CHECKED = list(dict.fromkeys([DEFAULT, *NEW_MMA]))  # the default as a control of the check itself
CASE = p1.Case("mma.sync FP16 4096^3", "mma", (1, 4096, 4096, 4096), "fp16", 0.5, [(n, {"config": n}) for n in TIMED])

# (label, m, n, k, options): pad = extra leading-dimension elements of (A, B, C), NaN; offset = every matrix starts one
# element into its buffer (misaligned: the scalar kernel).
CHECKS: list[tuple[str, int, int, int, dict[str, Any]]] = [
    ("127x129x65", 127, 129, 65, {}),
    ("1000x3000x2000", 1000, 3000, 2000, {}),
    ("4096x4096x4095", 4096, 4096, 4095, {}),
    ("4096x4096x4096 alpha 0.5 beta 0.25", 4096, 4096, 4096, {"alpha": 0.5, "beta": 0.25}),
    ("130x264x200 padded ld", 130, 264, 200, {"pad": (8, 8, 16)}),
    ("129x131x47 misaligned, beta -2", 129, 131, 47, {"offset": True, "alpha": 0.5, "beta": -2.0}),
    ("4096x4096x4095 lda 4096 (vec8 K tail)", 4096, 4096, 4095, {"pad": (1, 0, 0)}),
    ("2048x2048x1000 interior", 2048, 2048, 1000, {}),
    ("1024x1536x4104 padded ld", 1024, 1536, 4104, {"pad": (8, 8, 8)}),
    ("2000x1000x520 alpha 1.5 beta 1", 2000, 1000, 520, {"alpha": 1.5, "beta": 1.0}),
    ("1280x1280x1024 alpha -1 beta -0.5", 1280, 1280, 1024, {"alpha": -1.0, "beta": -0.5}),
]


def _buffer(rng: np.random.Generator, rows: int, cols: int, pad: int, offset: bool, nan: bool) -> tuple[Any, Any]:
    """(whole buffer, matrix view), FP16: random values (NaN when ``nan``) in the matrix, NaN in the padding and
    before an offset start."""
    lead = 1 if offset else 0
    buf = random_operand(rng, (rows, lead + cols + pad), "fp16")
    if buf.base is not None:  # random_operand may return a view; keep a plain buffer
        buf = buf.copy()
    nanv = cupy.asarray(np.nan, dtype=buf.dtype)
    view = buf[:, lead:lead + cols]
    buf[:, :lead] = nanv
    buf[:, lead + cols:] = nanv
    if nan:
        view[...] = nanv
    return buf, view


class Check:
    """One shape's operands and float64 reference, shared by every build."""

    def __init__(self, label: str, m: int, n: int, k: int, options: dict[str, Any], rng: np.random.Generator) -> None:
        self.label = label
        self.alpha = float(options.get("alpha", 1.0))
        self.beta = float(options.get("beta", 0.0))
        pad = options.get("pad", (0, 0, 0))
        offset = bool(options.get("offset", False))
        _, self.a = _buffer(rng, m, k, pad[0], offset, False)
        _, self.b = _buffer(rng, k, n, pad[1], offset, False)
        self.c_buf, self.c = _buffer(rng, m, n, pad[2], offset, self.beta == 0.0)
        self.c_buf0 = self.c_buf.copy()
        a64, b64 = self.a.astype(cupy.float64), self.b.astype(cupy.float64)
        self.ref = self.alpha * cupy.matmul(a64, b64)
        self.mag = abs(self.alpha) * cupy.matmul(cupy.abs(a64), cupy.abs(b64))
        if self.beta != 0.0:
            c064 = self.c.astype(cupy.float64)
            self.ref += self.beta * c064
            self.mag += abs(self.beta) * cupy.abs(c064)
        self.bound = tolerance("fp16", k) * self.mag
        del a64, b64

    def plan(self, config: str) -> Any:
        return custom_plan.plan_mma(self.a, self.b, self.c, self.alpha, self.beta, config=config)

    def run(self, config: str) -> dict[str, Any]:
        self.c_buf[...] = self.c_buf0  # the original C (or NaN) and NaN padding
        plan = self.plan(config)
        custom.launch(plan)
        cupy.cuda.get_current_stream().synchronize()
        got = self.c.astype(cupy.float64)
        err = cupy.abs(got - self.ref)
        bad = ~(err <= self.bound)  # NaN (unwritten, or read past an edge) counts as bad
        nbad = int(bad.sum())
        outside = cupy.ones(self.c_buf.shape, dtype=bool)
        lead = (self.c.data.ptr - self.c_buf.data.ptr) // self.c.itemsize  # 0, or 1 for the misaligned case
        outside[:, lead:lead + self.c.shape[1]] = False
        before, after = self.c_buf0[outside], self.c_buf[outside]
        touched = int((~((before == after) | (cupy.isnan(before) & cupy.isnan(after)))).sum())
        ratio = float(cupy.max(cupy.where(self.bound > 0, err / cupy.where(self.bound > 0, self.bound, 1), 0)))
        result: dict[str, Any] = {"check": self.label, "kernel": plan.kernel, "max_err_over_bound": ratio}
        if nbad or touched:
            worst = tuple(int(i) for i in cupy.unravel_index(int(cupy.argmax(cupy.where(bad, err, -1))), err.shape))
            result["status"] = (f"WRONG: {nbad} of {err.size} outside the bound (NaN: {int(cupy.isnan(got).sum())}), "
                                f"{touched} padding elements written; worst at {worst}")
        else:
            result["status"] = "ok"
        return result


def _compile(checks: list[Check]) -> None:
    """Build every module the timing and the checks need, once, in parallel; record each variant's error or launcher."""
    wanted: dict[tuple[str, str, Any], Any] = {}
    for label, options in CASE.variants:
        try:
            for plan in p1._plans(CASE, options):
                wanted[(plan.source, plan.kernel, plan.defines)] = plan
        except Exception as exc:  # noqa: BLE001
            CASE.compile_errors[label] = f"planning: {type(exc).__name__}: {exc}"[:500]
    for check in checks:
        for config in CHECKED:
            try:
                plan = check.plan(config)
                wanted[(plan.source, plan.kernel, plan.defines)] = plan
            except Exception:  # noqa: BLE001 - reported when the check runs
                pass
    modules: dict[tuple[str, Any], Any] = {}  # the vec8 and scalar kernels of a module share one NVRTC compile
    for (source, _, defines), plan in wanted.items():
        modules.setdefault((source, defines), plan)

    def build(plan: Any) -> None:
        try:
            custom.get_kernel(plan)
        except Exception:  # noqa: BLE001 - each kernel's own error is taken below
            pass

    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 8)) as pool:
        list(pool.map(build, modules.values()))
    for label, options in CASE.variants:
        if label in CASE.compile_errors:
            continue
        try:
            for plan in p1._plans(CASE, options):
                custom.get_kernel(plan)
            CASE.launchers[label] = custom.launcher(CASE.kind, **options)
        except Exception as exc:  # noqa: BLE001
            CASE.compile_errors[label] = f"compile: {type(exc).__name__}: {exc}"[:800]
    print(f"probe3: built {len(modules)} modules ({len(wanted)} kernels) in {time.monotonic() - START:.1f} s",
          flush=True)


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    header = {"device": props["name"].decode(), "cc": device.compute_capability, "cupy": cupy.__version__,
              "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "samples": p1.SAMPLES, "warmup": p1.WARMUP,
              "rounds": ROUNDS, "flush": "read 2 x L2 before each call",
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "default": DEFAULT, "new_mma": NEW_MMA,
              "twins": TWINS, "builds": {n: dict(custom_plan.MMA_CONFIGS[n].defines) for n in TIMED}}
    print(f"probe3: {header}", flush=True)
    payload: dict[str, Any] = {**header, "correctness": [], "rounds_ms": [], "rows": []}

    def write() -> None:
        payload["elapsed_s"] = round(time.monotonic() - START, 1)
        (out_dir / "custom_probe3.json").write_text(json.dumps(payload, indent=1, default=str))

    rng = np.random.default_rng(153)
    stream = cupy.cuda.Stream(non_blocking=True)
    from cupy_backends.cuda.libs import cublas as cublas_lib

    with stream:
        handle = cublas_lib.create()
        timer = p1.Timer(stream)
        CASE.operands = p1._operands(CASE, rng)
        checks: list[Check] = []
        for label, m, n, k, options in CHECKS:
            try:
                checks.append(Check(label, m, n, k, options, rng))
            except Exception as exc:  # noqa: BLE001
                payload["correctness"].append({"check": label, "status": f"SETUP ERROR: {exc}"[:400]})
        stream.synchronize()
        print(f"probe3: operands and float64 references ready in {time.monotonic() - START:.1f} s", flush=True)
        _compile(checks)
        write()

        # (2) correctness
        verdict: dict[str, str] = {}  # config -> "ok" or the first failure
        for config in CHECKED:
            passed = 0
            for check in checks:
                try:
                    result = check.run(config)
                except Exception as exc:  # noqa: BLE001
                    result = {"check": check.label, "status": f"ERROR {type(exc).__name__}: {exc}"[:500],
                              "traceback": traceback.format_exc()[-1200:]}
                payload["correctness"].append({"config": config, **result})
                passed += result["status"] == "ok"
                if result["status"] != "ok" and config not in verdict:
                    verdict[config] = f"{check.label}: {result['status']}"
            verdict.setdefault(config, "ok")
            worst = max((r.get("max_err_over_bound", 0.0) for r in payload["correctness"] if r.get("config") == config),
                        default=0.0)
            print(f"check {config:24s} {passed}/{len(checks)} ok (max err/bound {worst:.3f})"
                  + ("" if verdict[config] == "ok" else f"  FIRST FAILURE {verdict[config][:220]}"), flush=True)
            write()
        for c in checks:  # free the references before timing
            del c.ref, c.mag, c.bound
        checks.clear()
        cupy.get_default_memory_pool().free_all_blocks()

        # (3) timing: ROUNDS rounds, the order rotated, cuBLAS in every round
        labels = [label for label, _ in CASE.variants]
        times: dict[str, list[float]] = {label: [] for label in ["cuBLAS", *labels]}
        errors: dict[str, str] = dict(CASE.compile_errors)
        assert CASE.operands is not None
        a, b, c = CASE.operands
        for r in range(ROUNDS):
            if time.monotonic() - START > BUDGET_S:
                print(f"probe3: round {r} skipped: past the {BUDGET_S:.0f} s budget", flush=True)
                break
            shift = r % len(labels)
            order = ["cuBLAS", *labels[shift:], *labels[:shift]]
            measured: dict[str, float] = {}
            for label in order:
                if label in errors:
                    continue
                try:
                    if label == "cuBLAS":
                        ms = timer.median_ms(p1._cublas_call(CASE, handle), CASE.operands)
                    else:
                        c.fill(np.nan)
                        ms = timer.median_ms(CASE.launchers[label], CASE.operands)
                    times[label].append(ms)
                    measured[label] = ms
                except Exception as exc:  # noqa: BLE001 - one failing build never stops the probe
                    errors[label] = f"{type(exc).__name__}: {exc}"[:500]
            payload["rounds_ms"].append(measured)
            line = " ".join(f"{k}={v:.4f}" for k, v in measured.items())
            print(f"probe3: round {r}: {line}", flush=True)
            write()
        cublas_lib.destroy(handle)

    cublas_ms = statistics.median(times["cuBLAS"]) if times["cuBLAS"] else None
    rows = []
    for index, label in enumerate(labels):
        build = custom_plan.MMA_CONFIGS[label]
        row: dict[str, Any] = {"case": CASE.name, "variant": label, "config": label, "default": index == 0,
                               "new": label in NEW_MMA, "fast": build.fast, "defines": dict(build.defines),
                               "target": CASE.target,
                               "check": verdict.get(label, "ok (checked on the GPU before: the suite, probes 1 and 2)")}
        if label in errors:
            row["error"] = errors[label]
        if times[label]:
            ms = statistics.median(times[label])
            row.update({"custom_ms": ms, "custom_ms_rounds": times[label], "custom_tflops": CASE.flops / ms / 1e9})
            launcher = CASE.launchers.get(label)
            if launcher is not None:
                row.update(p1.resource_fields(launcher.resources))
            if cublas_ms is not None:
                row.update({"cublas_ms": cublas_ms, "cublas_tflops": CASE.flops / cublas_ms / 1e9,
                            "ratio": cublas_ms / ms,
                            "ratio_rounds": [cb / t for cb, t in zip(times["cuBLAS"], times[label])]})
                row["meets_target"] = row["ratio"] >= CASE.target and row["check"].startswith("ok")
        rows.append(row)
    payload["rows"] = rows

    print(f"\nprobe3: mma.sync FP16 4096^3, median of {len(times['cuBLAS'])} rounds "
          f"(cuBLAS {CASE.flops / cublas_ms / 1e9 if cublas_ms else float('nan'):.2f} TFLOPS); ratio = cuBLAS / custom")
    for row in sorted(rows, key=lambda r: -r.get("ratio", -1.0)):
        if "ratio" not in row:
            print(f"  {row['config']:24s} ERROR {row.get('error', 'not measured')[:200]}")
            continue
        spread = f"{min(row['ratio_rounds']):.3f}-{max(row['ratio_rounds']):.3f}"
        tags = ("default " if row["default"] else "") + ("new " if row["new"] else "")
        print(f"  {row['config']:24s} {row['custom_tflops']:7.2f} TFLOPS  ratio {row['ratio']:.3f}x (rounds {spread}) "
              f"{tags}check {row['check'][:60]} | {row.get('note', '')}")
    done = [r for r in rows if "ratio" in r and r["check"].startswith("ok")]
    if done:
        best = max(done, key=lambda r: r["ratio"])
        default = next((r for r in rows if r["default"] and "ratio" in r), None)
        payload["summary"] = {"best": best["config"], "ratio": best["ratio"], "custom_tflops": best["custom_tflops"],
                              "cublas_tflops": best["cublas_tflops"], "target": CASE.target,
                              "default_ratio": default["ratio"] if default else None}
        print(f"probe3: best {best['config']} {best['ratio']:.3f}x ({best['custom_tflops']:.1f} vs "
              f"{best['cublas_tflops']:.1f} TFLOPS, target {CASE.target})"
              + (f" | default {default['config']} {default['ratio']:.3f}x" if default else ""))
    else:
        print("probe3: no valid measurement")
    failed = sorted(f"{c}: {v[:160]}" for c, v in verdict.items() if v != "ok")
    print(f"probe3: correctness: {len(verdict) - len(failed)} of {len(verdict)} builds ok"
          + "".join(f"\n  FAILED {f}" for f in failed))
    write()
    print(f"probe3: {time.monotonic() - START:.1f} s, wrote {out_dir / 'custom_probe3.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
