"""The trend page's data from the history store: run and record rows → ``TrendData``, change points included.

``trend_from_rows`` is pure (rows as mappings, a change-point finder as a function), so it is tested without a
database; ``load_trend`` reads the rows from a history database and uses the history's own change-point
detector, so the page marks exactly the change points ``history changes`` reports. What a card says about a
case (family, precision, shape, kernel label, metric) is read from its latest record's fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gpuperf.output.trend_data import CaseSeries, ChangePoint, SeriesPoint, TrendData, TrendRun
from gpuperf.vocabulary import Family

#: ``(values in run order) → indices of the first point of each new level``; the history's detector.
ChangeFinder = Callable[[Sequence[float]], Sequence[int]]

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
    return SeriesPoint(
        run_id=run_id, value=_number(row.get("value")), status=str(row.get("status") or ""),
        spread=_number(row.get("spread")), value_at_max_clock=_number(row.get("value_at_max_clock")),
        baseline=_number(record.get("baseline")), tolerance=_number(record.get("tolerance")), kernels=kernels,
        method=str(row.get("method") or ""), note=str(row.get("note") or ""))


def _shape(record: Mapping[str, Any]) -> dict[str, int]:
    shape = record.get("shape") or {}
    return {str(k): int(v) for k, v in shape.items() if isinstance(v, int)} if isinstance(shape, Mapping) else {}


def _change_points(points: Sequence[SeriesPoint], find: ChangeFinder) -> tuple[ChangePoint, ...]:
    """The finder's shifts over the series' valid figures, each with the mean level on either side."""
    valid = [p for p in points if p.value is not None]
    values = [p.value for p in valid if p.value is not None]
    starts = sorted(i for i in set(find(values)) if 0 < i < len(values))
    found = []
    bounds = [0, *starts, len(values)]
    for before, start, after in zip(bounds, bounds[1:], bounds[2:]):
        old = values[before:start]
        new = values[start:after]
        found.append(ChangePoint(run_id=valid[start].run_id, before=sum(old) / len(old), after=sum(new) / len(new),
                                 previous_run_id=valid[start - 1].run_id))
    return tuple(found)


def trend_from_rows(runs: Iterable[Mapping[str, Any]], records: Iterable[Mapping[str, Any]],
                    find: ChangeFinder | None = None, source: str = "") -> TrendData:
    """``runs``: rows with ``pk`` and the run columns, in run order; ``records``: rows with ``run_pk``,
    ``case_id``, the figure columns and ``data`` (the results-file record as JSON). One series per GPU model
    and case; ``find`` marks change points on each (none when it is ``None``)."""
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
            change_points=_change_points(points, find) if find is not None else ()))
    return TrendData(runs=tuple(trend_runs), series=tuple(series), source=source)
