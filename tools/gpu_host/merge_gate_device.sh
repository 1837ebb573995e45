#!/usr/bin/env bash
# One fresh GPU's evidence for the two gates CI runs: the full default `--gate` against the committed baseline,
# timed as CI runs it (its tests' durations kept), then `python -m gpuperf ab` A/A over the same default selection
# (the same commit on both sides, on a copy of this tree made a git repository of one commit), timed in the same
# call, so its cost is read against that gate's; then, for each fraction of PLANTS (none by default), an A/B run with
# a genuine slowdown planted on the head side only (tools/gpu_host/slowdown.py), for evidence/ab.md's sensitivity table
# (tools/evidence/sensitivity_table.py OUT_DIR/sens-*.json); with GEMV=1, last, `pytest perf_tests -k gemv` timed; with
# SHIFTED=1, after the gate, the gate against a shifted copy of the baseline (tools/gpu_host/shifted_baseline.py: half the
# entries read 5 % slow, which must all be caught, the rest 3 % fast, which must raise no alarm).
#
#   PLANTS="0.05 0.02" GEMV=1 SHIFTED=1 tools/gpu_host/merge_gate_device.sh [OUT_DIR]          # OUT_DIR defaults to $OUT
#
# Leaves in OUT_DIR: merge-gate.log (every step, pytest's and the wall clock's times), gate.json (the gate's
# results.json), durations.txt (its tests' durations over 0.05 s), aa.json (the A/A run's ab.json) and
# aa-base.log.gz / aa-head.log.gz (its sides' pytest logs), sens-<F>.json (each planted run's ab.json),
# shifted.json and shifted-judged.txt (with SHIFTED=1).
# Needs the wheels of .whl/.
set -uo pipefail

out=${1:-${OUT:?usage: tools/gpu_host/merge_gate_device.sh OUT_DIR (or set OUT)}}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"
log_to "$out" merge-gate.log
export PYTHONUNBUFFERED=1
work=$(mktemp -d)

step "install"
device_env "$root" || exit 1
cd "$root" || exit 1

step "the full default --gate against baselines/, timed"
timed_gate "$out" "$work"

if [ "${SHIFTED:-0}" = 1 ]; then
    step "the gate against a shifted copy of the baseline (5 % slow / 3 % fast)"
    shifted_gate "$out" "$work"
fi

source "$root/tools/gpu_host/scratch_repo.sh"
scratch_repo merge-gate && scratch_commit "the tree" || exit 1

step "A/A over the same selection: the same commit on both sides, timed"
start=$(date +%s.%N)
python3 -m gpuperf ab --base HEAD --head HEAD --out "$work/aa" -- perf_tests > "$work/aa.out" 2>&1
rc=$?
tail -25 "$work/aa.out"
echo "A/A: exit $rc wall=$(seconds "$start") s"
cp "$work/aa/ab.json" "$out/aa.json" || echo "no ab.json from the A/A run"
for side in base head; do gzip -c "$work/aa/$side/pytest.log" > "$out/aa-$side.log.gz" 2>/dev/null; done

for plant in ${PLANTS:-}; do
    step "A/B: a genuine ${plant} slowdown on the head side, timed"
    start=$(date +%s.%N)
    python3 -m gpuperf ab --base HEAD --head HEAD --head-env "GPUPERF_SLOWDOWN=$plant" --out "$work/sens-$plant" \
        -- perf_tests -p tools.gpu_host.slowdown > "$work/sens.out" 2>&1
    rc=$?
    tail -12 "$work/sens.out"
    echo "planted $plant: exit $rc wall=$(seconds "$start") s"
    cp "$work/sens-$plant/ab.json" "$out/sens-$plant.json" || echo "no ab.json from the $plant run"
done
if [ "${GEMV:-0}" = 1 ]; then
    step "pytest perf_tests -k gemv, timed"
    cd "$root" || exit 1
    start=$(date +%s.%N)
    python3 -m pytest perf_tests -k gemv -p no:cacheprovider -q --history none --results-dir "$work/gemv" 2>&1 \
        | tail -2
    echo "-k gemv: rc=${PIPESTATUS[0]} wall=$(seconds "$start") s"
fi
rm -rf "$work"
step "done"
