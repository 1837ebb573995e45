#!/usr/bin/env bash
# On one fresh GPU that did not record the baseline: the full default `--gate` against the committed baseline,
# timed as CI runs it; with SHIFTED=1, the gate's sensitivity against a shifted copy of that baseline
# (tools/gpu_host/shifted_baseline.py: half the entries read 5 % slow, which must all be caught, the rest 3 % fast, which
# must raise no alarm; a miss its entry's resolution stated is no failure); with SECOND=1, a second gate process
# (gate-2.json); with PLACEMENT=N, the Llama-3-70B decode projections gated in N fresh processes (each
# process's buffers land elsewhere: a slow placement must be cleared by the confirmation on relocated operands);
# then `pytest perf_tests -k gemv`, timed as a user runs it; with SYMBOLS=1, the cuBLAS kernel symbols gathered
# beside them (tools/gpu_host/kernel_symbols.py --match cublas, a CPU job at low priority, for tests/test_kernel_names.py).
#
#   tools/gpu_host/validation_device.sh [OUT_DIR]          # OUT_DIR defaults to $OUT
#
# Leaves in OUT_DIR: validation.log (every step, pytest's and the wall clock's times), gate.json (the gate's
# results.json), durations.txt (its tests' durations over 0.05 s), shifted.json and shifted-judged.txt (with
# SHIFTED=1), gate-2.json (with SECOND=1), gemv.json, cublas-symbols.tsv.gz (with SYMBOLS=1). Needs the wheels of .whl/.
set -uo pipefail

out=${1:-${OUT:?usage: tools/gpu_host/validation_device.sh OUT_DIR (or set OUT)}}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"
log_to "$out" validation.log
export PYTHONUNBUFFERED=1
scratch=$(mktemp -d)
pytest_q=(-p no:cacheprovider -q --history none)
keep() { cp "$scratch/$1"/*/results.json "$out/$2.json" 2>/dev/null || echo "no results.json from $1"; }

step "install"
device_env "$root" || exit 1
cd "$root" || exit 1
if [ "${SYMBOLS:-0}" = 1 ]; then
    nice -n 19 python3 tools/gpu_host/kernel_symbols.py --match cublas --timeout 150 --out "$scratch/cublas.tsv" \
        > "$scratch/symbols.log" 2>&1 &
    symbols=$!
fi

step "the full default --gate against baselines/, timed"
timed_gate "$out" "$scratch"

if [ "${SHIFTED:-0}" = 1 ]; then
    step "the gate against a shifted copy of the baseline (5 % slow / 3 % fast)"
    shifted_gate "$out" "$scratch"
fi

if [ "${SECOND:-0}" = 1 ]; then
    step "a second gate process on the same GPU, timed"
    mkdir -p "$scratch/second" && timed_gate "$scratch/second" "$scratch/second"
    cp "$scratch/second/gate.json" "$out/gate-2.json" 2>/dev/null || echo "no results.json from the second gate"
fi

if [ "${PLACEMENT:-0}" -gt 0 ]; then
    step "the decode projections in $PLACEMENT fresh processes (each its own placement), gated"
    for i in $(seq "$PLACEMENT"); do
        python3 -m pytest perf_tests -k "test_fp8_projection and t1" --gate "${pytest_q[@]}" \
            --results-dir "$scratch/placement-$i" > "$scratch/placement-$i.txt" 2>&1
        echo "process $i: rc=$? $(tail -1 "$scratch/placement-$i.txt")"
        python3 -c "import json, sys; [print(f\"  {r['case_id'].split('[')[1][:-1]} {r['median_s'] * 1e6:.1f} us \
{r['status']} {r['note'][:160]}\") for r in json.load(open(sys.argv[1]))['records']]" \
            "$scratch"/placement-$i/*/results.json
    done
fi

step "pytest perf_tests -k gemv, timed"
start=$(date +%s.%N)
python3 -m pytest perf_tests -k gemv "${pytest_q[@]}" --results-dir "$scratch/gemv" 2>&1 | tail -3
echo "-k gemv: rc=${PIPESTATUS[0]} wall=$(seconds "$start") s"
keep gemv gemv
if [ -n "${symbols:-}" ]; then
    step "cuBLAS symbols"
    wait "$symbols"
    cat "$scratch/symbols.log"
    gzip -c "$scratch/cublas.tsv" > "$out/cublas-symbols.tsv.gz" 2>/dev/null
fi
rm -rf "$scratch"
step "done"
