"""Nothing a test measures can end the session: every stage a case's record passes through, from the check in the
test to the files written at the run's end, runs contained here. A failure at any stage (a kernel record of an
unexpected form, a NaN, a type the code did not foresee) becomes that case's ``ERROR`` row with one line naming the
stage and the cause; the session goes on and every other case is still measured, judged and written.

Contained are ``Exception``s, never ``KeyboardInterrupt``, ``SystemExit`` or pytest's outcomes (skip, fail, exit).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from gpuperf.store.os_errors import describe_os_problem
from gpuperf.store.reading import InputError
from gpuperf.store.records import Record, RunInfo
from gpuperf.verdict import gate
from gpuperf.vocabulary import Status

#: Where the line of a failure that no input explains sends its reader.
DEFECT = "a gpuperf defect: please report it with this line"
#: Longest cause a line quotes (an exception's message can hold a whole record).
MAX_CAUSE = 300


class Stage:
    """Each stage between a measurement and the written files, as the one line names it."""

    CHECK = "the check failed"  # case_record / ratio_record: figures, anomaly rules, the gate, confirmation, A/B
    EXPORT = "the benchmark export failed"
    NOTE = "the note could not be added"  # perf.note / perf.attach
    VERDICT = "the test's verdict could not be given"
    CARRY = "the record could not be carried to the session"  # to_dict, plain data (xdist sends it)
    READ_BACK = "the record could not be read back"  # from_dict, in the worker and on the controller
    COLLECT = "the record could not be collected"
    TABLE = "the record could not be shown in the table"
    RESULTS = "the record could not be written to the results files"
    BASELINE = "the record could not be recorded as a baseline entry"
    HISTORY = "the record could not be appended to the history"


def contained(exc: BaseException) -> bool:
    """Whether ``exc`` is a case's failure to contain: an ``Exception`` that is not pytest's ``exit``."""
    return isinstance(exc, Exception) and not isinstance(exc, pytest.exit.Exception)


def failure_line(stage: str, exc: BaseException) -> str:
    """``<stage>: <cause>``, one line (an ``ERROR`` row's note: the row says ``no figure``); where the cause is no
    input's fault, it asks for a report."""
    if isinstance(exc, OSError):  # the file system (a full disk, a permission), not gpuperf: the file and the fix
        return f"{stage}: {describe_os_problem(exc)}"
    message = " ".join(str(exc).split())
    cause = message if isinstance(exc, ValueError) and message else f"{type(exc).__name__}: {message}".rstrip(": ")
    if len(cause) > MAX_CAUSE:
        cause = cause[:MAX_CAUSE - 1] + "…"
    fix = "" if isinstance(exc, InputError) else f"; {DEFECT}"
    return f"{stage}: {cause}{fix}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def error_record(identity: Mapping[str, Any] | Record | Any, note: str) -> Record:
    """The minimal ``ERROR`` row (case id, node id, family, GPU, status, note) of a case whose record could not be
    made, carried or read: built from whatever of its identity is of the right type, and itself always writable."""
    if isinstance(identity, Record):
        identity = vars(identity)
    if not isinstance(identity, Mapping):
        identity = {}
    index = identity.get("gpu_index")
    return Record(case_id=_text(identity.get("case_id")) or _text(identity.get("nodeid")),
                  nodeid=_text(identity.get("nodeid")), family=_text(identity.get("family")), params={},
                  metric=_text(identity.get("metric")), value=math.nan, unit=_text(identity.get("unit")),
                  status=Status.ERROR, note=note, reliable=False, gpu=_text(identity.get("gpu")),
                  gpu_index=index if isinstance(index, int) and not isinstance(index, bool) else None)


def failed(identity: Mapping[str, Any] | Record | Any, stage: str, exc: BaseException) -> Record:
    """``error_record`` with the line of ``exc`` at ``stage``."""
    return error_record(identity, failure_line(stage, exc))


def plain_data_fault(value: Any, where: str = "record") -> str:
    """Where ``value`` holds something that is not JSON data (what a record must be to cross from an xdist worker
    and into the results files), with the fix; ``""`` when it is all plain data."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return ""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r}, which is not text: pass perf.attach only JSON data"
            fault = plain_data_fault(item, f"{where}[{key!r}]")
            if fault:
                return fault
        return ""
    if isinstance(value, (list, tuple)):
        return next((fault for index, item in enumerate(value)
                     if (fault := plain_data_fault(item, f"{where}[{index}]"))), "")
    return (f"{where} is a {type(value).__name__}, which is not JSON data: pass perf.attach only JSON data "
            "(numbers, text, lists, mappings)")


class NotPlainData(InputError):
    """A record holding a value that is not JSON data; the message names where and the fix."""


def carried(record: Record) -> tuple[dict[str, Any], str]:
    """``record`` as the test's report carries it to the session (``to_dict``, checked to be plain data and to read
    back), or the minimal ``ERROR`` record's and the line why."""
    try:
        data = record.to_dict()
        fault = plain_data_fault(data)
        if fault:
            raise NotPlainData(fault)
    except Exception as exc:
        if not contained(exc):
            raise
        line = failure_line(Stage.CARRY, exc)
        return error_record(record, line).to_dict(), line
    _, line = read_back(data)
    if line:
        return error_record(data, line).to_dict(), line
    return data, ""


def read_back(data: Any, fallback: Mapping[str, Any] | None = None) -> tuple[Record, str]:
    """The record a report carried, or its minimal ``ERROR`` record and the line why it could not be read; the
    identity of ``fallback`` (the test's case) where the data has none."""
    try:
        return Record.from_dict(data), ""
    except Exception as exc:
        if not contained(exc):
            raise
        line = failure_line(Stage.READ_BACK, exc)
        identity = dict(fallback or {})
        if isinstance(data, Mapping):
            identity.update({key: value for key, value in data.items() if value not in (None, "")})
        return error_record(identity, line), line


#: A stage's check of records: raises where they cannot pass it.
Probe = Callable[[Sequence[Record]], object]


def screened(records: Sequence[Record], stage: str, probe: Probe) -> tuple[list[Record], list[str]]:
    """``records`` with each one that ``probe`` refuses replaced by its ``ERROR`` record, and the lines why (one
    ``ERROR <case id>: no figure; …`` each). Tried as a whole first; only a refusal is looked into record by
    record. A refusal of the whole that no single record explains is raised: the stage's own failure, not a case's."""
    try:
        probe(records)
        return list(records), []
    except Exception as exc:
        if not contained(exc):
            raise
        whole = exc
    kept, lines = [], []
    for record in records:
        try:
            probe([record])
        except Exception as exc:
            if not contained(exc):
                raise
            error = failed(record, stage, exc)
            kept.append(error)
            lines.append(gate.failure_line(error))
        else:
            kept.append(record)
    if not lines:
        raise whole
    return kept, lines


def table_probe(records: Sequence[Record]) -> None:
    """The end-of-session table's lines of ``records``, made and dropped."""
    from gpuperf.output import report

    report.format_table(records)
    report.status_counts(records)
    report.kernel_change_lines(records)


def results_probe(run: RunInfo) -> Probe:
    """What the results files of ``run`` would hold, made and read back by their own reader, never written."""
    from gpuperf.output import results
    from gpuperf.store.results import check_written

    def probe(records: Sequence[Record]) -> None:
        json_text, _, _ = results.run_texts(run, records)
        check_written(Path("results.json"), json_text)

    return probe


def entry_probe(baseline_dir: Path) -> Probe:
    """Whether the baseline entry of each ``UPDATED`` record is one its baseline's loader reads back."""
    from gpuperf.store.baseline import baseline_path, check_entry
    from gpuperf.verdict.check import entry_from_record

    def probe(records: Sequence[Record]) -> None:
        for record in records:
            if record.status == Status.UPDATED:
                check_entry(baseline_path(baseline_dir, record.gpu), record.case_id, entry_from_record(record))

    return probe


def history_probe(run: RunInfo) -> Probe:
    """Whether the history's rows of ``run`` with these records can be made (nothing written)."""
    from gpuperf.history import rows
    from gpuperf.wiring.history_append import document

    def probe(records: Sequence[Record]) -> None:
        data, _ = document(run, records)
        rows.check_document(data, "results")
        rows.records_columns(data["records"])

    return probe
