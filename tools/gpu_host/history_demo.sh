#!/usr/bin/env bash
# The history on a real GPU, as the history's target puts it: two full default runs and a slowed one appended;
# `history changes` names the slowed cases and their commit.
#
#   tools/gpu_host/history_demo.sh OUT_DIR [PYTEST ARGS...]      (e.g. --gate: each run also gated)
#
# In a scratch git repository made from a copy of this tree (tools/gpu_host/scratch_repo.sh), so each run records its
# commit: two full default runs (`pytest perf_tests`, every case), a commit, one full default run slowed 5 % by
# tools/gpu_host/slowdown.py (the cuBLAS GEMV and non-transposed GEMM calls of the performance tests do 5 % more work),
# all appended to one SQLite history. Then `history changes --last 1` must name the slowed cases (a slowdown in
# a series' last run after only two runs before it is judged by the gate's own rule) with the slowed commit and
# exit 1, and `history show` prints one slowed case's series. A full default run takes 70-100 s on an H200, so
# the demo fits in one 10-minute command. Writes OUT_DIR/history.sqlite, results/, changes.txt (the command's
# output and exit code), show.txt, demo.log and, when the slowed cases were named with their commit, DEMO_OK.
set -euo pipefail

out=${1:?usage: tools/gpu_host/history_demo.sh OUT_DIR [PYTEST ARGS...]}
shift
run_args=("$@")
source "$(dirname "$0")/scratch_repo.sh"
demo_output "$out"
require_git history_demo "$out"
scratch_repo history-demo
scratch_commit "history demo: before"
db=$out/history.sqlite
suite() { python3 -m pytest perf_tests -q -p no:cacheprovider --history "$db" --results-dir "$out/results" "${run_args[@]}" "$@" \
              | tail -3 || true; }

for n in 1 2; do echo "history_demo: run $n ($(date -u +%T))"; suite; done
echo "history demo: the slowed commit" >> docs/history-demo.txt
scratch_commit "history demo: 5 % slower (tools/gpu_host/slowdown.py)"
slowed=$(git rev-parse HEAD)
echo "history_demo: slowed commit $slowed"
echo "history_demo: run 3, slowed ($(date -u +%T))"
GPUPERF_SLOWDOWN=0.05 suite -p tools.gpu_host.slowdown

status=0
python3 -m gpuperf history changes --history "$db" --last 1 > "$out/changes.txt" || status=$?
echo "exit $status" >> "$out/changes.txt"
cat "$out/changes.txt"
first=$(grep -m1 '^SLOWDOWN' "$out/changes.txt" | sed 's/^SLOWDOWN \([^ ]*\) .*/\1/' || true)
[ -z "$first" ] || python3 -m gpuperf history show --history "$db" "$first" | tee "$out/show.txt"
named=$(grep -c "^SLOWDOWN .*commit ${slowed:0:10}" "$out/changes.txt" || true)
echo "history_demo: $named slowdowns name the slowed commit ${slowed:0:10} ($(date -u +%T))"
if [ "$status" = 1 ] && [ "$named" -gt 0 ]; then
    echo "history_demo: DEMO OK: the slowed cases named with their commit, exit 1"
    touch "$out/DEMO_OK"
fi
