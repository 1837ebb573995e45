"""The trend page's data from the history store: run and record rows → ``TrendData``, change points included.

``trend_from_rows`` is pure (the rows, what each record draws, the card facts and the change points as found), so
it is tested without a database; ``load_trend`` streams them from a history database, a few runs at a time, the
runs' documents reduced in worker processes (``documents``). What a card says about a case (family, precision,
shape, kernel label, metric) is read from its latest record's fields.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import functools
from contextlib import closing
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from gpuperf.trend import documents
from gpuperf.trend.documents import Drawn
from gpuperf.trend.data import CaseSeries, ChangePoint, SeriesPoint, TrendData, TrendRun
from gpuperf.trend.summary import RecentRuns, SummaryHistory
from gpuperf.history.database import History, HistoryError, describe, run_documents, runs_query
from gpuperf.history.driver_rows import fetch, fetcher
from gpuperf.history.guard import damage_told
from gpuperf.history.schema import JUDGED_FIGURE, RECORDS, RUN_DOCUMENTS, RUNS, SchemaError
from gpuperf.store.records import Record, RunInfo
from gpuperf.history import changes as history_changes
from gpuperf.history.rows import experiment
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


def host_class(run: Mapping[str, Any], gpu_model: str) -> str:
    """The kind of GPU a run's host is, from what its run says of it: the model's name, its SM count and its
    maximum SM and memory clocks (``NVIDIA H200 · 132 SMs · 1980/3201 MHz``): hosts of one kind are coloured
    alike, so a chart of a fleet shows its kinds of host, not a colour for each of forty GPUs."""
    found = run.get("extra")
    extra: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    parts = [str(run.get("gpu_name") or gpu_model)]
    if isinstance(extra.get("sm_count"), int):
        parts.append(f"{extra['sm_count']} SMs")
    clocks = [run.get("sm_clock_max_mhz"), run.get("mem_clock_mhz")]
    if all(isinstance(clock, (int, float)) and not isinstance(clock, bool) for clock in clocks):
        parts.append(f"{clocks[0]:g}/{clocks[1]:g} MHz")
    return " · ".join(parts)


def trend_run(row: Mapping[str, Any]) -> TrendRun:
    """A ``runs`` row of the history as the page's run."""
    try:
        run = orjson.loads(row.get("run_json") or "{}")
    except orjson.JSONDecodeError:
        run = {}
    model = str(row["gpu_slug"])
    return TrendRun(
        run_id=str(row["run_id"]), started=str(row["started"]), gpu_model=model,
        host=host_label(str(row.get("host") or "unknown")), commit=str(row.get("git_commit") or ""),
        dirty=bool(row.get("git_dirty")), branch=str(row.get("branch") or ""), ci_job=str(row.get("ci_job") or ""),
        versions={key: str(row[key]) for key in ("driver", "cuda_runtime", "cublas", "cupy") if row.get(key)},
        host_class=host_class(run if isinstance(run, Mapping) else {}, model),
        experiment=experiment(row.get("options")))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class _Points:
    """Makes the page's points of a history's records, one at a time: what thousands of points share (a status,
    a method, a note, the kernels) is held once, so ten thousand runs of 163 cases fit in a few hundred MB."""

    def __init__(self) -> None:
        self._texts: dict[Any, str] = {}
        self._kernels: dict[tuple[str, ...], tuple[str, ...]] = {}

    def text(self, value: Any) -> str:
        found = self._texts.get(value)
        if found is None:
            found = self._texts[value] = str(value or "")
        return found

    def point(self, run_id: str, row: Sequence[Any], drawn: Drawn) -> SeriesPoint:
        """``row``: the ``_RECORD_COLUMNS`` of a record, in that order."""
        _, _, value, at_max, basis, status, spread, method, note, _ = row
        baseline, tolerance, delta, kernels = drawn
        text = self._texts
        if basis == Basis.CYCLES:
            return SeriesPoint(run_id, _float(at_max), text.get(status) or self.text(status), _float(spread),
                               Basis.CYCLES, _float(value), baseline, tolerance,
                               self._kernels.setdefault(kernels, kernels), text.get(method) or self.text(method),
                               text.get(note) or self.text(note), None if delta is None else delta / 100)
        return SeriesPoint(run_id, _float(value), text.get(status) or self.text(status), _float(spread), Basis.TIME,
                           None, baseline, tolerance, self._kernels.setdefault(kernels, kernels),
                           text.get(method) or self.text(method), text.get(note) or self.text(note),
                           None if delta is None else delta / 100)


def _float(value: Any) -> float | None:
    return value if type(value) is float else _number(value)


def _shape(record: Mapping[str, Any]) -> dict[str, int]:
    shape = record.get("shape") or {}
    return {str(k): int(v) for k, v in shape.items() if isinstance(v, int)} if isinstance(shape, Mapping) else {}


#: A record's place: its run's pk and its position in the run's document.
Place = tuple[Any, Any]
#: The results-file records at those places (the latest record of each series: what its card says).
Facts = Callable[[Sequence[Place]], Mapping[Place, Mapping[str, Any]]]


def trend_from_rows(runs: Iterable[Mapping[str, Any]], records: Iterable[tuple[Sequence[Any], Drawn]],
                    facts: Facts, changes: Mapping[tuple[str, str], Sequence[ChangePoint]] | None = None,
                    source: str = "") -> TrendData:
    """``runs``: rows with ``pk`` and the run columns, in run order; ``records``: pairs of a row (``run_pk``,
    ``position``, ``case_id`` and the figure columns) and what its results-file record draws
    (``documents.Drawn``), read once each, so they may be streamed; ``facts``: the whole results-file records
    of each series' latest run, for what its card says (family, precision, shape, kernel, metric). One series
    per GPU model and case, with the change points ``changes`` lists for its ``(gpu model, case id)``."""
    trend_runs: list[TrendRun] = []
    by_pk: dict[Any, tuple[int, TrendRun]] = {}
    for run_row in runs:
        run = trend_run(run_row)
        by_pk[run_row["pk"]] = (len(trend_runs), run)
        trend_runs.append(run)
    made = _Points()
    grouped: dict[tuple[str, str], list[tuple[int, SeriesPoint]]] = {}
    latest: dict[tuple[str, str], tuple[int, Place]] = {}
    for row, drawn in records:
        owner = by_pk.get(row[0])
        if owner is None:
            continue  # a record of a run outside the selection
        order, run = owner
        key = (run.gpu_model, made.text(row[1]))
        grouped.setdefault(key, []).append((order, made.point(run.run_id, row, drawn)))
        if order >= latest.get(key, (-1, None))[0]:
            latest[key] = (order, (row[0], row[-1]))
    known = facts(sorted({place for _, place in latest.values()}, key=repr))
    series = []
    for (model, case_id), members in sorted(grouped.items()):
        members.sort(key=lambda member: member[0])
        points = tuple(point for _, point in members)
        last = known.get(latest[(model, case_id)][1]) or {}
        series.append(CaseSeries(
            case_id=case_id, gpu_model=model, family=str(last.get("family") or Family.OTHER),
            precision=str(last.get("precision") or ""), metric=str(last.get("metric") or ""),
            unit=str(last.get("unit") or ""), points=points, shape=_shape(last),
            kernel=str(last.get("kernel") or ""),
            change_points=tuple((changes or {}).get((model, case_id), ()))))
    return TrendData(runs=tuple(trend_runs), series=tuple(series), source=source)


def load_trend(url: str, gpu: str | None = None, since: str | None = None) -> TrendData:
    """Every run (of GPU model ``gpu``, started at or after ``since``) and its records, from the history at
    ``url``, read ``RUNS_AT_ONCE`` runs at a time: their documents are reduced to what the page draws
    (``documents``) and let go, so the memory it takes grows with the points drawn, not with the documents.
    ``HistoryError``/``SchemaError`` name the database and the fix when it cannot be read; reading never
    creates a database."""
    with damage_told(url):
        with History(url, create=False) as history:
            changes = history_change_points(history, gpu, since)
            with history.reading() as connection:
                runs = [dict(zip(_RUN_KEYS, row)) for row in fetch(connection, runs_query(_RUN_COLUMNS, gpu, since))]
                # closed here, an interruption included: left to the collector, it would close its cursors on a
                # connection already closed
                with closing(_records(connection, [row["pk"] for row in runs])) as records:
                    return trend_from_rows(runs, records, functools.partial(_facts, connection), changes,
                                           source=f"the history {describe(url)}")


def history_change_points(history: History, gpu: str | None = None,
                          since: str | None = None) -> dict[tuple[str, str], list[ChangePoint]]:
    """The change points ``history changes`` reports (its series: per case, method and GPU model over its hosts,
    their offsets removed), read as that command reads them (the judged figures as arrays, each series' sample
    spreads), by ``(gpu model, case id)``, each saying whether it falls on a change of host."""
    runs = history.runs(gpu=gpu, since=since)
    grouped = history_changes.series_from_columns(*history.series_columns(), runs, history.series_classes())
    found: dict[tuple[str, str], list[ChangePoint]] = {}
    for change in history_changes.find_changes(
            grouped, runs, spreads_of=lambda key, pks: history.spreads(key.case_id, key.method, pks)):
        key = (change.key.gpu_slug, change.key.case_id)
        hosts = (f"{change.before.host} ({100 * change.before_offset:+.1f} %) → {change.after.host} "
                 f"({100 * change.after_offset:+.1f} %)") if change.host_changed else ""
        found.setdefault(key, []).append(ChangePoint(run_id=change.after.run_id, before=change.point.before,
                                                     after=change.point.after, previous_run_id=change.before.run_id,
                                                     host_change=hosts))
    return found


#: Runs whose documents and records are read at a time.
RUNS_AT_ONCE = 32
_RUN_COLUMNS = list(RUNS.c)
_RUN_KEYS = [column.name for column in _RUN_COLUMNS]
#: The record columns a point is made of, and the record's place in its run's document.
RECORD_COLUMNS = ("run_pk", "case_id", "value", "value_at_max_clock", "basis", "status", "spread", "method", "note",
                  "position")
_RECORD_COLUMNS = [RECORDS.c[name] for name in RECORD_COLUMNS]
_NOTHING: Drawn = (None, None, None, ())


def _between(column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
    return sa.and_(column >= sa.bindparam("low", type_=sa.Integer), column <= sa.bindparam("high", type_=sa.Integer))


def _records(connection: sa.Connection,
             run_pks: Sequence[int]) -> Generator[tuple[Sequence[Any], Drawn], None, None]:
    """Each record of those runs, with what its results-file record draws, ``RUNS_AT_ONCE`` runs (by pk) at a
    time: the runs' documents are reduced in worker processes (``documents.reduced``) while this one goes on."""
    wanted = sorted(set(run_pks))
    chunks = [wanted[start:start + RUNS_AT_ONCE] for start in range(0, len(wanted), RUNS_AT_ONCE)]
    records = sa.select(*_RECORD_COLUMNS).where(_between(RECORDS.c.run_pk)).order_by(RECORDS.c.run_pk,
                                                                                      RECORDS.c.position)
    bodies = sa.select(RUN_DOCUMENTS.c.run_pk, RUN_DOCUMENTS.c.body).where(_between(RUN_DOCUMENTS.c.run_pk))
    with fetcher(connection, records) as records_of, fetcher(connection, bodies) as bodies_of:
        def read(chunk: list[int]) -> list[tuple[int, bytes]]:
            selected = set(chunk)
            return [(pk, bytes(body)) for pk, body in bodies_of({"low": chunk[0], "high": chunk[-1]})
                    if pk in selected]  # bytes: a driver may hand a view, which no worker process can be sent

        for chunk, reduced in zip(chunks, documents.reduced(map(read, chunks), len(wanted))):
            drawn = dict(reduced)
            for row in records_of({"low": chunk[0], "high": chunk[-1]}):
                of_run = drawn.get(row[0])
                if of_run is None:
                    continue  # a run outside the selection, or one without its document (told by the guard)
                position = row[-1]
                yield row, of_run[position] if type(position) is int and 0 <= position < len(of_run) else _NOTHING


def _facts(connection: sa.Connection, places: Sequence[Place]) -> dict[Place, Mapping[str, Any]]:
    """The results-file records at those places, from their runs' documents."""
    found = run_documents(connection, sorted({pk for pk, _ in places}))
    out: dict[Place, Mapping[str, Any]] = {}
    for pk, position in places:
        records = (found.get(pk) or {}).get("records") or []
        if isinstance(position, int) and 0 <= position < len(records) and isinstance(records[position], Mapping):
            out[(pk, position)] = records[position]
    return out


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
