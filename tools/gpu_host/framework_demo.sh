#!/usr/bin/env bash
# The framework-kernels example on a real GPU, as a user of the installed plugin runs it, checked against an
# independent torch.profiler trace; and the measuring stream's check shown on the misuses.
#
#   tools/gpu_host/framework_demo.sh record OUT_DIR   on a first GPU: record the example's baseline, trace it, show the
#                                            misuses and the main suite's launch-check triggers (and, with
#                                            MAIN_GATE=1, run the full default --gate of the main suite)
#   tools/gpu_host/framework_demo.sh gate OUT_DIR     on another GPU, with the recorded baseline in place: the example gated,
#                                            then traced
#
# gpuperf is installed (no extras: the device image has CuPy, PyTorch and Triton) beside the wheels in .whl/ into
# /tmp/site, so the example loads the plugin through its pytest11 entry point, with no conftest. Each step's output
# goes to OUT_DIR/demo.log; results.json of the example run, the profile and (record) the baseline the run wrote
# are copied into OUT_DIR, and the comparison table is printed last.
set -uo pipefail

mode=${1:?usage: tools/gpu_host/framework_demo.sh record|gate OUT_DIR}
out=${2:?usage: tools/gpu_host/framework_demo.sh record|gate OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
log=$out/demo.log
exec > >(tee -a "$log") 2>&1

step() { echo; echo "== $* ($(date -u +%T))"; }

step "install"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$root"/.whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site "$root" \
    || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "import torch, triton, cupy; print('torch', torch.__version__, 'triton', triton.__version__, 'cupy', cupy.__version__)"

example=$root/examples/framework-kernels
cd "$example" || exit 1
rm -rf results
if [ "$mode" = record ]; then
    step "the example, recorded (--update-baselines)"
    python3 -m pytest -p no:cacheprovider --update-baselines --results-dir results
    echo "exit $?"
    cp baselines/nvidia-h200.yaml "$out/" || true
else
    step "the example, gated against the baseline recorded on another GPU"
    python3 -m pytest -p no:cacheprovider --gate --results-dir results
    echo "exit $?"
fi
cp results/*/results.json "$out/example-results.json"

step "the same calls under torch.profiler (a process of its own)"
python3 "$root/tools/gpu_host/profiler_check.py" trace --out "$out/profile.json" -- -q
python3 "$root/tools/gpu_host/profiler_check.py" compare "$out/example-results.json" "$out/profile.json" \
    | tee "$out/profiler-check.md"
echo "exit ${PIPESTATUS[0]}"

if [ "$mode" = record ]; then
    step "misuse: a side stream the test creates, a call with no kernel (each must be ERROR, rc 1)"
    python3 -m pytest -p no:cacheprovider misuse --results-dir none -q
    echo "exit $?"
    cd "$root" || exit 1
    step "the main suite's launch-check triggers"
    python3 -m pytest -p no:cacheprovider perf_tests/test_launch_checks.py -m trigger -q --results-dir none
    echo "exit $?"
fi
if [ "${MAIN_GATE:-0}" = 1 ]; then
    cd "$root" || exit 1
    step "the main suite's full default gate"
    python3 -m pytest -p no:cacheprovider perf_tests --gate -q --results-dir results --durations=5 | tail -40
    echo "exit ${PIPESTATUS[0]}"
    cp results/*/results.json "$out/gate-results.json" || true
fi
step "done"
