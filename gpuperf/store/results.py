"""The results file format: ``results.json`` (lossless) and ``results.csv`` (flattened), written and read here.

``results.json`` is ``{"schema": 1, "run": RunInfo, "records": [Record, ...]}``; ``load_run`` is its one
reader, and it holds a file to what ``results_json_text`` writes: the schema version, every field of the
run and of each record of the type its dataclass declares (a figure is a finite number or ``null``, never a
string), a known status, a figure wherever the status is a verdict on one, and each case once per GPU (a
case recorded twice would let ``compare`` judge one copy and list the other as "only in B"). Each refusal
names the file, the record (its index and case id), the field and the fix. Files are read through
``gpuperf.store.reading`` within ``MAX_RESULTS_BYTES``.

``results.csv`` is the same data flattened, one row per case, so a spreadsheet or pandas can explain a
curve a month later without this package. Non-finite floats are written as JSON ``null`` so the file stays
strict JSON for other tools (``jq``, JavaScript).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson

from gpuperf.measure.kernel_records import Kernel
from gpuperf.untrusted import csv_text
from gpuperf.store.atomic import write_atomically
from gpuperf.store.field_checks import field_table
from gpuperf.store.field_forms import run_fault
from gpuperf.store.reading import INDENTED, MIB, InputError, load_json, read_text
from gpuperf.store.text_values import surrogate_fault
from gpuperf.store.records import Reason, Record, RunInfo, stored_reason
from gpuperf.vocabulary import Metric, Precision, Status

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
SCHEMA = 1
#: A full run of today's suite writes 0.3 MB; 32 MiB holds a hundred times that and still loads in seconds.
MAX_RESULTS_BYTES = 32 * MIB
#: Every status a record may hold.
STATUSES = frozenset(value for name, value in vars(Status).items() if name.isupper() and isinstance(value, str))
#: The figures held to a peak of the GPU (a ratio is not): their record's precision must name one.
PEAKED_METRICS = frozenset({Metric.TFLOPS, Metric.GBPS})
#: Statuses that are a verdict on a figure: a record holding one must hold the figure.
NEEDS_FIGURE = frozenset({Status.PASS, Status.IMPROVED, Status.REGRESSED, Status.UPDATED, Status.NO_BASELINE})
#: The reader's indented form; orjson writes NaN and infinities as null, NumPy scalars and arrays as numbers and
#: lists.
_ORJSON_OPTIONS = INDENTED | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
#: A dry run's records (``wiring/dry_run.py``) have no figure by design: nothing was launched.
DRY_METHOD = "dry-run"
_RERUN = "re-run the suite (pytest perf_tests) or restore the file"


class ResultsError(InputError):
    """A results file that is missing or cannot be used; the message names the file, the entry and the fix."""


# --- writing -------------------------------------------------------------------------------------------


def results_json_text(run: RunInfo, records: Iterable[Record]) -> str:
    """The ``results.json`` text: orjson's two-space indented form. A value orjson cannot write (an integer beyond
    64 bits) takes Python's writer; either way a non-finite figure is ``null``."""
    return document_text({"schema": SCHEMA, "run": run.to_dict(), "records": [record.to_dict() for record in records]})


def document_text(data: dict[str, Any]) -> str:
    """``results_json_text`` of a document already made of plain values."""
    try:
        return orjson.dumps(data, option=_ORJSON_OPTIONS, default=_json_default).decode("utf-8") + "\n"
    except TypeError:
        return json.dumps(_strict_json(data), indent=2, allow_nan=False, default=_json_default) + "\n"


def results_csv_text(records: Sequence[Record], run: RunInfo | None = None) -> str:
    """One row per record. Columns: identity, ``param.<name>`` (union over records, sorted), the other
    record fields in declaration order, ``extra.<name>``, then ``run.<field>`` when ``run`` is given.

    A spreadsheet opens this file, and case ids, notes, kernel names and the branch are written by others: every
    text cell and column name is made safe by ``untrusted.csv_text`` (no control character; a leading ``=``, ``+``,
    ``-``, ``@``, tab or CR prefixed with ``'``, OWASP's rule), while numbers stay numbers."""
    rows = [_flatten_record(record) for record in records]
    run_columns: dict[str, str] = {}
    if run is not None:
        run_columns = {csv_text(f"run.{key}"): _cell(value) for key, value in _flatten("", run.to_dict()).items()}
    columns = csv_columns(records) + list(run_columns)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, **run_columns})
    return buffer.getvalue()


def csv_columns(records: Sequence[Record]) -> list[str]:
    """The record columns of ``results.csv`` in their stable order."""
    params = sorted({name for record in records for name in record.params})
    extras = sorted({key for record in records for key in _flatten("extra.", record.extra)})
    head = ["case_id", "nodeid", "family"]
    rest: list[str] = []
    for f in fields(Record):
        if f.name in head or f.name in ("params", "extra"):
            continue
        if f.name == "sm_clock_mhz":
            rest += ["sm_clock_mhz_before", "sm_clock_mhz_after"]
        else:
            rest.append(f.name)
    return head + [csv_text(f"param.{name}") for name in params] + rest + [csv_text(name) for name in extras]


def write_results(directory: Path, run: RunInfo, records: Sequence[Record],
                  text: str | None = None) -> tuple[Path, Path]:
    """``results.json`` and ``results.csv`` into ``directory``, each atomically; their paths. ``text`` is the
    ``results.json`` text when the caller has made it already (``results_json_text`` of the same run)."""
    json_path, csv_path = Path(directory) / RESULTS_JSON, Path(directory) / RESULTS_CSV
    text = results_json_text(run, records) if text is None else text
    check_written(json_path, text)
    write_atomically(json_path, text)
    write_atomically(csv_path, results_csv_text(records, run))
    return json_path, csv_path


def check_written(path: Path, text: str) -> None:
    """Refuse to write a ``results.json`` its own reader would refuse (``load_run``: the size limit, then every
    check of the module docstring), so that no run leaves a file that ``compare`` or the history cannot read."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_RESULTS_BYTES:
        raise ResultsError(f"{path}: not written: it would hold {size / MIB:.1f} MiB, more than the "
                           f"{MAX_RESULTS_BYTES // MIB} MiB a results file may hold, so its own reader would refuse "
                           "it: run the suite in parts (select them with -k or -m), each with its own results")
    try:
        check_run(path, parse_json(path, text))
    except ResultsError as exc:
        raise ResultsError(f"not written, as its reader would refuse it: {exc}") from None


# --- reading -------------------------------------------------------------------------------------------


def _checked_fields(cls: type[Record] | type[RunInfo], raw: Any, where: str) -> dict[str, Any]:
    """The fields of ``cls`` in ``raw``, each of its declared type; unknown keys are left out (a newer
    gpuperf's additions), a missing required field is named with the others missing."""
    if not isinstance(raw, dict):
        raise ResultsError(f"{where}: expected a mapping of fields, got {_short(raw)}; {_RERUN}")
    table = field_table(cls)
    missing = [name for name, required, _ in table if required and name not in raw]
    if missing:
        raise ResultsError(f"{where}: lacks the field(s) {', '.join(missing)}: the file was written by another "
                           f"gpuperf version or edited by hand; {_RERUN}")
    values: dict[str, Any] = {}
    for name, _, checks in table:
        if name in raw:
            value = raw[name]
            if not checks.value(value):
                raise ResultsError(f"{where}: field {name!r} must be {checks.words}, got {_short(value)}; {_RERUN}")
            values[name] = value
    return values


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _record(path: Path, index: int, raw: Any) -> Record:
    case = raw.get("case_id") if isinstance(raw, dict) else None
    where = f"{path}: records[{index}]" + (f" ({case})" if isinstance(case, str) else "")
    values = _checked_fields(Record, raw, where)
    if values["status"] not in STATUSES:
        raise ResultsError(f"{where}: status {values['status']!r} is not one of {', '.join(sorted(STATUSES))}; "
                           f"{_RERUN}")
    if values["value"] is None and values["status"] in NEEDS_FIGURE and values.get("method") != DRY_METHOD:
        raise ResultsError(f"{where}: status {values['status']} but no figure (value null): a verdict needs "
                           f"the figure it was given on; {_RERUN}")
    _refuse_unknown_precision(where, raw, values)
    if values.get("reason", Reason.NONE) not in Reason.ALL:
        raise ResultsError(f"{where}: reason {values['reason']!r} is not one of "
                           f"{', '.join(repr(reason) for reason in Reason.ALL)}; {_RERUN}")
    values["reason"] = stored_reason(values)
    try:
        values["kernels"] = tuple(Kernel.from_dict(kernel) for kernel in values.get("kernels") or ())
    except ValueError as exc:
        raise ResultsError(f"{where}: {exc}; {_RERUN}") from None
    if values.get("sm_clock_mhz") is not None:
        values["sm_clock_mhz"] = tuple(values["sm_clock_mhz"])
    values["clock_events"] = tuple(values.get("clock_events") or ())
    return Record(**values)


def _refuse_unknown_precision(where: str, raw: dict[str, Any], values: dict[str, Any]) -> None:
    """A figure held to a peak names the precision whose peak applies, one the peak table knows: any other
    (``fp4``, ``FP8``, ``""``) would pass every command's above-peak rule unchecked. A record of a file older than
    the field (no ``precision`` key) is held to its own ``peak``, so it must carry one. A record with no figure (an
    ``ERROR`` row the suite could not even describe fully) has nothing to hold to a peak."""
    if values["metric"] not in PEAKED_METRICS or values["value"] is None:
        return
    if "precision" in raw and values["precision"] not in Precision.ALL:
        raise ResultsError(f"{where}: precision {values['precision']!r} is not one the peak table knows "
                           f"({', '.join(Precision.ALL)}), so its figure could not be held to the GPU's peak; "
                           f"{_RERUN}")
    peak = values.get("peak")
    if "precision" not in raw and values["value"] is not None and values["metric"] == Metric.TFLOPS \
            and not (isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0):
        raise ResultsError(f"{where}: names no precision and no peak of its own, so its figure could not be held "
                           f"to the GPU's peak; {_RERUN}")


def _run_info(path: Path, raw: Any) -> RunInfo:
    values = _checked_fields(RunInfo, raw, f"{path}: run")
    name, fault = run_fault(raw)
    if fault:
        raise ResultsError(f"{path}: run: field {name!r} {fault}; {_RERUN}")
    values["flush_modes"] = tuple(values.get("flush_modes") or ())
    return RunInfo(**values)


def _refuse_other_gpus(path: Path, run: RunInfo, records: Sequence[Record]) -> None:
    """A record names the GPU model it ran on (``gpu``: its slug, or its name); a run is of one model, its
    header's. A record of another model inside it would be judged against this model's baseline and peaks."""
    ours = {"", run.gpu_slug, run.gpu_name}
    for index, record in enumerate(records):
        if record.gpu not in ours:
            raise ResultsError(f"{path}: records[{index}] ({record.case_id}): field 'gpu' is {record.gpu!r} but the "
                               f"run is on {run.gpu_slug!r}: a results file holds one GPU model (a file merged or "
                               "edited by hand, or a session over GPUs of two models: run one session per model, "
                               f"with --gpu); {_RERUN}")


def _refuse_figures_without_peak(path: Path, run: RunInfo, records: Sequence[Record]) -> None:
    """A run's header lists the GPU's compute peak of every precision (``DevicePeaks.to_dict``: null where the GPU
    has no such unit); a TFLOPS figure of a precision it does not list would pass every command's above-peak rule
    unchecked (``check.figure_anomalies``), so the file is refused at its reader."""
    peaks = run.extra.get("peaks") if isinstance(run.extra, dict) else None
    compute = peaks.get("compute_tflops") if isinstance(peaks, dict) else None
    if not isinstance(compute, dict):
        return
    for index, record in enumerate(records):
        if record.metric == Metric.TFLOPS and record.value is not None and record.precision \
                and record.precision not in compute:  # no precision: an older file's record, held to its own peak
            raise ResultsError(f"{path}: records[{index}] ({record.case_id}): precision {record.precision!r} has no "
                               f"peak in the run's header (it lists {', '.join(map(str, compute)) or 'none'}), so "
                               f"its figure could not be held to the GPU's peak: a file written by another gpuperf "
                               f"version or edited by hand; {_RERUN}")


def _refuse_repeated_cases(path: Path, records: Sequence[Record]) -> None:
    """A case is recorded once per GPU of the run; a second copy names both places."""
    first: dict[tuple[str, int | None], int] = {}
    for index, record in enumerate(records):
        key = (record.case_id, record.gpu_index)
        if key in first:
            gpu = f" on GPU {record.gpu_index}" if record.gpu_index is not None else ""
            raise ResultsError(f"{path}: case {record.case_id!r}{gpu} is recorded twice, at records[{first[key]}] "
                               f"and records[{index}]: a run records each case once, so the file was merged or "
                               f"edited by hand; {_RERUN}")
        first[key] = index


def parse_run(path: Path, text: str) -> tuple[RunInfo, list[Record]]:
    """A results file's text, checked as described in the module docstring."""
    return check_run(path, parse_json(path, text))


def parse_json(path: Path, text: str | bytes) -> Any:
    """A results file's JSON value (from its text or its bytes), strict (``reading.load_json``), not yet checked
    as a results file."""
    try:
        data = load_json(path, text, _RERUN)
    except InputError as exc:
        raise ResultsError(str(exc)) from None
    fault = surrogate_fault(data, text)
    if fault:
        raise ResultsError(f"{path}: {fault}; {_RERUN}")
    return data


def check_run(path: Path, data: Any) -> tuple[RunInfo, list[Record]]:
    """A results file's parsed JSON, checked as described in the module docstring."""
    if not isinstance(data, dict) or not isinstance(data.get("run"), dict) \
            or not isinstance(data.get("records"), list):
        hint = " (a baseline file?)" if isinstance(data, dict) and "entries" in data else ""
        raise ResultsError(f"{path}: expected an object with 'run' and 'records' as a pytest perf_tests run writes "
                           f"it; this is not a gpuperf results file{hint}: pass a results/<timestamp>/results.json")
    if data.get("schema") != SCHEMA:
        raise ResultsError(f"{path}: results schema {data.get('schema')!r} is not {SCHEMA}, the one this gpuperf "
                           "reads: read it with the gpuperf version that wrote it, or re-run the suite")
    run = _run_info(path, data["run"])
    records = [_record(path, index, raw) for index, raw in enumerate(data["records"])]
    _refuse_other_gpus(path, run, records)
    _refuse_figures_without_peak(path, run, records)
    _refuse_repeated_cases(path, records)
    return run, records


def load_run(path: str | Path) -> tuple[RunInfo, list[Record]]:
    """Read a ``results.json`` (or a results directory holding one) back into ``RunInfo`` and records."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_JSON
    try:
        text = read_text(path, MAX_RESULTS_BYTES, "a results file", _RERUN)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file; pass a results/<timestamp>/ directory or its "
                           f"{RESULTS_JSON} written by a pytest perf_tests run") from None
    except InputError as exc:
        raise ResultsError(str(exc)) from None
    return parse_run(path, text)


def refuse_repeated_runs(runs: Sequence[tuple[str, RunInfo, Sequence[Record]]]) -> None:
    """Runs to be combined or compared must be distinct: the same run given twice (one file twice, or a copy
    of it: the same header and the same records) is refused, naming both. Each run is given as how it was
    named, its header and its records."""
    for index, (given, run, records) in enumerate(runs):
        for earlier, earlier_run, earlier_records in runs[:index]:
            if run == earlier_run and list(records) == list(earlier_records):
                raise ResultsError(f"{earlier} and {given} are the same run (GPU {run.gpu_name or run.gpu_slug}, "
                                   f"started {run.started or '?'}): each run counts once; pass each run's "
                                   "results once")


# --- helpers -------------------------------------------------------------------------------------------


def _flatten_record(record: Record) -> dict[str, str]:
    row: dict[str, str] = {}
    for key, value in record.to_dict().items():
        if key == "params":
            row.update({csv_text(f"param.{name}"): _cell(v) for name, v in value.items()})
        elif key == "extra":
            row.update({csv_text(name): _cell(v) for name, v in _flatten("extra.", value).items()})
        elif key == "kernels":
            row[key] = csv_text("; ".join(kernel.describe() for kernel in record.kernels))
        elif key == "sm_clock_mhz":
            before, after = value if value else (None, None)
            row["sm_clock_mhz_before"], row["sm_clock_mhz_after"] = _cell(before), _cell(after)
        else:
            row[key] = _cell(value)
    return row


def _flatten(prefix: str, value: Any) -> dict[str, Any]:
    """Nested dicts → dotted keys (``extra.peaks.memory_gbps``); lists and scalars stay values."""
    if not isinstance(value, dict):
        return {prefix.rstrip("."): value}
    flat: dict[str, Any] = {}
    for key, item in value.items():
        flat.update(_flatten(f"{prefix}{key}.", item))
    return flat


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, (list, tuple)):
        joined = ";".join(_cell(item) for item in value)
        return joined if not any(isinstance(item, str) for item in value) else csv_text(joined)
    if isinstance(value, (int, float)):
        return str(value)
    return csv_text(str(value))


def _strict_json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(item) for item in value]
    return value


def _json_default(value: Any) -> Any:
    """NumPy scalars and arrays that reach ``Record.extra`` become plain numbers and lists."""
    if hasattr(value, "tolist"):
        return _strict_json(value.tolist())
    return str(value)
