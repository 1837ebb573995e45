#!/usr/bin/env bash
# A GPU host with only a driver, stood in for on a host that has a CUDA toolkit: every CUDA library the suite loads
# must come from a wheel. The interpreter's own site packages hold the CUDA wheels (nvidia-cublas, nvidia-cuda-nvrtc,
# nvidia-cuda-cupti, ...), the carried wheels of .whl/ add the rest; every toolkit folder is taken off PATH,
# LD_LIBRARY_PATH, CUDA_PATH and CUDA_HOME and, where a mount namespace can be made, hidden behind an empty folder.
# Then `pytest perf_tests -k gemv` and the full default `--gate`, each writing where every CUDA library it mapped came
# from (tools/gpu_host/loaded_libraries.py), and the dry run beside the real run on examples/own-kernels with the
# planted mistakes (tools/gpu_host/dry_run_parity.py).
#
#   tools/gpu_host/driver_only_device.sh [OUT_DIR]          # OUT_DIR defaults to $OUT
#
# Leaves in OUT_DIR: driver-only.log (every step), libraries-gemv.tsv and libraries-gate.tsv (library, path, source:
# wheel, driver or toolkit), gate.json, dry-run-parity.md and .json. Needs the wheels of .whl/.
set -uo pipefail

out=${1:-${OUT:?usage: tools/gpu_host/driver_only_device.sh OUT_DIR (or set OUT)}}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"

if [ -z "${GPUPERF_TOOLKIT_HIDDEN:-}" ] && command -v unshare >/dev/null; then
    # Again inside a mount namespace of its own, each toolkit folder covered by an empty tmpfs there only.
    toolkits=$(ls -d /usr/local/cuda* /opt/cuda* 2>/dev/null | tr '\n' ' ')
    if unshare --mount --propagation private true 2>/dev/null; then
        exec unshare --mount --propagation private env GPUPERF_TOOLKIT_HIDDEN="$toolkits" bash -c \
            'for dir in $GPUPERF_TOOLKIT_HIDDEN; do mount -t tmpfs none "$dir"; done; exec bash "$0" "$@"' "$0" "$out"
    fi
fi
log_to "$out" driver-only.log
export PYTHONUNBUFFERED=1
scratch=$(mktemp -d)

step "install"
device_env "$root" || exit 1
cd "$root" || exit 1
echo "toolkit folders hidden behind an empty tmpfs: ${GPUPERF_TOOLKIT_HIDDEN:-none (no mount namespace)}"
unset CUDA_PATH CUDA_HOME CUDA_ROOT
without_cuda() { tr ':' '\n' | grep -v -i cuda | paste -sd: -; }
PATH=$(printf %s "$PATH" | without_cuda); LD_LIBRARY_PATH=$(printf %s "${LD_LIBRARY_PATH:-}" | without_cuda)
export PATH LD_LIBRARY_PATH
echo "PATH=$PATH"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ls /usr/local/cuda*/lib64 2>/dev/null | head -3 || true

libraries() {
    echo "CUDA libraries mapped ($1):"; cat "$out/libraries-$1.tsv"
    if grep -q $'\ttoolkit$' "$out/libraries-$1.tsv"; then echo "$1: a library came from a toolkit"; fi
}

step "pytest perf_tests -k gemv, timed"
start=$(date +%s.%N)
GPUPERF_LOADED_LIBRARIES="$out/libraries-gemv.tsv" python3 -m pytest perf_tests -k gemv -p no:cacheprovider -q \
    --history none --results-dir "$scratch/gemv" -p tools.gpu_host.loaded_libraries 2>&1 | tail -3
echo "-k gemv: rc=${PIPESTATUS[0]} wall=$(seconds "$start") s"
libraries gemv

step "the full default --gate, timed"
start=$(date +%s.%N)
GPUPERF_LOADED_LIBRARIES="$out/libraries-gate.tsv" python3 -m pytest perf_tests --gate -p no:cacheprovider -q \
    --history none --results-dir "$scratch/gate" -p tools.gpu_host.loaded_libraries > "$scratch/gate.out" 2>&1
rc=$?
grep -v '^perf_tests/.* PASS ' "$scratch/gate.out" | tail -30
echo "gate: rc=$rc wall=$(seconds "$start") s"
cp "$scratch"/gate/*/results.json "$out/gate.json" 2>/dev/null || echo "no results.json from the gate"
libraries gate

step "the dry run beside the real run: examples/own-kernels, planted mistakes"
python3 tools/gpu_host/dry_run_parity.py "$out"
echo "parity: rc=$?"
rm -rf "$scratch"
step "done"
