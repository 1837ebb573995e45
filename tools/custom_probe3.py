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
import functools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import custom_probe as p1  # noqa: E402  (tools/custom_probe.py: Timer, Case, Check, compiling, cuBLAS calls, rows)
from kernels import custom_plan  # noqa: E402

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


def _compile(checks: list[p1.Check]) -> None:
    """Build every module the timing and the checks need, once, in parallel; record each variant's error or launcher."""
    checked = p1.check_plans(checks, lambda check: CHECKED)
    modules, kernels, _ = p1.compile_variants([CASE], lambda plan: "compile", checked)
    print(f"probe3: built {modules} modules ({kernels} kernels) in {time.monotonic() - START:.1f} s", flush=True)


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    header = p1.run_header(rounds=ROUNDS, default=DEFAULT, new_mma=NEW_MMA, twins=TWINS,
                           builds={n: dict(custom_plan.MMA_CONFIGS[n].defines) for n in TIMED})
    print(f"probe3: {header}", flush=True)
    payload: dict[str, Any] = {**header, "correctness": [], "rounds_ms": [], "rows": []}
    write = functools.partial(p1.write_json, out_dir / "custom_probe3.json", payload)
    rng = np.random.default_rng(153)

    with p1.measuring() as (handle, timer):
        CASE.operands = p1._operands(CASE, rng)
        checks: list[p1.Check] = []
        for label, m, n, k, options in CHECKS:
            try:
                checks.append(p1.Check("mma", label, 1, m, n, k, options, rng))
            except Exception as exc:  # noqa: BLE001
                payload["correctness"].append({"check": label, "status": f"SETUP ERROR: {exc}"[:400]})
        timer.stream.synchronize()
        print(f"probe3: operands and float64 references ready in {time.monotonic() - START:.1f} s", flush=True)
        _compile(checks)
        write()

        # (2) correctness
        verdict: dict[str, str] = {}  # config -> "ok" or the first failure
        for config in CHECKED:
            results, verdict[config] = p1.run_checks(checks, config)
            payload["correctness"] += [{"config": config, **result} for result in results]
            passed = sum(result["status"] == "ok" for result in results)
            worst = max((result.get("max_err_over_bound", 0.0) for result in results), default=0.0)
            print(f"check {config:24s} {passed}/{len(checks)} ok (max err/bound {worst:.3f})"
                  + ("" if verdict[config] == "ok" else f"  FIRST FAILURE {verdict[config][:220]}"), flush=True)
            write()
        p1.release(checks)  # free the references before timing

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
