#!/usr/bin/env bash
# Issue 15 mma device run (H200): tools/custom_probe3.py checks every MMA_FAST build of mma_hgemm.cu (MMA_CONFIGS
# entries named ...-fast; the default as a control) against float64 on fresh random data, then times mma.sync FP16
# 4096^3 for the default, the new builds' non-fast twins and every -fast build against cuBLAS in the same run
# (PROBE_ROUNDS rounds, default 5). From the repo root:  OUT=/path/to/out bash tools/custom_probe3.sh
# Writes $OUT/custom_probe3.log and $OUT/custom_probe3.json; at most 70 s (no round starts after PROBE_BUDGET_S,
# a failing build is recorded with its error and the probe goes on).
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
start=$SECONDS
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>&1 | head -2
PROBE_BUDGET_S=${PROBE_BUDGET_S:-50} timeout 70 python3 tools/custom_probe3.py "$OUT" 2>&1 | \
  tee "$OUT/custom_probe3.log" | grep -vE "^\s*$" | cut -c1-300
echo "probe3: rc=${PIPESTATUS[0]}, total $((SECONDS - start)) s"
