#!/usr/bin/env bash
# The A/B gate on a real GPU, on a copy of this tree made a git repository of its own (one commit): the baseline
# gate of a selection for scale, then `python -m gpuperf ab` A/A (the same commit on both sides) and with a genuine
# slowdown planted on the head side only (tools/gpu_host/slowdown.py: the same kernels on longer reductions). With
# KERNEL_CHANGE=1, last, a commit that changes a custom kernel's source (the tiled SGEMM's inner loop no longer
# unrolled: slower, the same results) against the one before it, on the tiled kernel's perf cases.
#
#   tools/gpu_host/ab_demo.sh OUT_DIR SLOWDOWN [pytest selection ...]      e.g. tools/gpu_host/ab_demo.sh out 0.02 perf_tests/test_gemv.py -m perf
#
# Writes OUT_DIR/ab.log (every step's output), OUT_DIR/gate.json, OUT_DIR/aa.json, OUT_DIR/slow.json and
# OUT_DIR/kernel.json (ab.json of each A/B run).
set -uo pipefail
out=${1:?usage: tools/gpu_host/ab_demo.sh OUT_DIR SLOWDOWN [pytest selection ...]}
slowdown=${2:?usage: tools/gpu_host/ab_demo.sh OUT_DIR SLOWDOWN [pytest selection ...]}
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"
log_to "$out" ab.log

step "install"
device_env "$root" || exit 1
source "$root/tools/gpu_host/scratch_repo.sh"
scratch_repo ab && scratch_commit "the tree" || exit 1

step "the baseline gate of the selection, for scale"
start=$(date +%s)
python3 -m pytest --gate -p no:cacheprovider -q --results-dir "$out/g" "$@" | tail -3
echo "gate wall $(( $(date +%s) - start )) s"
cp "$out"/g/*/results.json "$out/gate.json" && rm -rf "$out/g"

step "A/A: the same commit on both sides"
python3 -m gpuperf ab --base HEAD --head HEAD --out "$out/aa" -- "$@"
echo "ab exit $?"
cp "$out/aa/ab.json" "$out/aa.json"

step "A/B: a genuine ${slowdown} slowdown on the head side"
python3 -m gpuperf ab --base HEAD --head HEAD --head-env "GPUPERF_SLOWDOWN=$slowdown" --out "$out/slow" -- "$@" \
    -p tools.gpu_host.slowdown
echo "ab exit $?"
cp "$out/slow/ab.json" "$out/slow.json"
rm -rf "$out/aa" "$out/slow"

if [ "${KERNEL_CHANGE:-0}" = 1 ]; then
    step "A/B: a custom kernel's source changed on the head commit"
    sed -i 's/^#pragma unroll$/#pragma unroll 1/' kernels/cuda/tiled_sgemm.cu
    git -c user.name=ab -c user.email=ab@invalid commit -qam "tiled_sgemm: the inner loop not unrolled" || exit 1
    python3 -m gpuperf ab --base HEAD~1 --head HEAD --out "$out/kernel" -- perf_tests/test_custom.py -m perf -k tiled
    echo "ab exit $?"
    cp "$out/kernel/ab.json" "$out/kernel.json" && rm -rf "$out/kernel"
fi
