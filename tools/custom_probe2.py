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

import functools
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import custom_probe as p1  # noqa: E402  (tools/custom_probe.py: Timer, Case, Check, compiling, cuBLAS calls, rows)
from kernels import custom_plan  # noqa: E402

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


def _compile(cases: list[p1.Case], checks: list[p1.Check]) -> None:
    """Build every module the timing and the checks need, once, in parallel; record each variant's error or launcher."""
    modules, kernels, _ = p1.compile_variants(cases, lambda plan: f"compile {plan.source} {plan.kernel} {plan.defines}",
                                              p1.check_plans(checks, lambda check: NEW[check.kind]))
    print(f"probe2: built {modules} modules ({kernels} kernels) in {time.monotonic() - START:.1f} s", flush=True)


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    header = p1.run_header(new_sgemm=NEW_SGEMM, new_batched=NEW_BATCHED, new_mma=NEW_MMA, round2_sgemm=BEST2_SGEMM,
                           round2_batched=BEST2_BATCHED)
    print(f"probe2: {header}", flush=True)
    payload: dict[str, Any] = {**header, "correctness": [], "rows": []}
    write = functools.partial(p1.write_json, out_dir / "custom_probe2.json", payload)
    rng = np.random.default_rng(152)

    with p1.measuring() as (handle, timer):
        for case in CASES:
            case.operands = p1._operands(case, rng)
        checks: list[p1.Check] = []
        for kind, specs in CHECKS.items():
            if not NEW[kind]:  # nothing new of this kind to check: no operands, no reference
                continue
            for label, batch, m, n, k, options in specs:
                try:
                    checks.append(p1.Check(kind, label, batch, m, n, k, options, rng))
                except Exception as exc:  # noqa: BLE001
                    payload["correctness"].append({"kind": kind, "check": label, "status": f"SETUP ERROR: {exc}"[:400]})
        timer.stream.synchronize()
        print(f"probe2: operands and float64 references ready in {time.monotonic() - START:.1f} s", flush=True)
        _compile(CASES, checks)
        write()

        # (2) correctness of the new builds
        verdict: dict[tuple[str, str], str] = {}  # (kind, config) -> "ok" or the first failure
        for kind in ("optimized", "batched", "mma"):
            for config in NEW[kind]:
                results, status = p1.run_checks([c for c in checks if c.kind == kind], config)
                payload["correctness"] += [{"kind": kind, "config": config, **result} for result in results]
                verdict[(kind, config)] = status
                passed = sum(result["status"] == "ok" for result in results)
                print(f"check {kind:9s} {config:36s} {passed}/{len(results)} ok"
                      + ("" if status == "ok" else f"  FIRST FAILURE {status[:220]}"), flush=True)
                write()
        p1.release(checks)  # free the references before timing

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
