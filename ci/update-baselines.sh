#!/usr/bin/env bash
# Re-record this machine's GPU baselines (after a driver / CUDA / cuBLAS upgrade) and show old → new.
#
#   ci/update-baselines.sh [pytest arguments...]     e.g.  ci/update-baselines.sh -k gemv
#
# Only the selected cases are re-measured and rewritten (pytest perf_tests --update-baselines "$@").
# Then, for every baselines/*.yaml that now differs from git's HEAD (or is new), the old → new table of
# `python -m gpuperf baseline diff` is printed and collected, as Markdown, in $GPUPERF_RESULTS/baseline-diff.md
# (the pull-request body of .github/workflows/update-baselines.yml). Nothing is committed here.
#
# Environment: PYTHON (default python3), GPUPERF_RESULTS (default results).
# Exit code: pytest's; the tables are printed either way, so a partial update can still be reviewed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}
results_root=${GPUPERF_RESULTS:-results}
diff_md="$results_root/baseline-diff.md"
# a writing option among the arguments that this script sets itself (--results-dir, --junitxml) is refused, exit 4
"$python" -m gpuperf.wiring.selection_guard ci/update-baselines.sh --update-baselines --history -- "$@" || exit $?
mkdir -p "$results_root"

if ! "$python" -m gpuperf device; then
  echo "ci/update-baselines.sh: no usable GPU on this runner (cause above); baselines are recorded on the GPU they describe" >&2
  exit 1
fi
gpu=$("$python" -m gpuperf device --json | "$python" -c 'import json, sys; d = json.load(sys.stdin); print(d["name"], "·", "driver", d["driver"], "· CUDA", d["cuda_runtime"], "· cuBLAS", d["cublas"])') || gpu="this runner's GPU"

status=0
"$python" -m pytest perf_tests --update-baselines --results-dir="$results_root" "$@" || status=$?

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

{
  echo "## Baseline update"
  echo
  echo "Re-recorded on ${gpu} with \`pytest perf_tests --update-baselines $*\` (pytest exit status ${status})."
  echo
} >"$diff_md"

changed=0
while IFS= read -r file; do
  changed=$((changed + 1))
  if ! git cat-file -e "HEAD:$file" 2>/dev/null; then
    # a new file has nothing to compare with (baseline diff fails on that): its check line says what it holds
    "$python" -m gpuperf baseline check "$file" | tee -a "$diff_md"
    echo | tee -a "$diff_md"
    continue
  fi
  old="$tmp/old.yaml"
  old_name="$file@HEAD"
  git show "HEAD:$file" >"$old"
  "$python" -m gpuperf baseline diff --names "$old_name" "$file" "$old" "$file"
  echo
  {
    "$python" -m gpuperf baseline diff --markdown --names "$old_name" "$file" "$old" "$file"
    echo
  } >>"$diff_md"
done < <(git ls-files --modified --others --exclude-standard -- 'baselines/*.yaml' | sort -u)

if [[ $changed -eq 0 ]]; then
  echo "No baseline file changed." | tee -a "$diff_md"
fi
echo "ci/update-baselines.sh: old → new tables in $diff_md; review them, then commit baselines/*.yaml"
exit "$status"
