"""Probe what cuBLASLt does with FP8 on this GPU: accepted type/scale-mode combinations, the memory layout of
the block scales (by matching each hypothesis against a float64 reference), refusals, and rough timings.

Exploratory: its JSON goes to docs/ as the record of what this cuBLASLt accepts on sm_90.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from typing import Any

import cupy
import ml_dtypes
import numpy as np
from nvmath.bindings import cublas
from nvmath.bindings import cublasLt as lt

TYPES: dict[str, tuple[int, Any]] = {"e4m3": (28, ml_dtypes.float8_e4m3fn), "e5m2": (29, ml_dtypes.float8_e5m2),
                                     "bf16": (14, ml_dtypes.bfloat16), "fp16": (2, np.float16),
                                     "fp32": (0, np.float32)}
MODES = {m.name: int(m) for m in lt.MatmulMatrixScale}
ATTR = lt.MatmulDescAttribute
rng = np.random.default_rng(7)


def _set(desc: int, attr: Any, value: Any) -> None:
    dtype = lt.get_matmul_desc_attribute_dtype(attr)
    array = np.array([value], dtype=dtype)
    lt.matmul_desc_set_attribute(desc, attr, array.ctypes.data, array.nbytes)


def encode(values: np.ndarray, kind: str) -> cupy.ndarray:
    return cupy.asarray(np.ascontiguousarray(values.astype(TYPES[kind][1])).view(np.uint8 if kind in ("e4m3", "e5m2")
                                                                               else np.uint16 if kind != "fp32"
                                                                               else np.float32))


def decode(buffer: cupy.ndarray, kind: str) -> np.ndarray:
    host = cupy.asnumpy(buffer)
    return host.view(TYPES[kind][1]).astype(np.float64)


class Lt:
    def __init__(self) -> None:
        self.handle = lt.create()
        self.workspace = cupy.empty(64 * 2**20, dtype=cupy.uint8)

    def plan(self, M: int, N: int, K: int, a: str, b: str, d: str, *, c: str | None = None, transa: str = "T",
             a_mode: str = "SCALAR_32F", b_mode: str = "SCALAR_32F", fast: int = 0, ptrs: dict[str, int],
             lda: int | None = None) -> tuple[Any, ...]:
        desc = lt.matmul_desc_create(int(cublas.ComputeType.COMPUTE_32F), 0)
        _set(desc, ATTR.TRANSA, int(cublas.Operation.T if transa == "T" else cublas.Operation.N))
        _set(desc, ATTR.TRANSB, int(cublas.Operation.N))
        _set(desc, ATTR.FAST_ACCUM, fast)
        if a in ("e4m3", "e5m2"):
            _set(desc, ATTR.A_SCALE_MODE, MODES[a_mode])
            _set(desc, ATTR.B_SCALE_MODE, MODES[b_mode])
        for name, attr in (("a", ATTR.A_SCALE_POINTER), ("b", ATTR.B_SCALE_POINTER), ("d", ATTR.D_SCALE_POINTER),
                           ("amax", ATTR.AMAX_D_POINTER)):
            if name in ptrs:
                _set(desc, attr, ptrs[name])
        rows_a, cols_a = (K, M) if transa == "T" else (M, K)
        la = lt.matrix_layout_create(TYPES[a][0], rows_a, cols_a, lda or rows_a)
        lb = lt.matrix_layout_create(TYPES[b][0], K, N, K)
        lc = lt.matrix_layout_create(TYPES[c or d][0], M, N, M)
        ld = lt.matrix_layout_create(TYPES[d][0], M, N, M)
        pref = lt.matmul_preference_create()
        limit = np.array([self.workspace.nbytes], dtype=np.uint64)
        lt.matmul_preference_set_attribute(pref, lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                                           limit.ctypes.data, limit.nbytes)
        results = lt.MatmulHeuristicResult(8)
        returned = np.zeros(1, dtype=np.int32)
        lt.matmul_algo_get_heuristic(self.handle, desc, la, lb, lc, ld, pref, 8, results.ptr, returned.ctypes.data)
        if int(returned[0]) == 0:
            raise RuntimeError("heuristic returned no algorithm")
        return desc, la, lb, lc, ld, results, int(returned[0])

    def run(self, plan: tuple[Any, ...], a_ptr: int, b_ptr: int, c_ptr: int, d_ptr: int, alpha: float = 1.0) -> None:
        desc, la, lb, lc, ld, results, _ = plan
        al = np.array([alpha], dtype=np.float32)
        be = np.zeros(1, dtype=np.float32)
        lt.matmul(self.handle, desc, al.ctypes.data, a_ptr, la, b_ptr, lb, be.ctypes.data, c_ptr, lc, d_ptr, ld,
                  results[0]["algo"].ctypes.data, self.workspace.data.ptr, self.workspace.nbytes,
                  cupy.cuda.get_current_stream().ptr)


def scale_count(mode: str, rows: int, cols: int) -> int:
    """rows×cols is the operand as op() sees it, rows = outer (M or N), cols = K."""
    kb = -(-cols // 128)
    return {"SCALAR_32F": 1, "OUTER_VEC_32F": rows, "VEC128_32F": (rows + 4) * kb,
            "BLK128x128_32F": (-(-rows // 128) + 4) * (kb + 4)}[mode]


def hypotheses(mode: str, flat: np.ndarray, rows: int, cols: int) -> dict[str, np.ndarray]:
    """Per hypothesis, the per-element scale as an (rows, KB) array over 128-blocks of K (outer-major by rows)."""
    kb = -(-cols // 128)
    if mode == "SCALAR_32F":
        return {"scalar": np.full((rows, kb), flat[0])}
    if mode == "OUTER_VEC_32F":
        return {"vector": np.repeat(flat[:rows, None], kb, axis=1)}
    if mode == "VEC128_32F":
        return {"outer-contiguous": flat[: rows * kb].reshape(kb, rows).T,
                "k-contiguous": flat[: rows * kb].reshape(rows, kb)}
    rb = -(-rows // 128)
    padded_k, padded_r = -(-kb // 4) * 4, -(-rb // 4) * 4
    per_block = {"outer-contiguous": flat[: rb * kb].reshape(kb, rb).T,
                 "k-contiguous": flat[: rb * kb].reshape(rb, kb),
                 "k-contiguous-ld4": flat[: rb * padded_k].reshape(rb, padded_k)[:, :kb],
                 "outer-contiguous-ld4": flat[: kb * padded_r].reshape(kb, padded_r)[:, :rb].T}
    return {name: np.repeat(blocks, 128, axis=0)[:rows] for name, blocks in per_block.items()}


def correctness(ltx: Lt, M: int, N: int, K: int, a: str, b: str, d: str, a_mode: str, b_mode: str, fast: int,
                c: str | None = None) -> dict[str, Any]:
    A = rng.uniform(-2, 2, size=(M, K)).astype(TYPES[a][1]).astype(np.float64)  # op(A) rows
    B = rng.uniform(-2, 2, size=(N, K)).astype(TYPES[b][1]).astype(np.float64)  # op(B) columns
    a_dev, b_dev = encode(A, a), encode(B, b)
    a_flat = (2.0 ** rng.integers(-3, 3, size=scale_count(a_mode, M, K)) * rng.uniform(0.6, 1.4, size=scale_count(a_mode, M, K))).astype(np.float32)
    b_flat = (2.0 ** rng.integers(-3, 3, size=scale_count(b_mode, N, K)) * rng.uniform(0.6, 1.4, size=scale_count(b_mode, N, K))).astype(np.float32)
    sa, sb = cupy.asarray(a_flat), cupy.asarray(b_flat)
    ptrs = {"a": sa.data.ptr, "b": sb.data.ptr}
    fp8_out = d in ("e4m3", "e5m2")
    d_scale = cupy.asarray(np.array([0.25], dtype=np.float32))
    amax = cupy.zeros(1, dtype=cupy.float32)
    if fp8_out:
        ptrs["d"] = d_scale.data.ptr
        ptrs["amax"] = amax.data.ptr
    out_np = {"e4m3": np.uint8, "e5m2": np.uint8, "bf16": np.uint16, "fp16": np.uint16, "fp32": np.float32}[d]
    out = cupy.zeros((N, M), dtype=out_np)
    c_buf = cupy.zeros((N, M), dtype=np.uint16 if (c or d) in ("bf16", "fp16") else out_np)
    plan = ltx.plan(M, N, K, a, b, d, c=c, a_mode=a_mode, b_mode=b_mode, fast=fast, ptrs=ptrs)
    ltx.run(plan, a_dev.data.ptr, b_dev.data.ptr, c_buf.data.ptr, out.data.ptr)
    cupy.cuda.get_current_stream().synchronize()
    got = decode(out, d)  # (N, M): D^T
    kb = -(-K // 128)
    partial = np.stack([B[:, i * 128:(i + 1) * 128] @ A[:, i * 128:(i + 1) * 128].T for i in range(kb)])  # kb,N,M
    partial_abs = np.stack([np.abs(B[:, i * 128:(i + 1) * 128]) @ np.abs(A[:, i * 128:(i + 1) * 128]).T
                            for i in range(kb)])
    report: dict[str, Any] = {"algos": plan[6]}
    for (ha, sa_arr), (hb, sb_arr) in itertools.product(hypotheses(a_mode, a_flat.astype(np.float64), M, K).items(),
                                                        hypotheses(b_mode, b_flat.astype(np.float64), N, K).items()):
        ref = np.einsum("knm,mk,nk->nm", partial, sa_arr, sb_arr)
        scale_mag = np.einsum("knm,mk,nk->nm", partial_abs, np.abs(sa_arr), np.abs(sb_arr))
        if fp8_out:
            ref = ref * 0.25
            scale_mag = scale_mag * 0.25
        err = np.abs(got - ref)
        rel = float(np.max(err / np.maximum(np.abs(ref), 1e-30)))
        report[f"A:{ha} B:{hb}"] = {"max_err_over_magnitude": float(np.max(err / scale_mag)), "max_rel": rel,
                                     "nan": int(np.isnan(got).sum())}
        if fp8_out:
            report["amax"] = float(amax.get()[0])
            report["amax_ref"] = float(np.max(np.abs(ref))) / 0.25
    return report


def timing(ltx: Lt, M: int, N: int, K: int, a: str, b: str, d: str, a_mode: str = "SCALAR_32F",
           b_mode: str = "SCALAR_32F", fast: int = 0, c: str | None = None) -> dict[str, Any]:
    a_dev = cupy.zeros((M, K), dtype=cupy.uint8 if a in ("e4m3", "e5m2") else cupy.uint16)
    b_dev = cupy.zeros((N, K), dtype=cupy.uint8 if b in ("e4m3", "e5m2") else cupy.uint16)
    a_dev[...] = 0x38 if a_dev.dtype == cupy.uint8 else 0x3F80
    b_dev[...] = 0x38 if b_dev.dtype == cupy.uint8 else 0x3F80
    sa = cupy.ones(max(scale_count(a_mode, M, K), 1), dtype=cupy.float32)
    sb = cupy.ones(max(scale_count(b_mode, N, K), 1), dtype=cupy.float32)
    ptrs = {"a": sa.data.ptr, "b": sb.data.ptr} if a in ("e4m3", "e5m2") else {}
    d_scale, amax = cupy.ones(1, dtype=cupy.float32), cupy.zeros(1, dtype=cupy.float32)
    if d in ("e4m3", "e5m2"):
        ptrs.update(d=d_scale.data.ptr, amax=amax.data.ptr)
    out = cupy.empty((N, M), dtype=cupy.uint8 if d in ("e4m3", "e5m2") else cupy.float32 if d == "fp32" else cupy.uint16)
    c_buf = cupy.empty((N, M), dtype=cupy.uint16) if d in ("e4m3", "e5m2") else out
    plan = ltx.plan(M, N, K, a, b, d, c=c, a_mode=a_mode, b_mode=b_mode, fast=fast, ptrs=ptrs)
    for _ in range(5):
        ltx.run(plan, a_dev.data.ptr, b_dev.data.ptr, c_buf.data.ptr, out.data.ptr)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    reps = 30
    start.record()
    for _ in range(reps):
        ltx.run(plan, a_dev.data.ptr, b_dev.data.ptr, c_buf.data.ptr, out.data.ptr)
    stop.record()
    stop.synchronize()
    ms = cupy.cuda.get_elapsed_time(start, stop) / reps
    return {"ms": ms, "tflops": 2 * M * N * K / ms / 1e9, "algos": plan[6]}


def attempt(results: dict[str, Any], key: str, fn: Any, *args: Any, **kwargs: Any) -> None:
    try:
        results[key] = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 — the probe records every refusal
        results[key] = {"refused": f"{type(exc).__name__}: {exc}"}
    print(key, json.dumps(results[key])[:400], flush=True)


def layouts() -> int:
    """The block scales' memory layout and the tokens rule, each hypothesis against float64."""
    ltx = Lt()
    out: dict[str, Any] = {}
    for shape in ((256, 384, 640), (384, 256, 1040), (272, 136, 1040), (48, 8, 64), (48, 16, 64)):
        for a_mode, b_mode in (("BLK128x128_32F", "VEC128_32F"), ("VEC128_32F", "VEC128_32F")):
            attempt(out, f"{shape} {a_mode}/{b_mode}", correctness, ltx, *shape, "e4m3", "e4m3", "bf16", a_mode,
                    b_mode, 0)
    for tokens in (4, 12, 20, 17, 1, 2):
        attempt(out, f"tokens {tokens} BLK/VEC128", correctness, ltx, 48, tokens, 64, "e4m3", "e4m3", "bf16",
                "BLK128x128_32F", "VEC128_32F", 0)
    path = os.path.join(os.environ.get("OUT", "/tmp"), "fp8_layouts.json")
    with open(path, "w") as handle:
        json.dump(out, handle, indent=1)
    return 0


def main() -> int:
    if sys.argv[1:] == ["layouts"]:
        return layouts()
    ltx = Lt()
    out: dict[str, Any] = {"cublaslt": int(lt.get_version()), "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    corr: dict[str, Any] = {}
    shapes = (256, 384, 640)  # M (weights' rows), N (tokens), K: no dimension equal, K = 5 blocks of 128
    M, N, K = shapes
    for d in ("bf16", "fp32", "fp16", "e4m3"):
        attempt(corr, f"e4m3xe4m3->{d} scalar", correctness, ltx, M, N, K, "e4m3", "e4m3", d, "SCALAR_32F", "SCALAR_32F", 0,
                c="bf16" if d == "e4m3" else None)
    attempt(corr, "e4m3xe4m3->bf16 scalar fast", correctness, ltx, M, N, K, "e4m3", "e4m3", "bf16", "SCALAR_32F", "SCALAR_32F", 1)
    for a, b in (("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2")):
        attempt(corr, f"{a}x{b}->bf16 scalar", correctness, ltx, M, N, K, a, b, "bf16", "SCALAR_32F", "SCALAR_32F", 0)
    attempt(corr, "e5m2xe4m3->e5m2 scalar", correctness, ltx, M, N, K, "e5m2", "e4m3", "e5m2", "SCALAR_32F", "SCALAR_32F", 0, c="bf16")
    for a_mode, b_mode in (("OUTER_VEC_32F", "OUTER_VEC_32F"), ("BLK128x128_32F", "VEC128_32F"),
                           ("VEC128_32F", "BLK128x128_32F"), ("VEC128_32F", "VEC128_32F"),
                           ("BLK128x128_32F", "BLK128x128_32F"), ("OUTER_VEC_32F", "SCALAR_32F")):
        for fast in (0, 1):
            attempt(corr, f"e4m3xe4m3->bf16 {a_mode}/{b_mode} fast{fast}", correctness, ltx, M, N, K, "e4m3", "e4m3",
                    "bf16", a_mode, b_mode, fast)
        attempt(corr, f"e4m3xe4m3->fp32 {a_mode}/{b_mode}", correctness, ltx, M, N, K, "e4m3", "e4m3", "fp32", a_mode, b_mode, 0)
        attempt(corr, f"e4m3xe4m3->e4m3 {a_mode}/{b_mode}", correctness, ltx, M, N, K, "e4m3", "e4m3", "e4m3", a_mode, b_mode, 0, c="bf16")
    # Irregular shapes: which dimension rules hold.
    for shape in ((256, 384, 65), (256, 384, 72), (256, 384, 80), (33, 17, 64), (40, 24, 64), (48, 17, 64),
                  (8, 8, 16), (1, 1, 16), (1, 128, 4096), (200, 300, 200), (256, 384, 200)):
        attempt(corr, f"shape {shape} scalar", correctness, ltx, *shape, "e4m3", "e4m3", "bf16", "SCALAR_32F", "SCALAR_32F", 0)
        attempt(corr, f"shape {shape} BLK/VEC128", correctness, ltx, *shape, "e4m3", "e4m3", "bf16", "BLK128x128_32F", "VEC128_32F", 0)
        attempt(corr, f"shape {shape} OUTER", correctness, ltx, *shape, "e4m3", "e4m3", "bf16", "OUTER_VEC_32F", "OUTER_VEC_32F", 0)
    try:
        dummy = cupy.zeros(1, dtype=cupy.float32)
        ltx.plan(64, 64, 64, "e4m3", "e4m3", "bf16", transa="N", ptrs={"a": dummy.data.ptr, "b": dummy.data.ptr})
        corr["transa N"] = {"accepted": True}
    except Exception as exc:  # noqa: BLE001
        corr["transa N"] = {"refused": f"{type(exc).__name__}: {exc}"}
    out["correctness"] = corr
    times: dict[str, Any] = {}
    for size in (4096, 8192):
        s = (size, size, size)
        attempt(times, f"{size} bf16 TN", timing, ltx, *s, "bf16", "bf16", "bf16")
        for fast in (0, 1):
            attempt(times, f"{size} e4m3 scalar bf16 fast{fast}", timing, ltx, *s, "e4m3", "e4m3", "bf16", fast=fast)
        attempt(times, f"{size} e5m2xe4m3 scalar bf16", timing, ltx, *s, "e5m2", "e4m3", "bf16")
        attempt(times, f"{size} e4m3 scalar fp32", timing, ltx, *s, "e4m3", "e4m3", "fp32")
        attempt(times, f"{size} e4m3 scalar e4m3", timing, ltx, *s, "e4m3", "e4m3", "e4m3", c="bf16")
        attempt(times, f"{size} e4m3 outer bf16", timing, ltx, *s, "e4m3", "e4m3", "bf16", "OUTER_VEC_32F", "OUTER_VEC_32F")
        attempt(times, f"{size} e4m3 blk/vec128 bf16", timing, ltx, *s, "e4m3", "e4m3", "bf16", "BLK128x128_32F", "VEC128_32F")
    # Llama-3-70B projections (M = output features, N = tokens, K = input features).
    for name, (m, k) in {"qkv": (10240, 8192), "o": (8192, 8192), "gate_up": (57344, 8192), "down": (8192, 28672)}.items():
        for tokens in (1, 128, 4096):
            attempt(times, f"llama {name} t{tokens} e4m3", timing, ltx, m, tokens, k, "e4m3", "e4m3", "bf16")
            attempt(times, f"llama {name} t{tokens} bf16", timing, ltx, m, tokens, k, "bf16", "bf16", "bf16")
    out["timing"] = times
    path = os.path.join(os.environ.get("OUT", "/tmp"), "fp8_probe.json")
    with open(path, "w") as handle:
        json.dump(out, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
