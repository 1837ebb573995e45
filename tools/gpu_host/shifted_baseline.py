"""The gate's sensitivity on a real GPU, without editing any committed figure: a shifted copy of a baseline.

    python tools/gpu_host/shifted_baseline.py write baselines/nvidia-h200.yaml OUT_DIR
    pytest perf_tests --gate --baseline-dir OUT_DIR --results-dir RESULTS
    python tools/gpu_host/shifted_baseline.py judge OUT_DIR/nvidia-h200.yaml RESULTS/<run>/results.json

``write`` copies every entry, every other one (in case-id order) with its figures divided by 0.95, so a kernel
that runs as fast as recorded reads 5 % slow against it (``slow``), the rest multiplied by 0.97, so it reads 3 %
fast (``fast``); figures at max clock are shifted alike. The copy is sealed like any baseline and is never a file
under ``baselines/``: it is the test harness of the check, not a record of anything measured. ``judge`` reads the
gate run's results.json: every ``slow`` entry must come out REGRESSED (caught) and no ``fast`` one may (no alarm);
it prints both lists and exits 1 when a slowdown went uncaught or an alarm was raised.

With ``--unshifted GATE`` (the same host's gate against the unshifted baseline, best in the same call), ``judge``
says of each missed slowdown whether it was within reach: a host that reads an entry d faster than recorded reads
its 5 % shift as 0.95 (1 + d) − 1, short of a band of 4 % once d passes about +1 %. A slowdown out of reach on that
host is a property of the host's offset from the entry, which no sampling removes; one within reach and missed is
the run's own noise.

A fleet's entry states its resolution (the smallest slowdown it catches on every host of the fleet): a missed 5 %
slowdown on an entry whose resolution is above 5 % is one the baseline said it would miss. ``judge`` names each
miss's resolution and counts the misses no resolution stated; with ``--by-resolution`` only those, and the alarms,
fail the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from gpuperf.store.atomic import write_atomically
from gpuperf.store.baseline import dump_baseline, load_baseline
from gpuperf.store.baseline_entry import Entry

SLOW, FAST = 1 / 0.95, 0.97  # the factors on a recorded figure: reads 5 % slow, 3 % fast
#: What a missed slowdown was, given the same host's unshifted reading of its entry.
NOISE, WIDER, OFF_HOST = "within reach, missed by this run's noise", "out of reach, its band wider than the shift", \
    "out of reach on this host"


def shifted(entry: Entry, factor: float) -> Entry:
    free, level = entry.at_max_clock, entry.memory_level
    return replace(entry, value=entry.value * factor,
                   at_max_clock=None if free is None else replace(free, value=free.value * factor),
                   memory_level=None if level is None else replace(level, value=level.value * factor))


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


def records(results: Path) -> dict[str, dict]:
    try:
        return {record["case_id"]: record for record in json.loads(results.read_text())["records"]}
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"{results}: not a gate run's results.json ({exc}): pass RESULTS/<run>/results.json")


def expected_reading(host_delta_pct: float) -> float:
    """The delta, in per cent, that a slow-shifted entry reads on a host reading the unshifted one at host_delta_pct."""
    return 100 * ((1 + host_delta_pct / 100) / SLOW - 1)


def reach(record: dict, unshifted: dict | None) -> tuple[str | None, str]:
    """Whether the host's own offset from the entry left a missed 5 % slowdown within reach of its band: the kind
    (``NOISE``, ``WIDER``, ``OFF_HOST``; None without the host's unshifted reading) and the words that say why."""
    host = None if unshifted is None else unshifted.get("delta_pct")
    if host is None or record.get("tolerance") is None:
        return None, ""
    expected, band = expected_reading(host), 100 * record["tolerance"]
    if expected < -band:
        kind = NOISE
    elif expected_reading(0.0) >= -band:
        kind = WIDER
    else:
        kind = OFF_HOST
    return kind, f"; unshifted {host:+.2f} % on this host, so the shift reads about {expected:+.2f} %: {kind}"


#: The slowdown a ``slow`` entry is shifted by: an entry whose resolution is above it was stated to miss it.
SHIFT = 1 - 1 / SLOW


def stated_miss(entry: Entry | None) -> bool:
    """Whether the entry's own resolution says the shift is finer than it can catch on every host."""
    found = entry.resolution_levelled if entry is not None else None
    return found is not None and found > SHIFT + 1e-9


def judge(shifted_file: Path, results: Path, unshifted_results: Path | None = None, by_resolution: bool = False) -> int:
    baseline = load_baseline(shifted_file)
    if baseline is None:
        raise SystemExit(f"{shifted_file}: no such baseline")
    slow, fast = halves(list(baseline.entries))
    status = records(results)
    unshifted = None if unshifted_results is None else records(unshifted_results)
    missed = [case for case in slow if status.get(case, {}).get("status") != "REGRESSED"]
    alarms = [case for case in fast if status.get(case, {}).get("status") == "REGRESSED"]
    print(f"5 % slowdowns caught: {len(slow) - len(missed)} of {len(slow)}; 3 % speed-ups raised as alarms: "
          f"{len(alarms)} of {len(fast)}")
    kinds: Counter[str | None] = Counter()
    for case in missed:
        record = status.get(case)
        kind, reach_note = (None, "") if record is None else \
            reach(record, None if unshifted is None else unshifted.get(case))
        kinds[kind] += 1
        reading = "not measured" if record is None else (
            f"{record['status']}, {record.get('delta_pct') or 0:+.2f} % against a band of "
            f"{100 * (record.get('tolerance') or 0):.1f} %, judged on {record.get('judged_on')}{reach_note}")
        resolution = baseline.entries[case].resolution_levelled
        stated = "" if resolution is None else (
            f"; resolution {100 * resolution:.1f} %" + (": stated" if stated_miss(baseline.entries[case]) else ""))
        print(f"  missed: {case}: {reading}{stated}")
    if unshifted is not None:
        print(f"of the {len(missed)} missed: {kinds[WIDER]} with a band wider than the shift, {kinds[OFF_HOST]} "
              f"out of reach on this host, {kinds[NOISE]} within reach (missed by this run's noise)")
    unstated = [case for case in missed if not stated_miss(baseline.entries.get(case))]
    print(f"of the {len(missed)} missed: {len(missed) - len(unstated)} stated by their entry's resolution (above "
          f"{100 * SHIFT:.0f} %), {len(unstated)} not")
    for case in alarms:
        print(f"  alarm: {case}")
    failing = unstated if by_resolution else missed
    return 1 if failing or alarms else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write the shifted copy of BASELINE into OUT_DIR")
    w.add_argument("baseline", type=Path)
    w.add_argument("out_dir", type=Path)
    j = sub.add_parser("judge", help="count the caught slowdowns and the alarms of a gate run against the copy")
    j.add_argument("shifted", type=Path)
    j.add_argument("results", type=Path)
    j.add_argument("--unshifted", type=Path, metavar="GATE",
                   help="the same host's gate against the unshifted baseline: says which misses were within reach")
    j.add_argument("--by-resolution", action="store_true",
                   help="fail only on a miss that no entry's resolution stated (a fleet's baseline), or an alarm")
    args = parser.parse_args(argv)
    if args.command == "write":
        return write(args.baseline, args.out_dir)
    return judge(args.shifted, args.results, args.unshifted, args.by_resolution)


if __name__ == "__main__":
    sys.exit(main())
