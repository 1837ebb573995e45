"""The files a run leaves behind, and the figures ``baseline diff``, ``compare`` and ``plot`` read back.

``write_run`` writes ``results.json`` and ``results.csv`` (their format is ``gpuperf.store.results``) and
``summary.md``, what a person reads on a CI job page: the GPU and software header, counts per status,
failing cases first. ``load_figures`` is the one reader of a run *or* a baseline file for ``baseline
diff``, ``compare`` and ``plot``. Nothing here imports CuPy.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuperf import untrusted
from gpuperf.output import table
from gpuperf.trend import summary as trend_summary
from gpuperf.trend.summary import SummaryHistory
from gpuperf.store.atomic import write_atomically
from gpuperf.store.os_errors import describe_os_problem
from gpuperf.store.reading import file_kind
from gpuperf.store.baseline import BaselineFile, Entry, load_baseline, versions_of
from gpuperf.store.records import Record, RunInfo
from gpuperf.store.results import (RESULTS_JSON, ResultsError, load_run, results_csv_text, results_json_text,
                                   write_results)
from gpuperf.verdict.check import entry_from_record
from gpuperf.verdict.gate import FLAGGED, valid_figure
from gpuperf.output.diff import MULTI_GPU
from gpuperf.output.table import Column
from gpuperf.vocabulary import Family, Status

SUMMARY_MD = "summary.md"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"

#: GitHub rejects a step summary above 1 MiB; past this the per-family tables are left to the artifact.
STEP_SUMMARY_LIMIT = 1_000_000

#: The columns of summary.md's tables: the terminal's but the spread (the Markdown shows icons instead).
TABLE_COLUMNS: tuple[Column[Record], ...] = (table.CASE, table.METRIC, table.MEASURED, table.CLOCK, table.AT_MAX_CLOCK,
                                             table.BASELINE, table.DELTA, table.PEAK, table.STATUS, table.NOTE)


@dataclass(frozen=True)
class RunFiles:
    """Where ``write_run`` put things. ``step_summary`` is ``$GITHUB_STEP_SUMMARY`` when it was set."""

    directory: Path
    results_json: Path
    results_csv: Path
    summary_md: Path
    step_summary: Path | None = None
    #: The text of ``results.json``: the history appends the run with it, so its run id is the file's.
    results_text: str = ""
    #: Why ``$GITHUB_STEP_SUMMARY`` could not be appended to (empty when it was, or is not set): one line.
    step_summary_problem: str = ""


# --- writing -------------------------------------------------------------------------------------------


def timestamped_dir(root: str | Path = "results", now: datetime | None = None) -> Path:
    """Create and return ``<root>/<YYYYmmdd-HHMMSS>/`` (UTC).

    Two runs that start in the same second get ``…-HHMMSS-2``, ``-3``, …: the directory is claimed with an
    exclusive ``mkdir``, so concurrent sessions never share one. The names still sort chronologically.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 10_000):
        candidate = root / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise ResultsError(f"{root}: every results directory name for {stamp} is taken; clean up {root}/")


def write_run(directory: Path, run: RunInfo, records: Sequence[Record],
              history: SummaryHistory | None = None) -> RunFiles:
    """Write ``results.json``, ``results.csv`` and ``summary.md`` into ``directory`` (created if needed).

    When ``$GITHUB_STEP_SUMMARY`` is set the summary is also appended there, for the job page; the copy
    in ``directory`` stays so the uploaded artifact is self-contained.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    results_text = results_json_text(run, records)
    json_path, csv_path = write_results(directory, run, records, results_text)
    summary_path = directory / SUMMARY_MD
    text = summary_markdown(run, records, results_dir=directory, history=history)
    write_atomically(summary_path, text)
    step, problem = _step_summary_path(os.environ), ""
    if step is not None:
        problem = append_step_summary(_fit_step_summary(text, run, records, directory, history), step, summary_path)
    return RunFiles(directory, json_path, csv_path, summary_path, None if problem else step, results_text, problem)


def run_texts(run: RunInfo, records: Sequence[Record], directory: Path | None = None,
              history: SummaryHistory | None = None) -> tuple[str, str, str]:
    """What ``write_run`` writes, made but not written: ``results.json``'s, ``results.csv``'s and ``summary.md``'s
    text (so a session can try a record in them before it counts on writing it)."""
    return (results_json_text(run, records), results_csv_text(records, run),
            summary_markdown(run, records, results_dir=directory, history=history))


def write_summary_markdown(text: str, directory: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Append ``text`` to ``$GITHUB_STEP_SUMMARY`` when set (and a file that can be appended to:
    ``append_step_summary``), else write ``<directory>/summary.md``.

    Appending is what GitHub expects: several steps (or several pytest sessions of one step) each add
    their part to the job page. Returns the file written.
    """
    step = _step_summary_path(os.environ if environ is None else environ)
    target = Path(directory) / SUMMARY_MD
    if step is None:
        write_atomically(target, text)
        return target
    if append_step_summary(text, step, target):  # not a file that can be appended to: the summary goes beside
        write_atomically(target, text)
        return target
    return step


def append_step_summary(text: str, step: Path, kept: Path) -> str:
    """Append ``text`` to ``step`` (``$GITHUB_STEP_SUMMARY``); ``""``, or why it could not be (one line naming
    ``kept``, the summary.md that holds the text all the same). Only a regular file, existing or new, is appended
    to: a folder, a FIFO (which would block until a reader came), a device such as /dev/full is not."""
    what = f"${STEP_SUMMARY_ENV} {step}"
    try:
        descriptor = os.open(step, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        kinds = {errno.EISDIR: "a folder", errno.ENXIO: "a FIFO (named pipe) that nobody reads"}
        if exc.errno in kinds:
            return f"{what}: is {kinds[exc.errno]}, not a file; the summary is in {kept}"
        return f"{what}: {describe_os_problem(OSError(exc.errno, exc.strerror))}; the summary is in {kept}"
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            return f"{what}: is {file_kind(mode)}, not a file; the summary is in {kept}"
        try:
            handle.write(text if text.endswith("\n") else text + "\n")
            handle.flush()
        except OSError as exc:
            return f"{what}: {describe_os_problem(OSError(exc.errno, exc.strerror))}; the summary is in {kept}"
    return ""


@dataclass(frozen=True)
class Figures:
    """The figures of one results run or one baseline file, by case id: what ``baseline diff``, ``compare``
    and ``plot`` read (``load_figures``).

    ``records`` is what was measured (a baseline's entries become records holding the figure, its spread,
    samples, flush and method, with status ``UPDATED``). ``entries`` is what another figure is judged against:
    a run's records with a valid figure as ``--update-baselines`` would record them (``check.entry_from_record``),
    or a baseline's own entries, hand-set tolerances included. Exactly one of ``run`` and ``baseline`` is set.
    """

    path: Path
    records: dict[str, Record]
    entries: dict[str, Entry]
    run: RunInfo | None = None
    baseline: BaselineFile | None = None

    @property
    def gpu(self) -> str:
        if self.run is not None:
            return self.run.gpu_name
        return str(self.baseline.header.get("gpu", "")) if self.baseline is not None else ""

    @property
    def gpu_uuid(self) -> str:
        """The board a run was measured on (NVML's ``GPU-…`` UUID), ``""`` for a baseline or a run that does not say."""
        uuid = self.run.extra.get("uuid") if self.run is not None else None
        return uuid if isinstance(uuid, str) else ""

    @property
    def gpu_slug(self) -> str:
        """The GPU model the figures were measured on (``nvidia-h200``), ``""`` when the file does not say."""
        if self.run is not None:
            return self.run.gpu_slug
        return str(self.baseline.header.get("slug", "")) if self.baseline is not None else ""

    @property
    def peaks(self) -> dict[str, Any] | None:
        if self.run is not None:
            peaks = self.run.extra.get("peaks")
        else:
            peaks = self.baseline.header.get("peaks") if self.baseline is not None else None
        return peaks if isinstance(peaks, dict) else None

    @property
    def versions(self) -> dict[str, str]:
        """Driver, CUDA runtime and cuBLAS (``baseline.versions_of``) that the figures were measured with."""
        if self.run is not None:
            return self.run.versions
        return versions_of(self.baseline.header if self.baseline is not None else {})


def load_figures(path: str | Path) -> Figures:
    """The figures of a ``baselines/*.yaml``, a ``results.json`` or a ``results/<timestamp>/`` directory."""
    path = Path(path)
    if path.is_dir() or path.suffix == ".json":
        run, records = load_run(path)
        by_case = _by_case(records)
        entries = {case: entry_from_record(r) for case, r in by_case.items() if valid_figure(r.value)}
        return Figures(path, by_case, entries, run=run)
    if path.suffix in (".yaml", ".yml"):
        baseline = load_baseline(path)
        if baseline is None:
            raise ResultsError(f"{path}: no such baseline file; check the path (baselines/<gpu-slug>.yaml, see "
                               "python -m gpuperf device --slug) or record it with pytest perf_tests "
                               "--update-baselines")
        measured = {case: record_from_entry(case, entry) for case, entry in baseline.entries.items()}
        return Figures(path, measured, dict(baseline.entries), baseline=baseline)
    if not path.exists():
        raise ResultsError(f"{path}: no such file or directory; pass a baselines/*.yaml, a "
                           f"results/<timestamp>/ directory or its {RESULTS_JSON}")
    raise ResultsError(f"{path}: not a baseline (.yaml) or results file (.json or a results directory); pass "
                       "one of those")


def record_from_entry(case_id: str, entry: Entry) -> Record:
    """A baseline entry as the record of what was measured (``check.entry_from_record`` the other way)."""
    return Record(case_id=case_id, nodeid=case_id, family=entry.family, params={}, metric=entry.metric,
                  value=entry.value, unit=entry.unit, status=Status.UPDATED, flops=entry.flops, bytes=entry.bytes,
                  rel_iqr=entry.spread, samples=entry.samples, method=entry.method, flush=entry.flush,
                  kernel=entry.kernel, precision=entry.precision, shape=dict(entry.shape))


def _by_case(records: Sequence[Record]) -> dict[str, Record]:
    """Records by case id. A run over several GPUs (``--gpu all``) holds one record of a case per GPU: those
    are told apart as ``<case id> @ GPU <index>``, so two such runs compare GPU by GPU and none is lost."""
    seen = Counter(r.case_id for r in records)
    return {r.case_id if seen[r.case_id] == 1 else f"{r.case_id}{MULTI_GPU}{r.gpu_index}": r for r in records}


# --- Markdown ------------------------------------------------------------------------------------------


def summary_markdown(run: RunInfo, records: Sequence[Record], results_dir: Path | None = None,
                     per_family: bool = True, history: SummaryHistory | None = None) -> str:
    """The CI job-page summary: header, status counts, failing cases, flagged cases, all cases per family.

    Failing is ``Status.FAILING`` and flagged ``gate.FLAGGED``, the gate's own sets, so every status that
    needs a person (``ERROR``, ``NOT_COMPARABLE``, ``NOT_RECORDED``, …) is listed in one section or the other.
    """
    failing = [r for r in records if r.status in Status.FAILING]
    flagged = [r for r in records if r.status in FLAGGED]
    lines = [f"## gpuperf: {untrusted.markdown_text(run.gpu_name or 'unknown GPU')} — {_verdict(records, failing)}", ""]
    lines += _header_lines(run, records, results_dir)
    lines += ["", _counts_line(records), ""]
    if failing:
        lines += [f"### Failing ({len(failing)})", ""] + _table(table.by_status(failing)) + [""]
    if flagged:
        lines += [f"### Flagged ({len(flagged)})", ""] + _table(table.by_status(flagged)) + [""]
    lines += trend_summary.history_lines(records, history)
    if per_family and records:
        lines += ["### All cases", ""]
        families: dict[str, list[Record]] = {}
        for record in records:
            families.setdefault(record.family or Family.OTHER, []).append(record)
        for family in sorted(families):
            group = families[family]
            bad = sum(r.status in Status.FAILING for r in group)
            title = f"{family}: {len(group)} case{'s' if len(group) != 1 else ''}"
            title += f", {bad} failing" if bad else ""
            lines += ["<details>", f"<summary>{table.markdown_cell(title)}</summary>", ""]
            lines += _table(sorted(group, key=lambda r: r.case_id)) + ["", "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"


def _verdict(records: Sequence[Record], failing: Sequence[Record]) -> str:
    if not records:
        return "no cases recorded"
    if failing:
        return f"❌ {len(failing)} of {len(records)} cases failing"
    return f"✅ {len(records)} cases, none failing"


def _header_lines(run: RunInfo, records: Sequence[Record], results_dir: Path | None) -> list[str]:
    cc = f" (compute capability {run.compute_capability})" if run.compute_capability else ""
    rows = [
        ("GPU", f"{run.gpu_name}{cc}"),
        ("driver / CUDA / cuBLAS / CuPy", " / ".join(v or "?" for v in
                                                     (run.driver, run.cuda_runtime, run.cublas, run.cupy))),
        ("clocks", _clocks_text(run, records)),
        ("flush", ", ".join(run.flush_modes) or "?"),
        ("started", run.started or "?"),
    ]
    peaks = table.peaks_line(run.extra.get("peaks"))
    if peaks:
        rows.append(("peaks", peaks))
    cells = [(name, untrusted.markdown_text(value)) for name, value in rows]
    if results_dir is not None:
        cells.append(("results", untrusted.markdown_code(str(results_dir))))
    return ["| | |", "| --- | --- |"] + [f"| {name} | {untrusted.table_cell(value)} |" for name, value in cells]


def _clocks_text(run: RunInfo, records: Sequence[Record]) -> str:
    parts = []
    if run.sm_clock_max_mhz:
        parts.append(f"SM max {run.sm_clock_max_mhz} MHz")
    if run.mem_clock_mhz:
        parts.append(f"memory {run.mem_clock_mhz} MHz")
    seen = [mhz for r in records if r.sm_clock_mhz for mhz in r.sm_clock_mhz if mhz]
    if seen:
        parts.append(f"SM seen {min(seen)}–{max(seen)} MHz")
    unreliable = sum(not r.reliable for r in records)
    if unreliable:
        parts.append(f"{unreliable} case{'s' if unreliable != 1 else ''} throttled or shared")
    return "; ".join(parts) or "?"


def _counts_line(records: Sequence[Record]) -> str:
    counts = table.count_statuses(r.status for r in records)
    return " · ".join(f"{table.STATUS_ICONS.get(status, '')} **{status}** {count}".strip()
                      for status, count in counts) or "no cases"


def _table(records: Sequence[Record]) -> list[str]:
    return table.render_markdown(TABLE_COLUMNS, records).splitlines()


def _fit_step_summary(text: str, run: RunInfo, records: Sequence[Record], directory: Path,
                      history: SummaryHistory | None = None) -> str:
    if len(text.encode("utf-8")) <= STEP_SUMMARY_LIMIT:
        return text
    short = summary_markdown(run, records, results_dir=directory, per_family=False, history=history)
    return short + f"\nThe per-family tables are left out here (GitHub's 1 MiB limit); see `{SUMMARY_MD}` " \
                   "in the uploaded results artifact.\n"


# --- helpers -------------------------------------------------------------------------------------------


def _step_summary_path(environ: Mapping[str, str]) -> Path | None:
    value = environ.get(STEP_SUMMARY_ENV, "").strip()
    return Path(value) if value else None
