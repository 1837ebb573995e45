#!/usr/bin/env bash
# On one fresh GPU, what a short lease can show: the full default `--gate` timed as CI runs it (pytest's own time, the
# wall clock, --durations=25) under the stopping rule, then `pytest perf_tests -k gemv` timed as a user runs it;
# with SYMBOLS=1, the cuBLAS kernel symbols gathered beside them (tools/kernel_symbols.py --match cublas, a CPU job
# at low priority). Everything under OUT: gate.log, gate.json, gemv.json, cublas-symbols.tsv.gz.
#
#   tools/gate_time_device.sh OUT [GATE_LIMIT_S]
set -uo pipefail
out=${1:?usage: tools/gate_time_device.sh OUT [GATE_LIMIT_S]}
limit=${2:-240}
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/tools/device_env.sh"
log_to "$out" gate.log
export PYTHONUNBUFFERED=1
scratch=$(mktemp -d)

step "install"
device_env "$root" || exit 1
cd "$root" || exit 1
if [ "${SYMBOLS:-0}" = 1 ]; then
    nice -n 19 python3 tools/kernel_symbols.py --match cublas --timeout 150 --out "$scratch/cublas.tsv" \
        > "$scratch/symbols.log" 2>&1 &
    symbols=$!
fi

step "the full default --gate, timed (stopped by SIGINT after $limit s)"
start=$(date +%s.%N)
timeout -s INT "$limit" python3 -m pytest perf_tests --gate -p no:cacheprovider -q --durations=25 \
    --history none --results-dir "$scratch/gate" 2>&1 | tail -60
echo "gate: rc=${PIPESTATUS[0]} wall=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
cp "$scratch"/gate/*/results.json "$out/gate.json" 2>/dev/null || echo "no results.json from the gate"

step "pytest perf_tests -k gemv, timed"
start=$(date +%s.%N)
python3 -m pytest perf_tests -k gemv -p no:cacheprovider -q --history none --results-dir "$scratch/gemv" 2>&1 | tail -4
echo "-k gemv: rc=${PIPESTATUS[0]} wall=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
cp "$scratch"/gemv/*/results.json "$out/gemv.json" 2>/dev/null || echo "no results.json from -k gemv"

if [ -n "${symbols:-}" ]; then
    step "cuBLAS symbols"
    wait "$symbols"
    cat "$scratch/symbols.log"
    gzip -c "$scratch/cublas.tsv" > "$out/cublas-symbols.tsv.gz" 2>/dev/null
fi
step "done"
