#!/usr/bin/env bash
# The GPU merge gate, for any CI: run the perf suite in gate mode (every selected baselined case must be
# measured and hold; a missing baseline, an unmeasured case or a stale entry fails the run), keep pytest's
# exit code, and say where the results and the Markdown summary are.
#
#   ci/gate.sh [pytest arguments...]          e.g.  ci/gate.sh -m "not slow"   or   ci/gate.sh -n 2 --gpu all
#
# Environment:
#   PYTHON            interpreter to use (default: python3)
#   GPUPERF_RESULTS   results root (default: results); the run lands in $GPUPERF_RESULTS/<timestamp>/ with
#                     results.json, results.csv, summary.md, and junit.xml beside them
#   GITHUB_STEP_SUMMARY  when set (GitHub Actions), the plugin appends the summary to the job page
#
# Exit code: pytest's (0 pass, 1 a case regressed / failed or a baselined case was not measured, 2 interrupted,
# 3 internal error, 4 usage, 5 nothing collected), or 1 when the runner has no usable GPU: with no GPU every case would be skipped
# and the gate would pass without measuring anything, or 1 when pytest exited 0 without gpuperf writing results (a
# test ended the process early). A writing option among the arguments (--update-baselines, --results-dir,
# --junitxml) is refused, exit 4.
set -euo pipefail
export LC_ALL=C  # one collation for sort and comm

cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}
results_root=${GPUPERF_RESULTS:-results}
# a writing option among the arguments (--update-baselines, --results-dir, --junitxml) is refused, exit 4
"$python" -m gpuperf.wiring.selection_guard ci/gate.sh --history -- "$@" || exit $?
mkdir -p "$results_root"

if ! "$python" -m gpuperf device; then
  echo "ci/gate.sh: no usable GPU on this runner (cause above); run the gate on a GPU runner" >&2
  exit 1
fi

list_runs() { find "$results_root" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort; }
before=$(list_runs)

status=0
"$python" -m pytest perf_tests --gate --results-dir="$results_root" \
  --junitxml="$results_root/junit.xml" "$@" || status=$?

new_run=$(comm -13 <(printf '%s\n' "$before") <(list_runs) | tail -n 1)
run_dir=${new_run:+$results_root/$new_run}
if [[ -n "$run_dir" && -f "$run_dir/summary.md" ]]; then
  if [[ -f "$results_root/junit.xml" ]]; then
    cp "$results_root/junit.xml" "$run_dir/junit.xml"
  fi
  echo "ci/gate.sh: results in $run_dir (summary: $run_dir/summary.md)"
else
  message="pytest exited with status $status before gpuperf wrote any results; see the job log"
  if [[ $status -eq 0 ]]; then  # a test that ended the process early (os._exit(0)): no evidence, no pass
    message="pytest exited 0 but gpuperf wrote no results (a test ended the process before the session's end, e.g. os._exit(0)): the gate fails without evidence; see the job log"
    status=1
  fi
  echo "ci/gate.sh: $message" >&2
  if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
    printf '## gpuperf gate\n\n%s.\n' "$message" >>"$GITHUB_STEP_SUMMARY"
  fi
fi

exit "$status"
