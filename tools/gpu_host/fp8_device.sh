#!/usr/bin/env bash
# The FP8 cases on a real GPU: the FP8 test module run twice (results for `baseline from-runs`), then its
# 8192³ E4M3 case traced by torch.profiler (tools/gpu_host/profiler_check.py) and compared with the suite's figure.
#
#   tools/gpu_host/fp8_device.sh OUT_DIR [pytest selection ...]
#
# The wheels in .whl/ (nvmath-python, cupti-python, ...) are installed into /tmp/site; the suite's plugin comes from
# the repository's conftest.py. Each step's output goes to OUT_DIR/fp8.log; the runs' results under OUT_DIR/run1,
# OUT_DIR/run2, the trace in OUT_DIR/profile.json.
set -uo pipefail

out=${1:?usage: tools/gpu_host/fp8_device.sh OUT_DIR [pytest selection ...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"
log_to "$out" fp8.log

step "install"
device_env "$root" || exit 1
cd "$root" || exit 1

for run in run1 run2; do
    step "perf_tests/test_fp8.py ($run)"
    python3 -m pytest perf_tests/test_fp8.py -p no:cacheprovider -q --results-dir "$out/$run" "$@"
    cp "$out/$run"/*/results.json "$out/$run.json"
done

step "independent trace of the E4M3 4096³ and 8192³ cases (torch.profiler)"
selection=(perf_tests/test_fp8.py -m perf -k "test_fp8_perf and (e4m3-8192x8192x8192 or e4m3-4096x4096x4096) and not e5m2")
python3 -m pytest "${selection[@]}" -p no:cacheprovider -q --results-dir "$out/traced"
cp "$out"/traced/*/results.json "$out/traced.json"
python3 tools/gpu_host/profiler_check.py trace --out "$out/profile.json" -- "${selection[@]}" -p no:cacheprovider -q
python3 tools/gpu_host/profiler_check.py compare "$out/traced.json" "$out/profile.json"
step "the same trace with a short warm-up (the suite's power state: the clock still falling)"
python3 tools/gpu_host/profiler_check.py trace --warmup 0.2 --trace 0.5 --out "$out/profile-short.json" -- "${selection[@]}" \
    -p no:cacheprovider -q
python3 tools/gpu_host/profiler_check.py compare "$out/traced.json" "$out/profile-short.json"
