"""Why the framework example's ``torch.compile``d GELU compiles to other code on a fresh machine.

Each scenario runs in a process of its own with empty Inductor and Triton caches (a fresh machine), calls the
compiled ``gelu(x + bias) * scale`` at the sizes the example's tests call it with, in their order, then times the
perf size (CUDA events, median of 50 calls after 10; 384 MiB moved, several times the L2) and reports the
configuration Inductor's autotuner chose (the ``*.best_config`` files it leaves in its cache):

- ``dynamic-correctness-first``: ``dynamic=True`` and the correctness sizes (1, 4099) first, as the example ran;
- ``dynamic-perf-first``: ``dynamic=True``, the perf size first (``-k perf``);
- ``static``: ``dynamic=False`` and the correctness sizes first (what the example does now).

    python3 tools/gpu_host/gelu_compile_probe.py [--repeat N]      # one JSON line per scenario run, then a table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PERF_N = 67108864
CORRECTNESS_N = (1, 4099)
SCENARIOS = {
    "dynamic-correctness-first": (True, (*CORRECTNESS_N, PERF_N)),
    "dynamic-perf-first": (True, (PERF_N,)),
    "static": (False, (*CORRECTNESS_N, PERF_N)),
}


def one(dynamic: bool, sizes: tuple[int, ...]) -> dict[str, object]:
    import torch
    import torch.nn.functional as F

    def gelu_bias_scale(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
        return F.gelu(x + bias, approximate="tanh") * scale

    fused = torch.compile(gelu_bias_scale, dynamic=dynamic)
    for n in sizes:
        x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        fused(x, bias, 1.7)
    torch.cuda.synchronize()
    for _ in range(10):
        fused(x, bias, 1.7)
    times = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fused(x, bias, 1.7)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    seconds = sorted(times)[len(times) // 2]
    cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    configs = sorted({path.read_text().strip() for path in cache.rglob("*.best_config")})
    return {"median_us": round(seconds * 1e6, 2), "gbps": round(3 * 2 * PERF_N / seconds / 1e9, 1),
            "best_configs": configs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each scenario (default 3)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        dynamic, sizes = SCENARIOS[args.child]
        print(json.dumps(one(dynamic, sizes)))
        return 0
    rows = []
    for name in SCENARIOS:
        for run in range(args.repeat):
            with tempfile.TemporaryDirectory() as inductor, tempfile.TemporaryDirectory() as triton:
                env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": inductor, "TRITON_CACHE_DIR": triton}
                out = subprocess.run([sys.executable, __file__, "--child", name], env=env, capture_output=True,
                                     text=True, check=False, timeout=300)
            if out.returncode != 0:
                print(f"{name} run {run}: failed: {out.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            result = {"scenario": name, "run": run, **json.loads(out.stdout.strip().splitlines()[-1])}
            print(json.dumps(result), flush=True)
            rows.append(result)
    print("\n| scenario | run | µs | GB/s | Inductor's chosen config |\n| --- | ---: | ---: | ---: | --- |")
    for row in rows:
        print(f"| {row['scenario']} | {row['run']} | {row['median_us']} | {row['gbps']} | "
              f"{'; '.join(row['best_configs'])} |")  # type: ignore[arg-type]
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
