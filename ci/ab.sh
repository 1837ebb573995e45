#!/usr/bin/env bash
# The pull-request gate, for any CI: the checked-out head against its merge base with BASE_REF, on this runner's
# one GPU, in turns, judged on paired rounds (python -m gpuperf ab; docs/ab.md). The baseline gate (ci/gate.sh)
# stays for main, nightly runs and driver upgrades.
#
#   ci/ab.sh BASE_REF [ab arguments...] [-- pytest selection...]
#       e.g.  ci/ab.sh origin/main            or   ci/ab.sh origin/main --threshold 0.03 -- perf_tests -k gemm
#
# Environment:
#   PYTHON            interpreter to use (default: python3)
#   GPUPERF_RESULTS   results root (default: results); the run lands in $GPUPERF_RESULTS/ab-<timestamp>/ with
#                     base/ and head/ (each side's results.json, results.csv, summary.md, pytest.log), ab.json
#                     and summary.md
#   GITHUB_STEP_SUMMARY  when set (GitHub Actions), the A/B table is appended to the job page
#
# Exit code: gpuperf ab's (0 no case slower, 1 a case slower, 2 evidence missing: a case measured on one side
# only or too noisy to judge, 3 the run could not be made: a bad revision, a side crashed or stalled, 4 a usage
# error: a bad option, before either side starts), 3 when the runner has no usable GPU or no merge base, and 4 on
# this script's own usage error.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}
results_root=${GPUPERF_RESULTS:-results}
if [[ $# -lt 1 ]]; then
  echo "usage: ci/ab.sh BASE_REF [ab arguments...] [-- pytest selection...] (e.g. ci/ab.sh origin/main)" >&2
  exit 4
fi
base_ref=$1
shift
mkdir -p "$results_root"

if ! "$python" -m gpuperf device; then
  echo "ci/ab.sh: no usable GPU on this runner (cause above); run the A/B gate on a GPU runner" >&2
  exit 3
fi
if ! base=$(git merge-base HEAD "$base_ref"); then
  echo "ci/ab.sh: no merge base of HEAD and $base_ref: fetch the base branch (actions/checkout fetch-depth: 0)" >&2
  exit 3
fi

status=0
"$python" -m gpuperf ab --base "$base" --out "$results_root/ab-$(date -u +%Y%m%d-%H%M%S)" "$@" || status=$?
exit "$status"
