"""How fast the history is: a year of nightly runs of a fleet, ingested into SQLite and asked for change points.

    PYTHONPATH=$PWD python3 tools/generators/history_bench.py [--runs 10000] [--cases 150] [--out /tmp/history-bench]
        [--reuse-files | --reuse-database] [--appends 5] [--history URL] [--steps ingest changes page append] [--fleet]

1. ``ingest``: RUNS synthetic results files × CASES cases (records shaped like the README's H200 run, every
   field, with 0.5–2 % noise and a 3 % step in every tenth case) are written to OUT/files first (timed apart),
   then ``python -m gpuperf history ingest OUT/files`` is timed as a fresh process: every file read, parsed and
   checked by the results format's reader, its rows built and its document compressed (in worker processes),
   written to SQLite, the series index built at the end.
2. ``changes``: ``python -m gpuperf history changes`` over the whole database, as a fresh process, three times.
3. ``page``: ``python -m gpuperf history page`` of the whole database into OUT/site, as a fresh process: its
   time, its CPU-seconds and the largest resident set of its processes (the kernel's accounting, ``wait4``).
4. ``append``: what the history adds to a suite run, each time in a fresh process (APPENDS of them, each
   appending a run of its own to the database: median and max). The process first imports what a suite session
   has loaded when it ends without a history (pytest, NumPy, the plugin with its options, fixtures, lifecycle and
   run end, the results writer) and reads the baseline (the gate does); then it times what the history adds: the
   imports (the append module with SQLAlchemy and the store, the recent-runs reader), the run's provenance (git,
   the baseline's digest), the recent runs ``summary.md`` shows (read from the history) and the append of the
   CASES-record run (``history_append.append_run``, opening the database). The results files are written between
   the last two, as the session writes them, history or not (not counted). SQLAlchemy's import is counted: a
   session with ``--history none`` does not load it.

``--fleet`` makes the runs those of the generated fleet (``history_generate.py --fleet``: each on a random host of
the 13 committed gate runs) rather than the template's on 4 hosts alike. ``--reuse-database`` skips the files and
the ingest and times the others against OUT/history.sqlite as it is (the appends add their runs to it: point OUT at
a copy); ``--steps`` names the steps to time; ``--history URL`` ingests into that empty database instead (a
PostgreSQL server's: ``postgresql://USER@HOST/DATABASE``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpuperf.history.database import sqlite_url  # noqa: E402
from gpuperf.store.results import document_text  # noqa: E402

START = datetime(2027, 1, 1, tzinfo=timezone.utc)
TEMPLATE_PATH = ROOT / "evidence" / "h200" / "results.json"
#: The results document the runs are made from (``--template``).
TEMPLATE: dict[str, Any] = json.loads(TEMPLATE_PATH.read_text())


def cases(count: int) -> list[dict[str, Any]]:
    records = TEMPLATE["records"]
    made = []
    for index in range(count):
        record = copy.deepcopy(records[index % len(records)])
        if index >= len(records):
            record["case_id"] = record["nodeid"] = f"{record['case_id']}-copy{index // len(records)}"
        made.append(record)
    return made


def document(number: int, templates: list[dict[str, Any]], rng: random.Random, runs: int,
             step_every: int = 10) -> dict[str, Any]:
    """Run ``number``: every ``step_every``-th case 3 % slower in the second half of the runs (both its measured
    figure and, where the template has one, its figure at max clock)."""
    run = copy.deepcopy(TEMPLATE["run"])
    run["started"] = (START + timedelta(hours=number)).isoformat(timespec="seconds")
    run["extra"]["uuid"] = f"GPU-bench{number % 4}"
    records = []
    for index, template in enumerate(templates):
        noise = 0.005 + 0.015 * (index % 4) / 3
        step = 0.97 if index % step_every == 0 and number > runs // 2 else 1.0
        factor = step * (1 + rng.gauss(0, noise))
        record = dict(template)
        record["value"] = template["value"] * factor
        if isinstance(template.get("value_at_max_clock"), float):
            record["value_at_max_clock"] = template["value_at_max_clock"] * factor
        records.append(record)
    return {"schema": 1, "run": run, "records": records}


def write_files(folder: Path, runs: int, count: int, step_every: int = 10) -> float:
    """RUNS results files of COUNT records into ``folder`` (as a suite's runs would leave them, one a run, by
    the suite's own writer); the seconds it took."""
    templates = cases(count)
    rng = random.Random(1)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for number in range(runs):
        data = document(number, templates, rng, runs, step_every)
        (folder / f"run-{number:06d}.json").write_text(document_text(data))
    return time.perf_counter() - started


def write_fleet_files(folder: Path, runs: int, step_every: int = 10, noise: float = 0.003) -> float:
    """RUNS results files of the generated fleet (``history_generate.py --fleet``: each run on a random host of the
    13 committed gate runs, its cases read as that host's gate run did, times Gaussian ``noise``), every
    ``step_every``-th case 3 % slower, the driver and every case's kernel changed, from the middle run on; the
    seconds it took."""
    import numpy as np

    from tools.generators.history_generate import fleet_files, fleet_hosts, fleet_levels

    hosts, names = fleet_hosts()
    started = time.perf_counter()
    on, figures = fleet_levels(hosts, names, np.random.default_rng(1), runs, noise)
    figures[::step_every, runs // 2:] *= 0.97
    for first in range(0, runs, 500):  # in slices: the figures of a slice's runs, written
        fleet_files(hosts, names, on[:first + 500], figures[:, :first + 500], folder, runs // 2, first=first)
    return time.perf_counter() - started


def environment() -> dict[str, str]:
    """The bench's environment for the commands it times: this checkout first on the module path, then what
    the path held (where the packages may be installed)."""
    held = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *([held] if held else [])])}


def timed(command: list[str], succeeded: tuple[int, ...] = (0,)) -> tuple[float, str]:
    """The seconds ``command`` took and its last line of output; a command that exits with a code not in
    ``succeeded`` ends the bench with its output."""
    seconds, _, _, line = measured(command, succeeded)
    return seconds, line


def measured(command: list[str], succeeded: tuple[int, ...] = (0,)) -> tuple[float, float, float, str]:
    """``timed``, with the CPU-seconds the command and its worker processes took and the largest resident set
    of any of them (MiB): the kernel's accounting of the command's process, reaped here (``wait4``)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment())
    assert process.stdout is not None
    output = process.stdout.read().strip()
    process.stdout.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = code = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if code not in succeeded:
        raise SystemExit(f"{' '.join(command[1:])} failed (exit {code}):\n{output[-4000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output.splitlines()[-1]


def children_cpu_s() -> float:
    """CPU-seconds (user and system) of the finished child processes so far, theirs included."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


APPEND = """
import json, sys, tempfile, time
from pathlib import Path
import numpy, pytest
import gpuperf.wiring.plugin
from gpuperf.output import results
from gpuperf.trend.paths import DEFAULT_SITE
from gpuperf.store.baseline import load_baseline
from gpuperf.store.records import Record, RunInfo
from gpuperf.wiring.session_options import Options
root, url, sample = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
data = json.loads(sample.read_text())
run, records = RunInfo.from_dict(data["run"]), [Record.from_dict(record) for record in data["records"]]
baseline = load_baseline(root / "baselines" / "nvidia-h200.yaml")
started = time.perf_counter()
from gpuperf.wiring import history_append
from gpuperf.trend.source import summary_history
imported = time.perf_counter()
run = history_append.with_provenance(run, history_append.session_provenance(root, Options(), ["perf_tests"],
                                                                             baseline))
provenance = time.perf_counter()
recent = summary_history(url, run, records, root / DEFAULT_SITE)
summarised = time.perf_counter()
files = results.write_run(Path(tempfile.mkdtemp()), run, records, history=recent)
written = time.perf_counter()
line = history_append.append_run(url, run, records, str(files.results_json), files.results_text)
done = time.perf_counter()
parts = {"import": imported - started, "provenance": provenance - imported, "recent runs": summarised - provenance,
         "append": done - written}
print(json.dumps({**parts, "total": sum(parts.values()), "line": line}))
"""


def appends(url: str, out: Path, runs: int, count: int, processes: int) -> str:
    """The history's cost at a suite run's end, ``processes`` times in a fresh process: median and max. The
    database is on disk first: the ingest has just written a gigabyte, and the first append's checkpoint would
    wait for all of it, where a suite's database was written long before."""
    os.sync()
    measured = []
    for number in range(processes):
        sample = out / f"one-run-{number}.json"
        sample.write_text(json.dumps(document(runs + 1 + number, cases(count), random.Random(1000 + number), runs)))
        done = subprocess.run([sys.executable, "-c", APPEND, str(ROOT), url, str(sample)], capture_output=True,
                              text=True, env=environment())
        sample.unlink()
        if done.returncode != 0:
            raise SystemExit(f"the append's process failed:\n{done.stderr}")
        measured.append(json.loads(done.stdout.splitlines()[-1]))
        if "records appended" not in measured[-1]["line"]:
            raise SystemExit(f"{url}: {measured[-1]['line']}: it holds this bench's runs already; time the appends "
                             "on a fresh copy of the database")
    totals = sorted(figures["total"] for figures in measured)
    parts = ", ".join(f"{name} {statistics.median(figures[name] for figures in measured):.3f}"
                      for name in ("import", "provenance", "recent runs", "append"))
    each = ", ".join(f"{figures['total']:.2f}" for figures in measured)
    return (f"median {statistics.median(totals):.2f} s, max {totals[-1]:.2f} s over {processes} processes "
            f"({each} s; medians: {parts} s; {measured[-1]['line']})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=150)
    parser.add_argument("--out", type=Path, default=Path("/tmp/history-bench"))
    parser.add_argument("--reuse-files", action="store_true",
                        help="use the results files a previous run wrote under OUT/files when there are RUNS of them")
    parser.add_argument("--reuse-database", action="store_true",
                        help="no files, no ingest: time changes and the appends against OUT/history.sqlite as it is "
                             "(the appends add runs to it)")
    parser.add_argument("--appends", type=int, default=5, metavar="N", help="fresh processes that each append a run")
    parser.add_argument("--history", metavar="URL", help="ingest into this empty database (e.g. a PostgreSQL URL) "
                        "instead of OUT/history.sqlite")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="what to time (default all)")
    parser.add_argument("--template", type=Path, default=TEMPLATE_PATH,
                        help="the results file whose run and records the runs are made from (default: the README's "
                             "H200 run; evidence/ab/merge-gate/407f2e2d/gate.json: 163 cases, 52 judged at max clock)")
    parser.add_argument("--step-every", type=int, default=10, metavar="K",
                        help="every K-th case 3 %% slower in the second half of the runs (default 10; 1: every case)")
    parser.add_argument("--fleet", action="store_true",
                        help="the runs of the generated fleet instead (tools/generators/history_generate.py --fleet: "
                             "random hosts of the 13 committed gate runs, 162 cases, 0.3 %% noise; --step-every "
                             "applies, with the driver and the kernels changed at the middle run; --cases does not)")
    args = parser.parse_args()
    if args.fleet:
        from tools.generators.history_generate import fleet_hosts

        args.cases = len(fleet_hosts()[1])
    TEMPLATE.clear()
    TEMPLATE.update(json.loads(args.template.read_text()))
    args.out.mkdir(parents=True, exist_ok=True)
    database = args.out / "history.sqlite"
    url = args.history or sqlite_url(database)
    if "ingest" in args.steps and not args.reuse_database:
        ingest(args, database, url)
    if "changes" in args.steps:
        changes = [timed([sys.executable, "-m", "gpuperf", "history", "--history", url, "changes"], succeeded=(0, 1))
                   for _ in range(3)]  # 1: a slowdown in the last runs, as the bench's steps make
        print(f"history changes (a fresh process, 3 times): median {statistics.median(s for s, _ in changes):.2f} s "
              f"({', '.join(f'{s:.2f}' for s, _ in changes)} s): {changes[-1][1]}", flush=True)
    if "page" in args.steps:
        page(url, args.out)
    if "append" in args.steps:
        print(f"suite-end history (import, provenance, recent runs, append): "
              f"{appends(url, args.out, args.runs, args.cases, args.appends)}")
    return 0


#: What the bench can time, in its order.
STEPS = ("ingest", "changes", "page", "append")


def page(url: str, out: Path) -> None:
    """``history page`` of the whole history, a fresh process, into OUT/site: its time, its CPU-seconds (its
    worker processes' included) and the largest resident set of any of its processes."""
    site = out / "site"
    shutil.rmtree(site, ignore_errors=True)
    before = load()
    seconds, cpu_s, resident_mib, last = measured([sys.executable, "-m", "gpuperf", "history", "--history", url,
                                                   "page", "--out", str(site)])
    size = sum(path.stat().st_size for path in site.rglob("*") if path.is_file()) / 2**20
    print(f"history page (a fresh process, the whole history): {seconds:.1f} s, {resident_mib:.0f} MiB resident at "
          f"most, {cpu_s:.1f} CPU-seconds over {os.cpu_count()} cores (load {before} before, {load()} after); the "
          f"site {size:.0f} MiB: {last}", flush=True)


def ingest(args: argparse.Namespace, database: Path, url: str) -> None:
    if not args.history:  # a --history URL names an empty database, left as it is
        for suffix in ("", "-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
    folder = args.out / "files"
    if args.reuse_files and len(list(folder.glob("run-*.json"))) == args.runs:
        print(f"files: reusing {args.runs} results files in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
        if args.fleet:
            written = write_fleet_files(folder, args.runs, args.step_every)
        else:
            written = write_files(folder, args.runs, args.cases, args.step_every)
        print(f"files: {args.runs} results files of {args.cases} records written in {written:.1f} s (not timed "
              f"below)", flush=True)
    before_cpu_s, before_load = children_cpu_s(), load()
    ingest_s, last = timed([sys.executable, "-m", "gpuperf", "history", "--history", url, "ingest", str(folder)])
    cpu_s = children_cpu_s() - before_cpu_s
    size = f"{database.stat().st_size / 2**20:.0f} MiB" if database.exists() else url.split("@")[-1]
    print(f"ingest (python -m gpuperf history ingest, a fresh process, reading and checking every file): "
          f"{args.runs} runs × {args.cases} cases in {ingest_s:.1f} s ({size}; {cpu_s:.1f} CPU-seconds over "
          f"{os.cpu_count()} cores, load {before_load} before, {load()} after): {last}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
