#!/usr/bin/env bash
# One session on a fresh H200: the full default --gate (results and durations kept), the FP8 selection's
# collection, and the FP8 4096³/8192³ cases traced by torch.profiler with the suite's own flush size (2 × L2).
set -uo pipefail
out=${1:?usage: tools/gpu_host/h200_gate_session.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
source "$root/tools/gpu_host/device_env.sh"
device_env "$root" > "$out/gpu.txt" || exit 1
python3 -m pytest perf_tests -m gemm -k fp8 --collect-only -q -p no:cacheprovider 2>&1 | tail -2 > "$out/collect.txt"
start=$(date +%s)
python3 -m pytest perf_tests --gate -p no:cacheprovider --results-dir "$out/g" --durations=40 > "$out/gate.log" 2>&1
echo "gate rc=$? wall=$(( $(date +%s) - start )) s" >> "$out/gate.log"
cp "$out"/g/*/results.json "$out/gate.json" && cp "$out"/g/*/summary.md "$out/gate-summary.md" && rm -rf "$out/g"
selection=(perf_tests/test_fp8.py -m perf -k "test_fp8_perf and (e4m3-8192x8192x8192 or e4m3-4096x4096x4096) and not e5m2")
flush=$(python3 -c "import torch; print(2 * torch.cuda.get_device_properties(0).L2_cache_size // 2**20)")
python3 -m pytest "${selection[@]}" -p no:cacheprovider -q --results-dir "$out/t" > "$out/traced.log" 2>&1
cp "$out"/t/*/results.json "$out/traced.json" && rm -rf "$out/t"
python3 tools/gpu_host/profiler_check.py trace --flush-mib "$flush" --out "$out/profile-l2.json" -- "${selection[@]}" \
    -p no:cacheprovider -q > "$out/trace.log" 2>&1
python3 tools/gpu_host/profiler_check.py compare "$out/traced.json" "$out/profile-l2.json" > "$out/compare-l2.md"
