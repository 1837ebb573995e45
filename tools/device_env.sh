# Sourced by the scripts that run on the GPU machine (tools/ab_demo.sh, fp8_device.sh, h200_gate_session.sh):
# `log_to OUT FILE` makes OUT and copies everything the script prints into OUT/FILE; `step` heads each step of a
# log; `device_env ROOT` installs the wheels of ROOT/.whl (nvmath-python, cupti-python,
# ...: the machine has no package registry) into /tmp/site, puts it and ROOT on PYTHONPATH (the suite's plugin
# comes from ROOT's conftest.py) and prints the GPU's identity line.

log_to() { mkdir -p "$1" && exec > >(tee -a "$1/$2") 2>&1; }

step() { echo; echo "== $* ($(date -u +%T))"; }

device_env() {
    local root=$1
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$root"/.whl/*.whl > /dev/null || return 1
    export PYTHONPATH=/tmp/site:$root
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader
}
