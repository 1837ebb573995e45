#!/usr/bin/env bash
# The stopping rule and the gate's fixed costs on one fresh GPU (run it on three GPUs, one session each):
#
#   tools/gpu_host/stopping_rule_device.sh [OUT_DIR]          # OUT_DIR defaults to $OUT
#
# 1. the full default `--gate`, timed (pytest's own time, the wall clock, every test's --durations): the run whose
#    records say what the stopping rule did (extra.sampling) for tools/evidence/stopping_table.py, and run 1 for
#    `baseline from-runs`;
# 2. a second full default run (run 2 for `baseline from-runs`: two runs a GPU, every FP8 projection with cycles);
# 3. `pytest perf_tests -k gemv` (the README's selection), timed as a user runs it, then once under cProfile and
#    `python -X importtime` (start-up, collection, NVRTC, CUPTI's start and the loop, one profile), and its
#    collection alone under `-X importtime`; then the full default gate once more, under cProfile;
#    (PROFILE=0 leaves step 3 out: a recording host beside the one profiled)
#
# Needs the wheels of .whl/ (carry it: nvmath-python, cupti-python, ...); the suite's plugin comes from the
# repository's conftest.py. It leaves these in OUT_DIR:
#   stopping.log        every step's output, with pytest's and the wall clock's durations
#   gate.json run2.json the two full runs' results.json (records with extra.sampling and cycles)
#   gemv.json           the timed -k gemv run's results.json
#   gemv-profile.txt    the -k gemv profile: cProfile's top functions, the slowest imports (run and collection)
#   gate-profile.txt    the full gate's profile: cProfile's top functions, cumulative and by own time
#   durations.txt       every test's setup, call and teardown time in the timed gate (--durations=0)
set -uo pipefail

out=${1:-${OUT:?usage: tools/gpu_host/stopping_rule_device.sh OUT_DIR (or set OUT)}}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/gpu_host/device_env.sh"
log_to "$out" stopping.log
scratch=$(mktemp -d)
deadline=$(( $(date +%s) + 470 ))  # 8 minutes less a margin for the last copies
left() { echo $(( deadline - $(date +%s) )); }
pytest_q=(-p no:cacheprovider -q)

step "install"
device_env "$root" || exit 1
cd "$root" || exit 1

# keep <step>'s results.json as OUT/<name>.json and drop the rest of its results directory
keep() { cp "$scratch/$1"/*/results.json "$out/$2.json" 2>/dev/null || echo "no results.json from $1"; }

step "1. full default --gate, timed ($(left) s left)"
start=$(date +%s.%N)
timeout "$(( $(left) - 200 ))" python3 -m pytest perf_tests --gate "${pytest_q[@]}" --durations=0 \
    --durations-min=0 --results-dir "$scratch/gate" > "$scratch/gate.out" 2>&1
rc=$?
sed '/slowest durations/,/short test summary/d' "$scratch/gate.out" | tail -40
sed -n '/slowest durations/,/short test summary/p' "$scratch/gate.out" > "$out/durations.txt"
echo "gate: rc=$rc wall=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
keep gate gate

step "2. full default run (run 2 for baseline from-runs; $(left) s left)"
start=$(date +%s.%N)
timeout "$(( $(left) - 90 ))" python3 -m pytest perf_tests "${pytest_q[@]}" --results-dir "$scratch/run2"
echo "run 2: rc=$? wall=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
keep run2 run2

if [ "${PROFILE:-1}" = 0 ]; then rm -rf "$scratch"; step "done, PROFILE=0 ($(left) s before the deadline)"; exit 0; fi

step "3. pytest perf_tests -k gemv, timed as a user runs it ($(left) s left)"
start=$(date +%s.%N)
python3 -m pytest perf_tests -k gemv "${pytest_q[@]}" --durations=10 --results-dir "$scratch/gemv"
echo "-k gemv: rc=$? wall=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
keep gemv gemv

step "3b. the same under cProfile and -X importtime, then its collection alone"
python3 -X importtime -m cProfile -o "$scratch/gemv.prof" -m pytest perf_tests -k gemv "${pytest_q[@]}" \
    --results-dir none > "$scratch/profiled.txt" 2> "$scratch/importtime-run.txt"
tail -3 "$scratch/profiled.txt"
start=$(date +%s.%N)
python3 -X importtime -m pytest perf_tests -k gemv --collect-only "${pytest_q[@]}" > /dev/null \
    2> "$scratch/importtime-collect.txt"
echo "-k gemv --collect-only: wall=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
{
    echo "== cProfile of pytest perf_tests -k gemv (cumulative, top 60)"
    python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(60)" \
        "$scratch/gemv.prof"
    echo "== the same, by own time (top 30)"
    python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(30)" \
        "$scratch/gemv.prof"
    for phase in run collect; do
        echo "== -X importtime ($phase): slowest cumulative imports, µs"
        grep '^import time:' "$scratch/importtime-$phase.txt" | sort -t'|' -k2 -n -r | head -40
    done
} > "$out/gemv-profile.txt" 2>&1
echo "profile summary: $out/gemv-profile.txt"

step "3c. the full default gate under cProfile ($(left) s left)"
timeout "$(( $(left) - 15 ))" python3 -m cProfile -o "$scratch/gate.prof" -m pytest perf_tests --gate \
    "${pytest_q[@]}" --results-dir none --history none > "$scratch/gate-profiled.txt" 2>&1
tail -2 "$scratch/gate-profiled.txt"
{
    echo "== cProfile of pytest perf_tests --gate (cumulative, top 150)"
    python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(150)" \
        "$scratch/gate.prof"
    echo "== the same, by own time (top 80)"
    python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(80)" \
        "$scratch/gate.prof"
} > "$out/gate-profile.txt" 2>&1

rm -rf "$scratch"
step "done ($(left) s before the deadline); files: $(ls "$out" | tr '\n' ' ')"
