#!/usr/bin/env bash
# Issue 15 device run (H200): the custom kernels' correctness tests, then tools/custom_probe.py, which times
# every kernel variant against cuBLAS on the issue's table (custom TFLOPS, cuBLAS TFLOPS, ratio, resources).
# From the repo root:  OUT=/path/to/out bash tools/custom_probe.sh
# Writes $OUT/custom_correct.log, $OUT/custom_probe.log and $OUT/custom_probe.json; about 100 s in all.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
start=$SECONDS
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader 2>&1 | head -2

# (a) correctness: every custom kernel and path against float64 on fresh random data (irregular shapes,
# padded / odd leading dimensions, alpha/beta, NaN-poisoned C, pointer arrays, batch 1 and > 65535).
timeout 60 python3 -m pytest perf_tests/test_custom.py -m correctness -q -p no:cacheprovider -rfEs \
  > "$OUT/custom_correct.log" 2>&1
echo "correctness: rc=$? in $((SECONDS - start)) s: $(tail -1 "$OUT/custom_correct.log")"
grep -E "^(FAILED|ERROR)" "$OUT/custom_correct.log" | cut -c1-200 | head -20

# (b) timing: within the rest of 118 s; no variant starts in the last 12 s (PROBE_BUDGET_S), and a failing
# variant is recorded in the JSON with its error while the probe goes on.
left=$((118 - (SECONDS - start)))
left=$((left > 30 ? left : 30))
PROBE_BUDGET_S=$((left - 12)) timeout "$left" python3 tools/custom_probe.py "$OUT" 2>&1 | \
  tee "$OUT/custom_probe.log" | grep -vE "^\s*$" | cut -c1-260
echo "probe: rc=${PIPESTATUS[0]}, total $((SECONDS - start)) s"
