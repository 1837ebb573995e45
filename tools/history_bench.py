"""How fast the history is: a year of nightly runs of a fleet, ingested into SQLite and asked for change points.

    PYTHONPATH=$PWD python3 tools/history_bench.py [--runs 10000] [--cases 150] [--out /tmp/history-bench]

1. ``ingest``: RUNS synthetic runs × CASES cases (records shaped like the README's H200 run, every field, with
   0.5–2 % noise and a 3 % step in every tenth case) appended ``INGEST_BATCH`` runs a transaction through
   ``History.append_batch`` inside ``History.bulk``, with their results-file text: the path ``history ingest``
   takes after reading its files. Reading and checking a results file from disk (the store's checked reader) is
   timed apart, on 200 files.
2. ``changes``: ``python -m gpuperf history changes`` over the whole database, as a fresh process.
3. ``append``: what a suite run pays at its end, in a fresh process: importing the append module (SQLAlchemy),
   opening the full database, appending one CASES-record run (``history_append.append_run``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuperf.store.history import INGEST_BATCH, History, sqlite_url  # noqa: E402
from gpuperf.store.history_rows import read_results_document  # noqa: E402

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


def ingest(url: str, runs: int, count: int) -> float:
    """Seconds spent in the history: ``append_batch`` of INGEST_BATCH runs at a time inside ``History.bulk``
    (as ``history ingest`` of that many files does), the series index built at the end included; making the
    documents and their text is not counted."""
    templates = cases(count)
    rng = random.Random(1)
    spent = 0.0
    with History(url) as history:
        started = time.perf_counter()
        with history.bulk():
            spent += time.perf_counter() - started
            for first in range(0, runs, INGEST_BATCH):
                batch = []
                for number in range(first, min(first + INGEST_BATCH, runs)):
                    data = document(number, templates, rng, runs)
                    # its results file's text, as ingest reads it (writing the file is the suite's part)
                    batch.append((data, f"bench run {number}", orjson.dumps(data).decode("utf-8")))
                started = time.perf_counter()
                history.append_batch(batch)
                spent += time.perf_counter() - started
                if first and first % 1000 == 0:
                    print(f"  {first} runs, {spent:.1f} s", flush=True)
            started = time.perf_counter()
        spent += time.perf_counter() - started
    return spent


def read_files(out: Path, count: int, files: int = 200) -> float:
    templates = cases(count)
    rng = random.Random(2)
    folder = out / "files"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(files):
        path = folder / f"{number}.json"
        path.write_text(json.dumps(document(number, templates, rng, files)))
        paths.append(path)
    started = time.perf_counter()
    for path in paths:
        read_results_document(path)
    return (time.perf_counter() - started) / files


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - started, (done.stdout + done.stderr).strip().splitlines()[-1]


APPEND = """
import json, sys, time
started = time.perf_counter()
from gpuperf.wiring import history_append
from gpuperf.store.records import Record, RunInfo
imported = time.perf_counter()
data = json.loads(open(sys.argv[2]).read())
run, records = RunInfo.from_dict(data["run"]), [Record.from_dict(r) for r in data["records"]]
loaded = time.perf_counter()
line = history_append.append_run(sys.argv[1], run, records, "bench")
done = time.perf_counter()
print(f"import {imported - started:.3f} s + append {done - loaded:.3f} s = {done - started - (loaded - imported):.3f} s"
      f" ({line})")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=150)
    parser.add_argument("--out", type=Path, default=Path("/tmp/history-bench"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    database = args.out / "history.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    url = sqlite_url(database)
    seconds = ingest(url, args.runs, args.cases)
    size = database.stat().st_size / 2**20
    print(f"ingest: {args.runs} runs × {args.cases} cases in {seconds:.1f} s ({size:.0f} MiB)")
    print(f"reading a results file of {args.cases} records: {1000 * read_files(args.out, args.cases):.1f} ms")
    changes_s, last = timed([sys.executable, "-m", "gpuperf", "history", "--history", url, "changes"])
    print(f"history changes (a fresh process): {changes_s:.2f} s: {last}")
    sample = args.out / "one-run.json"
    sample.write_text(json.dumps(document(args.runs + 1, cases(args.cases), random.Random(3), args.runs)))
    append_s, line = timed([sys.executable, "-c", APPEND, url, str(sample)])
    print(f"suite-end append (a fresh process, {append_s:.2f} s wall with interpreter start): {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
