#!/usr/bin/env bash
# Bisect a planted slowdown on a real GPU: python -m gpuperf bisect over a scratch git repository of 10 commits
# built from a copy of this tree, one of which (commit 6) slows the shared-memory tiled SGEMM kernel
# (kernels/cuda/tiled_sgemm.cu: a __nanosleep in its K loop; results stay correct, only time is lost).
#
#   tools/gpu_host/bisect_demo.sh OUT_DIR [CASE]
#
# CASE defaults to the tiled kernel's 4096³ case. Writes to OUT_DIR: bisect.json (every step, the first bad
# commit), steps.jsonl, bisect.log (git bisect's own log), history.sqlite (every step recorded), demo.log (this
# script's output), planted.txt (the planted commit) and, when the bisection named it, DEMO_OK. Exits 0 only when
# the first bad commit found is the planted one. The copy needs no .git: the script makes its own repository.
set -euo pipefail

out=${1:?usage: tools/gpu_host/bisect_demo.sh OUT_DIR [CASE]}
case=${2:-"perf_tests/test_custom.py::test_custom_perf[tiled-4096x4096x4096-cold]"}
source "$(dirname "$0")/scratch_repo.sh"
demo_output "$out"
require_git bisect_demo "$out"
scratch_repo bisect-demo
commit() { scratch_commit "$1"; }

commit "demo 1: the tree under test"
for n in 2 3 4 5; do
    echo "unrelated change $n" >> docs/bisect-demo.txt
    commit "demo $n: an unrelated change"
done
python3 - <<'EOF'
from pathlib import Path

path = Path("kernels/cuda/tiled_sgemm.cu")
text = path.read_text()
anchor = "        __syncthreads();\n#pragma unroll"
assert text.count(anchor) == 1, "tiled_sgemm.cu changed: update the demo's anchor"
path.write_text(text.replace(anchor, "        __syncthreads();\n        __nanosleep(4000);  // the planted slowdown\n"
                                     "#pragma unroll"))
EOF
commit "demo 6: planted slowdown in tiled_sgemm.cu"
planted=$(git rev-parse HEAD)
echo "$planted" > "$out/planted.txt"
for n in 7 8 9 10; do
    echo "unrelated change $n" >> docs/bisect-demo.txt
    commit "demo $n: an unrelated change"
done
good=$(git rev-list --max-parents=0 HEAD)
echo "bisect_demo: $(git rev-list --count HEAD) commits; good $good, bad $(git rev-parse HEAD), planted $planted"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader 2>/dev/null || echo "bisect_demo: no nvidia-smi here"

status=0
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" python3 -m gpuperf bisect --good "$good" --bad HEAD -k "$case" --repo "$repo" --out "$out" \
    --history "$out/history.sqlite" || status=$?
found=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("first_bad") or "")' \
    "$out/bisect.json" 2>/dev/null || true)
echo "bisect_demo: planted $planted, found ${found:-nothing} (bisect exit $status)"
if [ "$status" = 0 ] && [ "$found" = "$planted" ]; then
    touch "$out/DEMO_OK"
    echo "bisect_demo: DEMO OK: the first bad commit is the planted one"
    exit 0
fi
exit 1
