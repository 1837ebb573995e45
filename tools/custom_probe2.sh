#!/usr/bin/env bash
# Issue 15 third device run (H200; probe 2's script, file names and output format): tools/custom_probe2.py checks
# every THIRD-ROUND SGEMM build (BK = 8 builds, warp_sgemm.cu's -ak / -fast / -pipe / -sw<G> options; their batched
# tiled kernels) against float64 on fresh random data, then times SGEMM 4096^3 and batched 1024x256^3 for the
# defaults, the best second-round builds and every third-round build, and the mma 4096^3 default, against cuBLAS in
# the same run. From the repo root:  OUT=/path/to/out bash tools/custom_probe2.sh
# Writes $OUT/custom_probe2.log and $OUT/custom_probe2.json; at most 100 s (no build starts after PROBE_BUDGET_S,
# a failing build is recorded with its error and the probe goes on).
# tools/custom_probe3.sh runs probe 3 through this script: its arguments are the probe's number and time limit.
set -u
probe=${1:-2}
limit=${2:-98}
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
start=$SECONDS
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>&1 | head -2
PROBE_BUDGET_S=${PROBE_BUDGET_S:-86} timeout "$limit" python3 "tools/custom_probe$probe.py" "$OUT" 2>&1 | \
  tee "$OUT/custom_probe$probe.log" | grep -vE "^\s*$" | cut -c1-300
echo "probe$probe: rc=${PIPESTATUS[0]}, total $((SECONDS - start)) s"
