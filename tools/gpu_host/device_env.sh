# Sourced by the scripts that run on the GPU machine (tools/gpu_host/ab_demo.sh, fp8_device.sh, h200_gate_session.sh):
# `log_to OUT FILE` makes OUT and copies everything the script prints into OUT/FILE; `step` heads each step of a
# log; `device_env ROOT` installs the wheels of ROOT/.whl (nvmath-python, cupti-python,
# ...: the machine has no package registry) into /tmp/site, puts it and ROOT on PYTHONPATH (the suite's plugin
# comes from ROOT's conftest.py) and prints the GPU's identity line; `seconds START` the wall time since START
# (date +%s.%N); `timed_gate OUT SCRATCH` and `shifted_gate OUT SCRATCH` the two gates that
# tools/gpu_host/validation_device.sh and tools/gpu_host/merge_gate_device.sh both run, from the checkout's root.

log_to() { mkdir -p "$1" && exec > >(tee -a "$1/$2") 2>&1; }

step() { echo; echo "== $* ($(date -u +%T))"; }

device_env() {
    local root=$1
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$root"/.whl/*.whl > /dev/null || return 1
    export PYTHONPATH=/tmp/site:$root
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader
}

seconds() { python3 -c "print(f'{$(date +%s.%N) - $1:.1f}')"; }

# The full default --gate against baselines/, timed as CI runs it: its non-PASS lines, pytest's summary and
# "gate: rc=… wall=… s" in the log; OUT/gate.json (its results.json) and OUT/durations.txt (tests over 0.05 s).
timed_gate() {
    local out=$1 scratch=$2 start rc
    start=$(date +%s.%N)
    python3 -m pytest perf_tests --gate -p no:cacheprovider -q --history none --durations=0 --durations-min=0.05 \
        --results-dir "$scratch/gate" > "$scratch/gate.out" 2>&1
    rc=$?
    grep -v '^perf_tests/.* PASS ' "$scratch/gate.out" | sed '/slowest durations/,/short test summary/d' | tail -40
    sed -n '/slowest durations/,/short test summary/p' "$scratch/gate.out" > "$out/durations.txt"
    tail -1 "$scratch/gate.out"
    echo "gate: rc=$rc wall=$(seconds "$start") s"
    cp "$scratch"/gate/*/results.json "$out/gate.json" 2>/dev/null || echo "no results.json from the gate"
}

# The gate against a shifted copy of the baseline (tools/gpu_host/shifted_baseline.py: half the entries read 5 % slow,
# which must all be caught, the rest 3 % fast, which must raise no alarm), after timed_gate (each miss is judged
# within reach or not from that gate's OUT/gate.json, and stated or not by its entry's resolution: only an unstated
# miss or an alarm fails the check): OUT/shifted.json, OUT/shifted-judged.txt.
shifted_gate() {
    local out=$1 scratch=$2
    python3 tools/gpu_host/shifted_baseline.py write baselines/nvidia-h200.yaml "$scratch/shifted-baseline"
    python3 -m pytest perf_tests --gate -p no:cacheprovider -q --history none \
        --baseline-dir "$scratch/shifted-baseline" --results-dir "$scratch/shifted" > "$scratch/shifted.txt" 2>&1
    echo "shifted gate: rc=$?"; tail -2 "$scratch/shifted.txt"
    cp "$scratch"/shifted/*/results.json "$out/shifted.json" 2>/dev/null || echo "no results.json from the shifted gate"
    python3 tools/gpu_host/shifted_baseline.py judge "$scratch/shifted-baseline/nvidia-h200.yaml" "$out/shifted.json" \
        --unshifted "$out/gate.json" --by-resolution | tee "$out/shifted-judged.txt"
}
