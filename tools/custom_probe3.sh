#!/usr/bin/env bash
# Issue 15 mma device run (H200): tools/custom_probe3.py checks every MMA_FAST build of mma_hgemm.cu (MMA_CONFIGS
# entries named ...-fast; the default as a control) against float64 on fresh random data, then times mma.sync FP16
# 4096^3 for the default, the new builds' non-fast twins and every -fast build against cuBLAS in the same run
# (PROBE_ROUNDS rounds, default 5). From the repo root:  OUT=/path/to/out bash tools/custom_probe3.sh
# Writes $OUT/custom_probe3.log and $OUT/custom_probe3.json; at most 70 s (no round starts after PROBE_BUDGET_S,
# a failing build is recorded with its error and the probe goes on).
# Runs as tools/custom_probe2.sh runs probe 2 (the same preamble, log filter and rc line), with probe 3's limits.
PROBE_BUDGET_S=${PROBE_BUDGET_S:-50} exec bash "$(dirname "$0")/custom_probe2.sh" 3 70
