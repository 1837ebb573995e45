"""How fast the history is: a year of nightly runs of a fleet, ingested into SQLite and asked for change points.

    PYTHONPATH=$PWD python3 tools/history_bench.py [--runs 10000] [--cases 150] [--out /tmp/history-bench]\n        [--reuse-files]

1. ``ingest``: RUNS synthetic results files × CASES cases (records shaped like the README's H200 run, every
   field, with 0.5–2 % noise and a 3 % step in every tenth case) are written to OUT/files first (timed apart),
   then ``python -m gpuperf history ingest OUT/files`` is timed as a fresh process: every file read, parsed and
   checked by the results format's reader, its rows built and its document compressed (in worker processes),
   written to SQLite, the series index built at the end.
2. ``changes``: ``python -m gpuperf history changes`` over the whole database, as a fresh process.
3. ``append``: what the history adds to a suite run's end, in a fresh process: importing the append module
   (SQLAlchemy), opening the full database, appending one CASES-record run (``history_append.append_run``) after
   the run's results files were written (as the session writes them, history or not; not counted).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuperf.store.history import sqlite_url  # noqa: E402
from gpuperf.store.results import document_text  # noqa: E402

START = datetime(2027, 1, 1, tzinfo=timezone.utc)
TEMPLATE = json.loads((ROOT / "docs" / "h200" / "results.json").read_text())


def cases(count: int) -> list[dict[str, Any]]:
    records = TEMPLATE["records"]
    made = []
    for index in range(count):
        record = copy.deepcopy(records[index % len(records)])
        if index >= len(records):
            record["case_id"] = record["nodeid"] = f"{record['case_id']}-copy{index // len(records)}"
        made.append(record)
    return made


def document(number: int, templates: list[dict[str, Any]], rng: random.Random, runs: int) -> dict[str, Any]:
    run = copy.deepcopy(TEMPLATE["run"])
    run["started"] = (START + timedelta(hours=number)).isoformat(timespec="seconds")
    run["extra"]["uuid"] = f"GPU-bench{number % 4}"
    records = []
    for index, template in enumerate(templates):
        noise = 0.005 + 0.015 * (index % 4) / 3
        step = 0.97 if index % 10 == 0 and number > runs // 2 else 1.0
        record = dict(template)
        record["value"] = template["value"] * step * (1 + rng.gauss(0, noise))
        records.append(record)
    return {"schema": 1, "run": run, "records": records}


def write_files(folder: Path, runs: int, count: int) -> float:
    """RUNS results files of COUNT records into ``folder`` (as a suite's runs would leave them, one a run, by
    the suite's own writer); the seconds it took."""
    templates = cases(count)
    rng = random.Random(1)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for number in range(runs):
        data = document(number, templates, rng, runs)
        (folder / f"run-{number:06d}.json").write_text(document_text(data))
    return time.perf_counter() - started


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - started, (done.stdout + done.stderr).strip().splitlines()[-1]


APPEND = """
import json, sys, tempfile, time
started = time.perf_counter()
from gpuperf.wiring import history_append
imported = time.perf_counter()
from gpuperf.store.records import Record, RunInfo
from gpuperf.store.results import write_results
data = json.loads(open(sys.argv[2]).read())
run, records = RunInfo.from_dict(data["run"]), [Record.from_dict(r) for r in data["records"]]
write_results(tempfile.mkdtemp(), run, records)  # the suite writes its results files, history or not
loaded = time.perf_counter()
line = history_append.append_run(sys.argv[1], run, records, "bench")
done = time.perf_counter()
print(f"import {imported - started:.3f} s + append {done - loaded:.3f} s = {done - loaded + imported - started:.3f} s"
      f" ({line})")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=150)
    parser.add_argument("--out", type=Path, default=Path("/tmp/history-bench"))
    parser.add_argument("--reuse-files", action="store_true",
                        help="use the results files a previous run wrote under OUT/files when there are RUNS of them")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    database = args.out / "history.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    url = sqlite_url(database)
    folder = args.out / "files"
    if args.reuse_files and len(list(folder.glob("run-*.json"))) == args.runs:
        print(f"files: reusing {args.runs} results files in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
        written = write_files(folder, args.runs, args.cases)
        print(f"files: {args.runs} results files of {args.cases} records written in {written:.1f} s (not timed "
              f"below)", flush=True)
    ingest_s, last = timed([sys.executable, "-m", "gpuperf", "history", "--history", url, "ingest", str(folder)])
    size = database.stat().st_size / 2**20
    print(f"ingest (python -m gpuperf history ingest, a fresh process, reading and checking every file): "
          f"{args.runs} runs × {args.cases} cases in {ingest_s:.1f} s ({size:.0f} MiB): {last}", flush=True)
    changes_s, last = timed([sys.executable, "-m", "gpuperf", "history", "--history", url, "changes"])
    print(f"history changes (a fresh process): {changes_s:.2f} s: {last}")
    sample = args.out / "one-run.json"
    sample.write_text(json.dumps(document(args.runs + 1, cases(args.cases), random.Random(3), args.runs)))
    append_s, line = timed([sys.executable, "-c", APPEND, url, str(sample)])
    print(f"suite-end append (a fresh process, {append_s:.2f} s wall with interpreter start): {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
