"""A results document (``{"run": …, "records": […]}``, as ``results.json`` holds it) → the history's rows. Pure.

A run's id is the SHA-256 of its ``results.json`` text, so the same run reaches the history once however often
it is appended or ingested: the session that measured it appends the very text it writes to that file, and
ingesting the file later finds the id taken. A document that never was a file (a bisection step) is identified
by its canonical JSON (``canonical_text``). Record
columns are taken from the record dict by key (``RECORD_COLUMNS``): a key absent from an older file is ``NULL``;
the whole document is kept with the run, so fields added to results files later are never lost.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

#: ``run.extra`` key under which a session records where its figures came from (``Provenance``).
PROVENANCE = "provenance"

#: What produced a run: a suite run, a baseline update, one step of a bisection.
KIND_RUN = "run"
KIND_UPDATE = "update-baselines"
KIND_BISECT = "bisect"
KIND_AB = "ab"  # a side of an A/B run (``python -m gpuperf ab``)

#: Record column → the results-file record key it is read from.
RECORD_COLUMNS: dict[str, str] = {
    "case_id": "case_id", "value": "value", "unit": "unit", "spread": "rel_iqr", "samples": "samples",
    "method": "method", "flush": "flush", "status": "status", "note": "note", "gpu_index": "gpu_index",
    "cycles_per_call": "cycles_per_call", "sm_clock_mhz": "sm_clock_mhz", "value_at_max_clock": "value_at_max_clock",
    "cycles_spread": "cycles_rel_iqr",
}


class HistoryInputError(ValueError):
    """A file or document that cannot go into the history; the message names the file and the fix."""


@dataclass(frozen=True)
class Provenance:
    """Where a run's figures came from, beyond the GPU: what was measured, by which job, against what."""

    kind: str = KIND_RUN
    git_commit: str | None = None
    git_dirty: bool | None = None
    branch: str | None = None
    ci_job: str | None = None
    options: Mapping[str, Any] | None = None
    baseline_digest: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "git_commit": self.git_commit, "git_dirty": self.git_dirty,
                "branch": self.branch, "ci_job": self.ci_job, "options": dict(self.options or {}),
                "baseline_digest": self.baseline_digest}


def run_id(text: str | bytes) -> str:
    """The run's identity: SHA-256 of its results-file text (or of that text's bytes, the same)."""
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode("utf-8")).hexdigest()


def canonical_text(document: Mapping[str, Any]) -> str:
    """The text of a document that has no file: its JSON with sorted keys and no spacing."""
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def host_of(run: Mapping[str, Any]) -> str:
    """Which physical GPU: its UUID, else its serial, else its PCI bus id, else ``unknown``."""
    extra = run.get("extra") or {}
    for key in ("uuid", "serial", "pci_bus_id"):
        value = extra.get(key)
        if value:
            return str(value)
    return "unknown"


#: The pytest plugin that plants a slowdown in the suite's kernels (``tools/gpu_host/slowdown.py``), by the names a
#: run records it under: its module now, and ``tools.slowdown`` in the runs made before tools/ was sorted by role.
PLANTED_SLOWDOWN = ("tools.gpu_host.slowdown", "tools.slowdown")


def experiment(options: Any) -> str:
    """Why a run is an experiment rather than one of the fleet's own, from its provenance's ``options`` (the
    ``runs.options`` JSON, or its dict), else "": it was judged against a baseline named by ``--baseline-dir``
    (the sealed check's shifted copy, ``tools/gpu_host/shifted_baseline.py``; a fleet's own folder of baselines is set
    by the ``gpuperf_baselines`` ini option, which a run does not list among its arguments), or it ran with a
    planted slowdown (``-p tools.gpu_host.slowdown``). Its figures are real; its verdicts are not the fleet's."""
    if isinstance(options, (str, bytes)):
        try:
            options = orjson.loads(options)
        except orjson.JSONDecodeError:
            return ""
    args = options.get("args") if isinstance(options, Mapping) else None
    if not isinstance(args, list):
        return ""
    args = [str(arg) for arg in args]
    for index, arg in enumerate(args):
        if arg == "--baseline-dir" or arg.startswith("--baseline-dir="):
            folder = arg.partition("=")[2] or (args[index + 1] if index + 1 < len(args) else "")
            return f"judged against the baseline in {folder} (--baseline-dir), not the fleet's"
        plugin = args[index + 1] if arg == "-p" and index + 1 < len(args) else arg[2:] if arg.startswith("-p") else ""
        if plugin in PLANTED_SLOWDOWN:
            return f"a planted slowdown (-p {plugin})"
    return ""


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def run_row(document: Mapping[str, Any], source: str, text: str | bytes,
            appended: datetime | None = None, identity: str | None = None) -> dict[str, Any]:
    """The ``runs`` row of a document whose results-file text is ``text`` (its ``pk`` is the database's);
    ``identity``: that text's ``run_id`` when it is known already."""
    run = document["run"]
    extra = run.get("extra") or {}
    provenance = extra.get(PROVENANCE) or {}
    return {
        "run_id": identity or run_id(text), "kind": str(provenance.get("kind") or KIND_RUN),
        "started": str(run.get("started") or ""), "started_utc": started_instant(run.get("started")),
        "source": source,
        "appended": (appended or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        "gpu_model": str(run.get("gpu_name") or ""), "gpu_slug": str(run.get("gpu_slug") or ""),
        "host": host_of(run), "gpu_uuid": _text(extra.get("uuid")), "gpu_serial": _text(extra.get("serial")),
        "pci_bus_id": _text(extra.get("pci_bus_id")),
        **{key: _text(run.get(key)) for key in ("driver", "cuda_runtime", "cublas", "cupy")},
        "git_commit": _text(provenance.get("git_commit")), "git_dirty": provenance.get("git_dirty"),
        "branch": _text(provenance.get("branch")), "ci_job": _text(provenance.get("ci_job")),
        "options": json.dumps(provenance.get("options") or {}, sort_keys=True),
        "baseline_digest": _text(provenance.get("baseline_digest")),
        "run_json": _sorted_json(run),
    }


def _sorted_json(value: Any) -> str:
    """``value``'s JSON text with sorted keys: orjson's, or Python's for what orjson cannot write (an integer
    beyond 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except TypeError:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _number(value: Any) -> float | None:
    """A finite number; a list (a clock read before and after) gives the mean of its numbers."""
    if type(value) is float:  # the common case first: ingest calls this a million times
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        numbers = [float(item) for item in value if isinstance(item, (int, float)) and not isinstance(item, bool)]
        return sum(numbers) / len(numbers) if numbers else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _integer(value: Any) -> int | None:
    if type(value) is int:
        return value
    number = _number(value)
    return None if number is None else int(number)


def _optional_text(value: Any) -> str | None:
    return value if type(value) is str else (None if value is None else str(value))


def kernel_names(record: Mapping[str, Any]) -> str:
    """What one call launched, as ``name + name``; empty when the kernels were not traced."""
    kernels = record.get("kernels") or []
    return " + ".join([str(kernel.get("name", "?")) for kernel in kernels if isinstance(kernel, dict)])


def _kernel_names_column(column: list[Any]) -> list[str]:
    """``kernel_names`` of each record, its ``kernels`` given as a column: when every kernel is an object with a
    text ``"name"`` (as a suite writes them) the names are joined without a Python step per kernel, else record by
    record. Each text is interned (``_interned``)."""
    try:
        return _interned([" + ".join(map(_NAME, kernels)) if kernels else "" for kernels in column])
    except (KeyError, TypeError, IndexError):
        return _interned([kernel_names({"kernels": kernels}) for kernels in column])


_NAME = itemgetter("name")

#: The parts of a kernel's identity beside its name that the gate compares (``kernel_records.describe_change``): a
#: digest of its whole symbol, of the code the suite compiled, and the configuration it was compiled with.
IDENTITY_KEYS = ("symbol", "code", "config")


def kernel_identity(kernels: Any) -> str | None:
    """What one call launched as the gate tells kernels apart, ``[[name, symbol, code, config], …]`` as JSON;
    ``None`` when no kernel has more than a name (the ``kernels`` column holds the names)."""
    if not kernels or not isinstance(kernels, list):
        return None
    kept = [kernel for kernel in kernels if isinstance(kernel, dict)]
    if not any(kernel.get(key) for kernel in kept for key in IDENTITY_KEYS):
        return None
    return orjson.dumps([[str(kernel.get("name", "?")), *(str(kernel.get(key) or "") for key in IDENTITY_KEYS)]
                         for kernel in kept]).decode("utf-8")


def _interned(texts: list[Any]) -> list[str]:
    """``texts`` as text, each one the interpreter's one copy of it: a backfill's worker hands a few runs at a
    time to the writing process, and a case id or a kernel's name that those runs share is then sent once."""
    try:
        return list(map(sys.intern, texts))
    except TypeError:  # a value that is not exactly text
        return [sys.intern(str(text)) for text in texts]


#: The ``records`` table's columns in the order its rows are written (``run_pk`` first, set when appended).
RECORD_VALUE_COLUMNS = ("run_pk", "case_id", "value", "unit", "spread", "samples", "method", "flush", "kernels",
                        "kernel_identity", "status", "note", "gpu_index", "cycles_per_call", "sm_clock_mhz", "value_at_max_clock",
                        "cycles_spread", "basis", "position", "series_pk")


def _figures(column: list[Any]) -> list[float | None]:
    return [value if type(value) is float and value - value == 0 else None if value is None else _number(value)
            for value in column]


def _integers(column: list[Any]) -> list[int | None]:
    return [value if type(value) is int else _integer(value) for value in column]


def _texts(column: list[Any]) -> list[str | None]:
    return [value if type(value) is str else _optional_text(value) for value in column]


#: How each ``records`` column's values are made from the results-file records' values of its key.
_CONVERT: dict[str, Callable[[list[Any]], list[Any]]] = {
    "case_id": _interned, "value": _figures, "unit": _texts,
    "spread": _figures, "samples": _integers, "method": _texts, "flush": _texts, "status": _texts, "note": _texts,
    "gpu_index": _integers, "cycles_per_call": _figures, "sm_clock_mhz": _figures, "value_at_max_clock": _figures,
    "cycles_spread": _figures,
}


#: Where ``records_columns`` puts the columns a record's series is known by.
CASE_COLUMN = RECORD_VALUE_COLUMNS.index("case_id") - 1
METHOD_COLUMN = RECORD_VALUE_COLUMNS.index("method") - 1


#: What a record's basis (``gate.own_basis``) is decided from, beside its figure at max clock.
BASIS_KEYS = ("clock_bound", "call_clock_mhz", "max_clock_mhz")
#: The results-file record keys the ``records`` columns are made from.
RECORD_KEYS = (*RECORD_COLUMNS.values(), "kernels", *BASIS_KEYS)


def records_columns(records: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """The ``records`` columns of a run's results-file records, ``case_id`` to ``position`` (the run's and the
    series' numbers are the database's), each read from its ``RECORD_COLUMNS`` key and made a column at a time
    (a backfill makes a million rows of them); the figure at max clock and the basis from ``bases``."""
    keys = _columns(records, RECORD_KEYS)
    at_max_clock, basis = bases(keys["clock_bound"], keys["value_at_max_clock"], keys["call_clock_mhz"],
                                keys["max_clock_mhz"])
    made: dict[str, list[Any]] = {"kernels": _kernel_names_column(keys["kernels"]),
                                  "kernel_identity": list(map(kernel_identity, keys["kernels"])),
                                  "value_at_max_clock": at_max_clock, "basis": basis}
    columns = [made[name] if name in made
               else _CONVERT[name](keys[RECORD_COLUMNS[name]]) if name in _CONVERT else keys[RECORD_COLUMNS[name]]
               for name in RECORD_VALUE_COLUMNS[1:-2]]
    return [*columns, list(range(len(records)))]


def _columns(records: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, list[Any]]:
    """The values of ``names`` over ``records``, a list per name (``None`` where a record lacks one). The names
    the first record holds are taken apart by ``itemgetter`` and ``zip``, without a Python step per value, when
    every record holds them (as a suite writes its records); any other name, or all of them when the records
    differ, is read record by record."""
    held = [name for name in names if name in records[0]] if records else []
    columns: dict[str, list[Any]] = {}
    if len(held) > 1:
        try:
            columns = dict(zip(held, map(list, zip(*map(itemgetter(*held), records)))))
        except KeyError:
            columns = {}
    return {name: columns[name] if name in columns else [record.get(name) for record in records] for name in names}


def bases(clock_bound: Sequence[Any], at_max_clock: Sequence[Any], call_clock_mhz: Sequence[Any],
          max_clock_mhz: Sequence[Any]) -> tuple[list[float | None], list[str]]:
    """Each record's figure at max clock as the history keeps it (``gate.figure_at_max_clock``: none for a
    memory-bound case) and the basis it is judged on (``gate.own_basis``), from those keys' values."""
    from gpuperf.verdict.gate import figure_at_max_clock, own_basis

    flags = [flag if type(flag) is bool else None for flag in clock_bound]
    kept = [figure_at_max_clock(flag, figure) for flag, figure in zip(flags, _figures(list(at_max_clock)))]
    return kept, [own_basis(flag, figure, clock, top) for flag, figure, clock, top
                  in zip(flags, kept, _figures(list(call_clock_mhz)), _figures(list(max_clock_mhz)))]


def started_instant(started: Any) -> str | None:
    """The instant a run's ``started`` names, in UTC, as text that sorts as the instants do
    (``2026-11-30T12:49:51.000000+00:00``): the history orders runs and applies ``--since`` by it, so a start time
    written with another offset sorts where it happened. A time without an offset is taken as UTC (the suite
    writes UTC, with its offset); ``None`` when it is not a timestamp."""
    if not isinstance(started, str):
        return None
    text = started[:-1] + "+00:00" if started[-1:] in ("Z", "z") else started
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def check_document(document: Any, where: str) -> dict[str, Any]:
    """The document if it has a run and records of the results-file shape, else a ``HistoryInputError``."""
    if not isinstance(document, dict) or not isinstance(document.get("run"), dict) \
            or not isinstance(document.get("records"), list):
        raise HistoryInputError(f"{where}: not a gpuperf results file (expected an object with 'run' and "
                                "'records', as pytest perf_tests writes results/<timestamp>/results.json)")
    run = document["run"]
    if not run.get("gpu_slug") or not run.get("started"):
        raise HistoryInputError(f"{where}: its run has no gpu_slug or started time; it was edited by hand or "
                                "written by another tool: re-run the suite to get a complete results file")
    if started_instant(run["started"]) is None:
        raise HistoryInputError(f"{where}: its run's started {str(run['started'])[:40]!r} is not a timestamp (ISO "
                                "8601, e.g. 2026-11-30T12:49:51+00:00), so the history cannot place the run in "
                                "order; fix it by hand or re-run the suite")
    bad = [index for index, record in enumerate(document["records"])
           if not isinstance(record, dict) or not isinstance(record.get("case_id"), str)]
    if bad:
        raise HistoryInputError(f"{where}: record {bad[0]} has no case_id; re-run the suite to get a complete "
                                "results file")
    return document


def read_results_bytes(path: Path) -> bytes:
    """A results file's bytes (its UTF-8 text), within the results format's size limit."""
    from gpuperf.store.reading import InputError, read_bytes
    from gpuperf.store.results import MAX_RESULTS_BYTES

    try:
        return read_bytes(path, MAX_RESULTS_BYTES, "a results file")
    except OSError as exc:
        raise HistoryInputError(f"{path}: cannot be read ({exc.strerror or exc}); restore it, or leave it out with "
                                "--exclude") from None
    except InputError as exc:
        raise HistoryInputError(str(exc)) from None


def parse_results_document(path: Path, raw: bytes) -> dict[str, Any]:
    """A results file's document from its bytes, checked by the results format's own reader, with every key
    kept (the history stores the document, every key of it, not the records the reader makes of it)."""
    from gpuperf.store.reading import InputError
    from gpuperf.store.results import check_run, parse_json

    try:
        data = parse_json(path, raw)
        check_run(path, data)
    except InputError as exc:
        raise HistoryInputError(str(exc)) from None
    return check_document(data, str(path))


def read_results_document(path: Path) -> tuple[dict[str, Any], bytes]:
    """One ``results.json`` as its document and its bytes (the one reader of results files for the history)."""
    raw = read_results_bytes(path)
    return parse_results_document(path, raw), raw


_NAME_RESULTS = "name results/ directories, results.json files or folders of them (evidence/fleet/)"


#: The file ``python -m gpuperf ab`` writes in its out folder (``results/ab-<timestamp>/``) beside its sides' runs.
AB_RECORD = "ab.json"


def results_files(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """The paths named and the ``*.json`` entries found under the folders named (but folders), in a stable
    order, and the files of A/B runs left out of those folders: an A/B run's out folder (the one holding its
    ``ab.json``) holds that record, no results file, and its two sides' runs, a base and a head measured in
    turns, which are no runs of the suite (``ab --history`` appends them, as kind ``ab``). Whatever is not a
    regular file among them (a FIFO, a device, a link in a loop or to nothing, a file that cannot be read) is
    left to the results reader, which refuses it, naming what it is; a path that is not there, or a folder with
    no ``*.json`` under it, is an error."""
    found: list[Path] = []
    left_out: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(item for item in path.rglob("*.json") if not item.is_dir())
            if not inside:
                raise HistoryInputError(f"{path}: a folder with no *.json file under it; {_NAME_RESULTS}")
            ab_runs = {item.parent for item in inside if item.name == AB_RECORD}
            for item in inside:
                (left_out if ab_runs.intersection(item.parents) else found).append(item)
        elif os.path.lexists(path):
            found.append(path)
        else:
            raise HistoryInputError(f"{path}: no such file or directory; {_NAME_RESULTS}")
    return found, left_out


@dataclass(frozen=True)
class RunSummary:
    """A run as the history's questions show it."""

    pk: int
    run_id: str
    kind: str
    started: str
    gpu_slug: str
    host: str
    git_commit: str | None
    git_dirty: bool | None
    branch: str | None
    driver: str | None
    cuda_runtime: str | None
    cublas: str | None
    cupy: str | None

    @property
    def versions(self) -> str:
        """Driver / CUDA / cuBLAS / CuPy."""
        return " / ".join(value or "?" for value in (self.driver, self.cuda_runtime, self.cublas, self.cupy))

    @property
    def commit(self) -> str:
        if not self.git_commit:
            return "?"
        return self.git_commit[:10] + ("+dirty" if self.git_dirty else "")
