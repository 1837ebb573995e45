"""Old → new, case by case: the pure logic behind ``baseline diff``, the ``--update-baselines`` table and
``compare``.

A set of figures is a mapping of case id → baseline ``Entry`` (a run's records become entries through
``check.entry_from_record``, as ``--update-baselines`` would write them). ``diff_entries`` pairs two sets and
says how each case moved. ``compare_runs`` also judges each new figure against the old one with the gate's
own rule (``gate.decide``), so ``python -m gpuperf compare`` gives the verdicts the gate would have given
had A been the baseline. Formatting lives in ``report`` and ``table``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from gpuperf.measure.kernel_records import kernel_change
from gpuperf.store.baseline import Change, Entry
from gpuperf.verdict.gate import (Context, GateConfig, rejudge, status_rank, valid_figure,
                                  with_profile_hint)
from gpuperf.store.records import Reason, Record
from gpuperf.verdict.check import figure_anomalies
from gpuperf.verdict.memory_level import levelled_records
from gpuperf.vocabulary import Status

ADDED = "added"
REMOVED = "removed"
METRIC_CHANGED = "metric changed"
ONLY_IN_A = "only in A"
ONLY_IN_B = "only in B"
#: How a run over several GPUs keys each of its cases (``results.load_figures``): ``<case id> @ GPU <index>``.
MULTI_GPU = " @ GPU "


Old = TypeVar("Old")
New = TypeVar("New")


@dataclass(frozen=True)
class DiffRow:
    """One case of an old → new table.

    ``change`` says why a case has no Δ (``added``, ``removed``, ``metric changed``; ``only in A`` / ``only in
    B`` for ``compare``). ``status`` and ``note`` are the gate's verdict on new against old (``compare``); in a
    plain diff, ``note`` says how the case's kernels changed (``kernel changed: A → B``).
    """

    case_id: str
    metric: str
    old: float | None
    new: float | None
    delta_pct: float | None = None
    change: str = ""
    status: str = ""
    note: str = ""


def delta_pct(old: float, new: float) -> float | None:
    """``new`` relative to ``old`` in percent; ``None`` when either is not a positive finite figure."""
    return 100.0 * (new - old) / old if valid_figure(old) and valid_figure(new) else None


def pair_cases(old: Mapping[str, Old], new: Mapping[str, New]) -> list[tuple[str, Old | None, New | None]]:
    """Every case of either side, sorted by case id, with its figure on each side (``None``: absent)."""
    return [(case, old.get(case), new.get(case)) for case in sorted(set(old) | set(new))]


def diff_entries(old: Mapping[str, Entry], new: Mapping[str, Entry]) -> list[DiffRow]:
    """How each case moved from ``old`` to ``new``, sorted by case id."""
    rows = []
    for case, before, after in pair_cases(old, new):
        if before is None and after is not None:
            rows.append(DiffRow(case, after.metric, None, after.value, change=ADDED))
        elif after is None and before is not None:
            rows.append(DiffRow(case, before.metric, before.value, None, change=REMOVED))
        elif before is not None and after is not None:
            if before.metric != after.metric:
                rows.append(DiffRow(case, f"{before.metric} → {after.metric}", before.value, after.value,
                                    change=METRIC_CHANGED))
            else:
                rows.append(DiffRow(case, before.metric, before.value, after.value,
                                    delta_pct(before.value, after.value),
                                    note=kernel_change(before.kernels, after.kernels)))
    return rows


def changes_rows(changes: Sequence[Change]) -> list[DiffRow]:
    """The rows of the ``--update-baselines`` old → new table: the same diff as ``baseline diff``'s."""
    return diff_entries({c.case_id: c.old for c in changes if c.old is not None},
                        {c.case_id: c.new for c in changes})


def select_rows(rows: Iterable[DiffRow], min_delta_pct: float) -> list[DiffRow]:
    """The rows worth showing: every added, removed or changed case, each case whose kernels changed, and each
    Δ of at least ``min_delta_pct``."""
    return [r for r in rows if r.delta_pct is None or r.note or abs(r.delta_pct) >= min_delta_pct]


def judge(record: Record, entry: Entry, config: GateConfig, context: Context,
          peaks: Mapping[str, Any] | None = None) -> Record:
    """``record`` (run B) judged against ``entry`` (from run A) by ``gate.decide``, as the gate would judge it.

    B's verdict against its own baseline is dropped. What B's run found about the figure itself stands: an
    anomaly (a figure above a peak) and a measurement taken while throttled or shared. The anomaly rules are
    also applied afresh to the figure against its record's peak and B's run ``peaks`` (``check.figure_anomalies``),
    so a figure above the GPU's peak is an ``ANOMALY`` whatever its file says. Noise is judged afresh under
    ``config``, so a figure too noisy for its cap is ``UNRELIABLE``.

    A record with no figure (``value`` null: an ``ERROR`` row as the suite writes one, or an ``UNRELIABLE``,
    ``NOT_COMPARABLE``, ``NOT_RECORDED`` or ``ANOMALY`` one) has nothing to judge: it keeps its own run's verdict
    and note, so an ``ERROR`` still fails.
    """
    if record.value is None:
        return replace(record, note=_join_notes(f"no figure in B, so not judged against A (its run: {record.status})",
                                                record.note))
    findings = [record.note] if record.status == Status.ANOMALY else figure_anomalies(record, peaks)
    return with_profile_hint(rejudge(record, entry, config, context, findings, _unreliable_in_its_run(record)))


def _join_notes(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _unreliable_in_its_run(record: Record) -> str:
    """Why B's own run could not trust the measurement (throttled, shared), from the record's reason; a record
    of an older file that stored no reason keeps its run's whole verdict as the reason, so it never passes."""
    if record.status != Status.UNRELIABLE or record.reason == Reason.NOISY:
        return ""
    if record.reason == Reason.UNKNOWN or not record.unreliable_reason:
        return f"so judged in its own run, which stored no reason as data ({record.note or 'no note'})"
    return record.unreliable_reason


def compare_runs(a: Mapping[str, Entry], b: Mapping[str, Record], config: GateConfig,
                 version_changes: Sequence[str] = (), record_command: str = Context.record_command,
                 peaks: Mapping[str, Any] | None = None) -> list[DiffRow]:
    """Every case of B judged against A's figure (``judge``, against B's ``peaks``), and the cases only one side
    has; problems first (``gate.STATUS_ORDER``), then the one-sided cases, each group by case id.
    ``record_command`` is what an IMPROVED row suggests (re-recording a baseline A, or recording one from run B).
    A fleet's levelled entries are then judged again with B's memory level taken out, as the end of a run does
    (``memory_level``)."""
    context = Context(version_changes=tuple(version_changes), record_command=record_command)
    rows = []
    paired = pair_cases(a, b)
    both = [(case, judge(record, entry, config, context, peaks)) for case, entry, record in paired
            if entry is not None and record is not None]
    judged = dict(zip([case for case, _ in both], levelled_records([record for _, record in both], a, config)))
    for case, entry, record in paired:
        if record is None and entry is not None:
            rows.append(DiffRow(case, entry.metric, entry.value, None, change=ONLY_IN_A,
                                note="no valid figure in B"))
        elif entry is None and record is not None:
            rows.append(DiffRow(case, record.metric, None, record.value, change=ONLY_IN_B,
                                note="no valid figure in A"))
        elif entry is not None and record is not None:
            verdict = judged[case]
            rows.append(DiffRow(case, record.metric, entry.value, verdict.value, verdict.delta_pct,
                                status=verdict.status, note=verdict.note))
    return sorted(rows, key=lambda r: (status_rank(r.status), r.change, r.case_id))  # no status ranks last


def failing(rows: Iterable[DiffRow]) -> list[DiffRow]:
    """The rows whose verdict fails a test in the gate (``Status.FAILING``: regressed, anomaly, error)."""
    return [r for r in rows if r.status in Status.FAILING]


def nothing_compared(rows: Sequence[DiffRow]) -> str:
    """Why a comparison judged nothing (``""`` when it judged a case): no case had a figure on both sides, so
    a pass would say nothing about B. ``compare`` and ``baseline diff`` fail on it."""
    if any((r.status and r.new is not None) or r.delta_pct is not None or r.change == METRIC_CHANGED for r in rows):
        return ""
    counts = {change: sum(r.change == change for r in rows) for change in (ONLY_IN_A, ONLY_IN_B, REMOVED, ADDED)}
    sides = ", ".join(f"{count} {change}" for change, count in counts.items() if count) or "no case on either side"
    if any(MULTI_GPU in r.case_id for r in rows):
        return (f"nothing compared: no case has a figure on both sides ({sides}), and one side measured several "
                f"GPUs (its cases are keyed '<case id>{MULTI_GPU}<index>'): compare it with a run of as many GPUs, "
                "or each GPU's run with --gpu N")
    return (f"nothing compared: no case has a figure on both sides ({sides}); compare runs of the same "
            "selection on the same GPU model (a case id names the test, its parameters and the flush mode)")
