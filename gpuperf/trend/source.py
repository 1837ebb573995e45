"""The trend page's data from the history store: run and record rows → ``TrendData``, change points included.

``trend_from_rows`` is pure (rows as mappings, change points as found), so it is tested without a database;
``load_trend`` reads the rows from a history database. What a card says about a
case (family, precision, shape, kernel label, metric) is read from its latest record's fields.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from gpuperf.trend.data import CaseSeries, ChangePoint, SeriesPoint, TrendData, TrendRun
from gpuperf.trend.summary import RecentRuns, SummaryHistory
from gpuperf.history.database import History, HistoryError, describe, records_with_data, runs_query
from gpuperf.history.guard import damage_told
from gpuperf.history.schema import JUDGED_FIGURE, RECORDS, RUNS, SchemaError
from gpuperf.store.records import Record, RunInfo
from gpuperf.history import changes as history_changes
from gpuperf.verdict.gate import Basis, own_basis
from gpuperf.vocabulary import Family

#: How many runs of a case ``summary.md`` shows: the history's last ones and this run.
SUMMARY_RUNS = 12
#: A UUID is shown by its first 8 hex digits, as the fleet docs and results file names name a GPU.
_UUID_PREFIX = "GPU-"


def host_label(host: str) -> str:
    """``GPU-71d9282a-1416-…`` → ``71d9282a``; a serial or a PCI id as it is."""
    if host.startswith(_UUID_PREFIX) and len(host) >= len(_UUID_PREFIX) + 8:
        return host[len(_UUID_PREFIX):len(_UUID_PREFIX) + 8]
    return host


def trend_run(row: Mapping[str, Any]) -> TrendRun:
    """A ``runs`` row of the history as the page's run."""
    return TrendRun(
        run_id=str(row["run_id"]), started=str(row["started"]), gpu_model=str(row["gpu_slug"]),
        host=host_label(str(row.get("host") or "unknown")), commit=str(row.get("git_commit") or ""),
        dirty=bool(row.get("git_dirty")), branch=str(row.get("branch") or ""), ci_job=str(row.get("ci_job") or ""),
        versions={key: str(row[key]) for key in ("driver", "cuda_runtime", "cublas", "cupy") if row.get(key)})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _point(run_id: str, row: Mapping[str, Any], record: Mapping[str, Any]) -> SeriesPoint:
    kernels = tuple(str(k.get("name", "?")) for k in record.get("kernels") or () if isinstance(k, Mapping))
    at_max_clock = row.get("basis") == Basis.CYCLES
    return SeriesPoint(
        run_id=run_id, value=_number(row.get("value_at_max_clock" if at_max_clock else "value")),
        status=str(row.get("status") or ""), spread=_number(row.get("spread")),
        basis=Basis.CYCLES if at_max_clock else Basis.TIME,
        measured=_number(row.get("value")) if at_max_clock else None,
        baseline=_number(record.get("baseline")), tolerance=_number(record.get("tolerance")), kernels=kernels,
        method=str(row.get("method") or ""), note=str(row.get("note") or ""))


def _shape(record: Mapping[str, Any]) -> dict[str, int]:
    shape = record.get("shape") or {}
    return {str(k): int(v) for k, v in shape.items() if isinstance(v, int)} if isinstance(shape, Mapping) else {}


def trend_from_rows(runs: Iterable[Mapping[str, Any]], records: Iterable[Mapping[str, Any]],
                    changes: Mapping[tuple[str, str], Sequence[ChangePoint]] | None = None,
                    source: str = "") -> TrendData:
    """``runs``: rows with ``pk`` and the run columns, in run order; ``records``: rows with ``run_pk``,
    ``case_id``, the figure columns and ``data`` (the results-file record as JSON). One series per GPU model
    and case, with the change points ``changes`` lists for its ``(gpu model, case id)``."""
    trend_runs: list[TrendRun] = []
    by_pk: dict[Any, TrendRun] = {}
    order: dict[Any, int] = {}
    for row in runs:
        run = trend_run(row)
        by_pk[row["pk"]] = run
        order[row["pk"]] = len(trend_runs)
        trend_runs.append(run)
    grouped: dict[tuple[str, str], list[tuple[int, SeriesPoint, Mapping[str, Any]]]] = {}
    for row in records:
        owner = by_pk.get(row["run_pk"])
        if owner is None:
            continue  # a record of a run outside the selection
        record = json.loads(row["data"]) if row.get("data") else {}
        key = (owner.gpu_model, str(row["case_id"]))
        grouped.setdefault(key, []).append((order[row["run_pk"]], _point(owner.run_id, row, record), record))
    series = []
    for (model, case_id), members in sorted(grouped.items()):
        members.sort(key=lambda member: member[0])
        points = tuple(point for _, point, _ in members)
        latest = members[-1][2]
        series.append(CaseSeries(
            case_id=case_id, gpu_model=model, family=str(latest.get("family") or Family.OTHER),
            precision=str(latest.get("precision") or ""), metric=str(latest.get("metric") or ""),
            unit=str(latest.get("unit") or ""), points=points, shape=_shape(latest),
            kernel=str(latest.get("kernel") or ""),
            change_points=tuple((changes or {}).get((model, case_id), ()))))
    return TrendData(runs=tuple(trend_runs), series=tuple(series), source=source)


def load_trend(url: str, gpu: str | None = None, since: str | None = None) -> TrendData:
    """Every run (of GPU model ``gpu``, started at or after ``since``) and its records, from the history at
    ``url``. ``HistoryError``/``SchemaError`` name the database and the fix when it cannot be read; reading
    never creates a database."""
    with damage_told(url):
        with History(url, create=False) as history:
            changes = history_change_points(history, gpu, since)
            with history.reading() as connection:
                runs, records = _rows(connection, gpu, since)
        return trend_from_rows(runs, records, changes, source=f"the history {describe(url)}")


def history_change_points(history: History, gpu: str | None = None,
                          since: str | None = None) -> dict[tuple[str, str], list[ChangePoint]]:
    """The change points ``history changes`` reports (its series: per case, method and GPU model over its hosts,
    their offsets removed), by ``(gpu model, case id)``, each saying whether it falls on a change of host."""
    runs = history.runs(gpu=gpu, since=since)
    found: dict[tuple[str, str], list[ChangePoint]] = {}
    grouped = history_changes.series(history.values(), runs, history.series_classes())
    for change in history_changes.find_changes(grouped, runs):
        key = (change.key.gpu_slug, change.key.case_id)
        hosts = (f"{change.before.host} ({100 * change.before_offset:+.1f} %) → {change.after.host} "
                 f"({100 * change.after_offset:+.1f} %)") if change.host_changed else ""
        found.setdefault(key, []).append(ChangePoint(run_id=change.after.run_id, before=change.point.before,
                                                     after=change.point.after, previous_run_id=change.before.run_id,
                                                     host_change=hosts))
    return found


def _rows(connection: sa.Connection, gpu: str | None,
          since: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every run of the selection, in run order, and every record of those runs."""
    query = runs_query([RUNS], gpu, since)
    runs = [dict(row._mapping) for row in connection.execute(query)]
    records_query = sa.select(RECORDS).order_by(RECORDS.c.pk)
    if gpu or since:
        records_query = records_query.where(RECORDS.c.run_pk.in_(sa.select(query.subquery().c.pk)))
    records = records_with_data(connection, [dict(row._mapping) for row in connection.execute(records_query)])
    return runs, records


def judged_figure(record: Record) -> float | None:
    """The figure the history judges a record on (at max clock where its basis is cycles, ``gate.own_basis``), as
    ``history changes`` and the trend page read it from the history."""
    at_max_clock = own_basis(record.clock_bound, record.value_at_max_clock, record.call_clock_mhz,
                             record.max_clock_mhz) == Basis.CYCLES
    value = record.value_at_max_clock if at_max_clock else record.value
    return value if value is not None and math.isfinite(value) else None


def summary_history(url: str, run: RunInfo, records: Sequence[Record], site: Path,
                    last: int = SUMMARY_RUNS) -> SummaryHistory | None:
    """For ``summary.md``: each case's judged figures (``judged_figure``) in the model's last ``last - 1`` runs of
    the history, then this run's. ``None`` when the history cannot be read: the session's append reports why, once."""
    try:
        with History(url, create=False) as history, history.reading() as connection:
            recent = (sa.select(RUNS.c.pk).where(RUNS.c.gpu_slug == run.gpu_slug)
                      .order_by(RUNS.c.started_utc.desc(), RUNS.c.pk.desc()).limit(max(last - 1, 0)))
            pks = [row.pk for row in connection.execute(recent)][::-1]
            rows = connection.execute(sa.select(RECORDS.c.run_pk, RECORDS.c.case_id, JUDGED_FIGURE.label("value"))
                                      .where(RECORDS.c.run_pk.in_(pks))).all() if pks else []
    except (HistoryError, SchemaError, SQLAlchemyError):
        return None
    position = {pk: i for i, pk in enumerate(pks)}
    past: dict[str, list[float | None]] = {}
    for row in sorted(rows, key=lambda r: position[r.run_pk]):
        past.setdefault(str(row.case_id), []).append(row.value)
    now = {r.case_id: judged_figure(r) for r in records}
    cases = set(past) | set(now)
    return SummaryHistory(run.gpu_slug, {case: RecentRuns(tuple(past.get(case, [])) +
                                                          ((now[case],) if case in now else ()))
                                         for case in cases}, site)
