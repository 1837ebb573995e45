"""The gate's sensitivity on a real GPU, without editing any committed figure: a shifted copy of a baseline.

    python tools/shifted_baseline.py write baselines/nvidia-h200.yaml OUT_DIR
    pytest perf_tests --gate --baseline-dir OUT_DIR --results-dir RESULTS
    python tools/shifted_baseline.py judge OUT_DIR/nvidia-h200.yaml RESULTS/<run>/results.json

``write`` copies every entry, every other one (in case-id order) with its figures divided by 0.95, so a kernel
that runs as fast as recorded reads 5 % slow against it (``slow``), the rest multiplied by 0.97, so it reads 3 %
fast (``fast``); figures at max clock are shifted alike. The copy is sealed like any baseline and is never a file
under ``baselines/``: it is the test harness of the check, not a record of anything measured. ``judge`` reads the
gate run's results.json: every ``slow`` entry must come out REGRESSED (caught) and no ``fast`` one may (no alarm);
it prints both lists and exits 1 when a slowdown went uncaught or an alarm was raised.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from gpuperf.store.atomic import write_atomically
from gpuperf.store.baseline import dump_baseline, load_baseline
from gpuperf.store.baseline_entry import Entry

SLOW, FAST = 1 / 0.95, 0.97  # the factors on a recorded figure: reads 5 % slow, 3 % fast


def shifted(entry: Entry, factor: float) -> Entry:
    free = entry.at_max_clock
    return replace(entry, value=entry.value * factor,
                   at_max_clock=None if free is None else replace(free, value=free.value * factor))


def halves(cases: list[str]) -> tuple[list[str], list[str]]:
    """(slow, fast): every other case in case-id order."""
    ordered = sorted(cases)
    return ordered[0::2], ordered[1::2]


def write(source: Path, out_dir: Path) -> int:
    baseline = load_baseline(source)
    if baseline is None:
        raise SystemExit(f"{source}: no such baseline")
    slow, _ = halves(list(baseline.entries))
    slow_set = set(slow)
    entries = {case: shifted(entry, SLOW if case in slow_set else FAST) for case, entry in baseline.entries.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / source.name
    write_atomically(target, dump_baseline(baseline.header, entries))
    print(f"{target}: {len(slow)} entries shifted to read 5 % slow, {len(entries) - len(slow)} to read 3 % fast")
    return 0


def judge(shifted_file: Path, results: Path) -> int:
    baseline = load_baseline(shifted_file)
    if baseline is None:
        raise SystemExit(f"{shifted_file}: no such baseline")
    slow, fast = halves(list(baseline.entries))
    status = {record["case_id"]: record for record in json.loads(results.read_text())["records"]}
    missed = [case for case in slow if status.get(case, {}).get("status") != "REGRESSED"]
    alarms = [case for case in fast if status.get(case, {}).get("status") == "REGRESSED"]
    print(f"5 % slowdowns caught: {len(slow) - len(missed)} of {len(slow)}; 3 % speed-ups raised as alarms: "
          f"{len(alarms)} of {len(fast)}")
    for case in missed:
        record = status.get(case)
        reading = "not measured" if record is None else (
            f"{record['status']}, {record.get('delta_pct') or 0:+.2f} % against a band of "
            f"{100 * (record.get('tolerance') or 0):.1f} %, judged on {record.get('judged_on')}")
        print(f"  missed: {case}: {reading}")
    for case in alarms:
        print(f"  alarm: {case}")
    return 1 if missed or alarms else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write the shifted copy of BASELINE into OUT_DIR")
    w.add_argument("baseline", type=Path)
    w.add_argument("out_dir", type=Path)
    j = sub.add_parser("judge", help="count the caught slowdowns and the alarms of a gate run against the copy")
    j.add_argument("shifted", type=Path)
    j.add_argument("results", type=Path)
    args = parser.parse_args(argv)
    return write(args.baseline, args.out_dir) if args.command == "write" else judge(args.shifted, args.results)


if __name__ == "__main__":
    sys.exit(main())
