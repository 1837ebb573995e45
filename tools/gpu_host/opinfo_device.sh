#!/usr/bin/env bash
# The OpInfo sweep and the framework example on a GPU, each mode one call on a GPU machine; everything goes
# under OUT.
#
#   tools/gpu_host/opinfo_device.sh record OUT   fresh GPU: the framework example recorded (--update-baselines) before anything
#                                        else compiles there, the GELU compile probe, the kernel-symbol corpus
#   tools/gpu_host/opinfo_device.sh sweep OUT    the OpInfo sweep (tools/gpu_host/opinfo_project; stopped by SIGINT after 480 s, so
#                                        its files are still written)
#   tools/gpu_host/opinfo_device.sh trace OUT    the ten operators measured, then traced by torch.profiler
#                                        (tools/gpu_host/profiler_check.py)
#   tools/gpu_host/opinfo_device.sh gate OUT     another fresh GPU, the recorded baseline in place: the example gated first,
#                                        then the GELU compile probe
#
# gpuperf is installed (no extras) beside the wheels in .whl/ into /tmp/site, so the projects load the plugin through
# its pytest11 entry point, as a user's repository does.
set -uo pipefail
mode=${1:?usage: tools/gpu_host/opinfo_device.sh record|sweep|trace|gate OUT}
out=${2:?usage: tools/gpu_host/opinfo_device.sh record|sweep|trace|gate OUT}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"
log_to "$out" "$mode.log"
export PYTHONUNBUFFERED=1

step "install"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$root"/.whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site \
    "$root" || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/gpu.txt"
python3 -m gpuperf device | tail -3

example=$root/examples/framework-kernels
case $mode in
record)
    step "the framework example recorded on a fresh GPU (--update-baselines)"
    (cd "$example" && rm -rf results && python3 -m pytest -p no:cacheprovider --update-baselines \
        --results-dir results --history none -q; echo "exit $?")
    cp "$example"/baselines/nvidia-h200.yaml "$out/example-baseline.yaml"
    cp "$example"/results/*/results.json "$out/example-results.json"
    step "the GELU compile probe"
    python3 "$root/tools/gpu_host/gelu_compile_probe.py" --repeat 2 | tee "$out/gelu-probe.md"
    step "kernel symbols"
    python3 "$root/tools/gpu_host/kernel_symbols.py" --out /tmp/kernel-symbols.tsv --timeout 100 && \
        gzip -c /tmp/kernel-symbols.tsv > "$out/kernel-symbols.tsv.gz"
    ;;
sweep)
    project=$root/tools/gpu_host/opinfo_project
    step "the OpInfo sweep"
    start=$(date +%s)
    mkdir -p /tmp/sweep
    (cd "$project" && timeout -s INT 480 python3 -m pytest -p no:cacheprovider perf_tests/test_opinfo.py --results-dir /tmp/sweep \
        --history none --junitxml /tmp/sweep/junit.xml --case-timeout 1 -q -o console_output_style=classic \
        > /tmp/sweep/pytest.log 2>&1; echo $? > /tmp/sweep/rc)
    echo "sweep rc=$(cat /tmp/sweep/rc) wall=$(( $(date +%s) - start )) s"; tail -25 /tmp/sweep/pytest.log
    cp /tmp/sweep/*/results.json /tmp/sweep/results.json
    tar -C /tmp/sweep -czf "$out/sweep.tar.gz" junit.xml results.json rc pytest.log
    python3 "$root/tools/evidence/opinfo_sweep.py" report /tmp/sweep/junit.xml /tmp/sweep/results.json --context "$out/gpu.txt" \
        > "$out/opinfo-sweep.md"; head -30 "$out/opinfo-sweep.md"
    ;;
trace)
    project=$root/tools/gpu_host/opinfo_project
    if [ -n "${OPINFO_AFTER:-}" ]; then
        step "the OpInfo sweep, from the operator after $OPINFO_AFTER on"
        mkdir -p /tmp/sweep2
        (cd "$project" && timeout -s INT 240 python3 -m pytest -p no:cacheprovider perf_tests/test_opinfo.py \
            --results-dir /tmp/sweep2 --history none --junitxml /tmp/sweep2/junit.xml --case-timeout 1 -q \
            > /tmp/sweep2/pytest.log 2>&1; echo $? > /tmp/sweep2/rc)
        tail -5 /tmp/sweep2/pytest.log
        cp /tmp/sweep2/*/results.json /tmp/sweep2/results.json
        tar -C /tmp/sweep2 -czf "$out/sweep2.tar.gz" junit.xml results.json rc pytest.log
    fi
    step "ten operators at gated sizes, then traced by torch.profiler"
    (cd "$project" && python3 -m pytest -p no:cacheprovider perf_tests/test_operators.py --results-dir /tmp/ops \
        --history none -q; echo "exit $?")
    cp /tmp/ops/*/results.json "$out/operators-results.json"
    (cd "$project" && python3 "$root/tools/gpu_host/profiler_check.py" trace --out "$out/operators-profile.json" -- \
        perf_tests/test_operators.py -q)
    python3 "$root/tools/gpu_host/profiler_check.py" compare --limit 2 "$out/operators-results.json" \
        "$out/operators-profile.json" | tee "$out/operators-compare.md"
    ;;
gate)
    step "the framework example gated against the baseline recorded on another GPU"
    (cd "$example" && rm -rf results && python3 -m pytest -p no:cacheprovider --gate --results-dir results \
        --history none -q; echo "exit $?")
    cp "$example"/results/*/results.json "$out/example-gate-results.json"
    if [ "${PROBE:-1}" = 1 ]; then
        step "the GELU compile probe"
        python3 "$root/tools/gpu_host/gelu_compile_probe.py" --repeat 1 | tee "$out/gelu-probe.md"
    fi
    ;;
esac
step "done"
