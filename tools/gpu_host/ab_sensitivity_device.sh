#!/usr/bin/env bash
# The A/B gate's sensitivity on one GPU: on a copy of this tree made a git repository of one commit, the selection's
# baseline gate for scale, then `python -m gpuperf ab` with a genuine slowdown planted on the head side only
# (tools/gpu_host/slowdown.py: the same kernels on a longer reduction) at each fraction of PLANTS (default 0.01 0.02 0.05).
# tools/evidence/sensitivity_table.py makes evidence/ab.md's table from the ab.json files.
#
#   PLANTS="0.01 0.02 0.05" tools/gpu_host/ab_sensitivity_device.sh OUT_DIR [pytest selection ...]
#   (the selection defaults to perf_tests -m perf)
#
# Leaves in OUT_DIR: sensitivity.log (every step, with each run's wall time), gate.json (the gate's results.json) and
# sens-<plant>.json (each planted run's ab.json). Needs the wheels of .whl/.
set -uo pipefail
out=${1:?usage: tools/gpu_host/ab_sensitivity_device.sh OUT_DIR [pytest selection ...]}
shift
[ $# -gt 0 ] || set -- perf_tests -m perf
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"
log_to "$out" sensitivity.log

step "install"
device_env "$root" || exit 1
source "$root/tools/gpu_host/scratch_repo.sh"
scratch_repo ab-sensitivity && scratch_commit "the tree" || exit 1

step "the baseline gate of the selection, for scale"
start=$(date +%s)
python3 -m pytest --gate -p no:cacheprovider -q --history none --results-dir "$out/g" "$@" | tail -3
echo "gate wall $(( $(date +%s) - start )) s"
cp "$out"/g/*/results.json "$out/gate.json" && rm -rf "$out/g"

for plant in ${PLANTS:-0.01 0.02 0.05}; do
    step "A/B: a genuine ${plant} slowdown on the head side"
    start=$(date +%s)
    python3 -m gpuperf ab --base HEAD --head HEAD --head-env "GPUPERF_SLOWDOWN=$plant" --out "$out/sens" -- "$@" \
        -p tools.gpu_host.slowdown | tail -15
    echo "ab exit ${PIPESTATUS[0]}, wall $(( $(date +%s) - start )) s"
    cp "$out/sens/ab.json" "$out/sens-$plant.json" && rm -rf "$out/sens"
done
python3 tools/evidence/sensitivity_table.py "$out"/sens-*.json
step "done"
