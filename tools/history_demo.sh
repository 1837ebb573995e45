#!/usr/bin/env bash
# The history on a real GPU: three runs of a selection, a commit, three runs slowed 5 % by tools/slowdown.py
# (genuinely longer reductions in cuBLAS GEMV/GEMM calls), all appended to one SQLite history; then
# `history changes` must name the slowed cases, the commit between, and exit 1.
#
#   tools/history_demo.sh OUT_DIR [PYTEST SELECTION...]      (default selection: -m gemv)
#
# Runs in a scratch git repository made from a copy of this tree (the device copy has no .git), so each run
# records its commit. Writes OUT_DIR/history.sqlite, results/, changes.txt (the command's output and exit code),
# show.txt (one slowed case's series) and demo.log. A change point needs 3 runs on each side, hence 3 + 3.
set -euo pipefail

out=${1:?usage: tools/history_demo.sh OUT_DIR [PYTEST SELECTION...]}
shift
selection=("$@")
[ ${#selection[@]} -gt 0 ] || selection=(-m gemv)
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/demo.log") 2>&1
command -v git >/dev/null || { echo "history_demo: git is not installed here (apt-get install git)" | tee "$out/NO_GIT"; exit 3; }

source_tree=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d /tmp/gpuperf-history-demo.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
repo=$scratch/repo
mkdir "$repo"
tar -C "$source_tree" --exclude=./.git --exclude=./results --exclude=./.kernel_cache --exclude='__pycache__' \
    -cf - . | tar -C "$repo" -xf -
cd "$repo"
git init -q
git config user.name "gpuperf demo"
git config user.email demo@gpuperf
git add -A && git commit -qm "history demo: before"
db=$out/history.sqlite
suite() { python3 -m pytest perf_tests "${selection[@]}" -q -p no:cacheprovider --history "$db" \
              --results-dir "$out/results" "$@" | tail -3 || true; }

for n in 1 2 3; do echo "history_demo: run $n"; suite; done
echo "history demo: the slowed commit" >> docs/history-demo.txt
git add -A && git commit -qm "history demo: 5 % slower (tools/slowdown.py)"
echo "history_demo: slowed commit $(git rev-parse HEAD)"
for n in 4 5 6; do echo "history_demo: run $n (slowed)"; GPUPERF_SLOWDOWN=0.05 suite -p tools.slowdown; done

status=0
python3 -m gpuperf history changes --history "$db" --last 3 > "$out/changes.txt" || status=$?
echo "exit $status" >> "$out/changes.txt"
cat "$out/changes.txt"
first=$(grep -m1 '^SLOWDOWN' "$out/changes.txt" | sed 's/^SLOWDOWN \([^ ]*\) .*/\1/' || true)
[ -z "$first" ] || python3 -m gpuperf history show --history "$db" "$first" | tee "$out/show.txt"
[ "$status" = 1 ] && echo "history_demo: DEMO OK: slowdowns named, exit 1" && touch "$out/DEMO_OK"
