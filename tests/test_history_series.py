"""The series ``history changes`` cuts, as columns (``series_from_columns``, ``History.series_columns``) against
the plain per-record way of cutting them, on fresh random data and on both engines."""

from __future__ import annotations

import gc
import math
import random
import sqlite3
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from history_support import ENGINES, database_url, document  # noqa: F401  (a fixture)
from gpuperf.history.driver_rows import fetch
from gpuperf.history.database import History, sqlite_url
from gpuperf.history.rows import RunSummary
from gpuperf.history.changepoints import DEFAULT_MIN_SIZE
from gpuperf.history.changes import (ALL_HOSTS, Points, SeriesKey, find_changes, series,
                                             series_from_columns)
from gpuperf.vocabulary import Status

Row = tuple[Any, ...]  # (case_id, method, run_pk, figure, status[, at max clock])


def per_record(rows: Iterable[Row], runs: Mapping[int, RunSummary]) -> dict[SeriesKey, list[tuple[int, float]]]:
    """The series, one record at a time: per case and method (sorted), per GPU model in the order the runs first
    show them, the judged figures in run order, every host pooled (named where there is one)."""
    position = {pk: index for index, pk in enumerate(runs)}
    slugs = list(dict.fromkeys(run.gpu_slug for run in runs.values()))
    hosts = list(dict.fromkeys(run.host for run in runs.values()))
    figures: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for case, method, pk, value, status, *_ in rows:
        if pk in runs and status not in Status.UNJUDGED and value is not None and math.isfinite(value) and value > 0:
            figures[case, method or ""].append((pk, float(value)))
    cut: dict[SeriesKey, list[tuple[int, float]]] = {}
    for case, method in sorted(figures):
        in_order = sorted(figures[case, method], key=lambda point: position[point[0]])
        for slug in slugs:
            mine = [point for point in in_order if runs[point[0]].gpu_slug == slug]
            present = {runs[pk].host for pk, _ in mine}
            if present:
                cut[SeriesKey(slug, next(iter(present)) if len(present) == 1 else ALL_HOSTS, case, method)] = mine
    return cut


def _runs(rng: random.Random, count: int, hosts: Sequence[str], slugs: Sequence[str]) -> dict[int, RunSummary]:
    """``count`` runs on random hosts and GPU models, in an order other than their pks'."""
    pks = rng.sample(range(1, 4 * count), count)
    return {pk: RunSummary(pk=pk, run_id=f"{pk:064x}", kind="run", started=f"2027-01-01T{index:05d}",
                           gpu_slug=rng.choice(slugs), host=rng.choice(hosts), git_commit=None, git_dirty=None,
                           branch=None, driver="580", cuda_runtime="13.2", cublas="13.1.0", cupy="14.2.0")
            for index, pk in enumerate(pks)}


def _rows(rng: random.Random, runs: Mapping[int, RunSummary], offsets: Mapping[str, float]) -> list[Row]:
    """Records of a few cases and methods in most runs (and in runs left out of ``runs``), some unjudged or
    without a figure, each host's figures off by its offset."""
    statuses = ["PASS", "PASS", "PASS", "IMPROVED", "REGRESSED", *sorted(Status.UNJUDGED)]
    rows: list[Row] = []
    for case in ("b-case", "a-case", "c-case"):
        for method in ("cupti-cold", "", "cold-flush"):
            level = rng.uniform(1, 1000)
            for pk in [*runs, 10**6 + 1]:  # the last: a run --gpu or --since left out
                if rng.random() < 0.2:
                    continue
                host = runs[pk].host if pk in runs else "GPU-gone"
                value = None if rng.random() < 0.03 else level * (1 + offsets.get(host, 0.0)) * rng.gauss(1, 0.01)
                rows.append((case, method, pk, value, rng.choice(statuses)))
    rng.shuffle(rows)
    return rows


@pytest.mark.long
@pytest.mark.parametrize("seed", range(40))
def test_columns_cut_the_series_as_the_per_record_way_does(seed: int) -> None:
    rng = random.Random(seed)
    hosts = [f"GPU-{index:04d}" for index in range(rng.randint(1, 5))]
    runs = _runs(rng, rng.randint(1, 60), hosts, ["nvidia-h200", "nvidia-a100"][:rng.randint(1, 2)])
    offsets = {host: rng.choice([0.0, 0.0, 0.004, 0.03, -0.1]) for host in hosts}  # hosts that read differently
    rows = _rows(rng, runs, offsets)
    expected = per_record(rows, runs)
    cut = series(rows, runs)
    assert list(cut) == list(expected)  # the same series in the same order (changes of one run keep it)
    assert all(isinstance(points, Points) and list(points) == expected[key] for key, points in cut.items())
    assert find_changes(cut, runs) == find_changes({key: Points(np.array([pk for pk, _ in points], dtype=np.int64),
                                                                np.array([value for _, value in points]),
                                                                offsets=cut[key].offsets)
                                                    for key, points in expected.items()}, runs)


def test_points_are_a_sequence_of_run_and_figure() -> None:
    points = Points(np.array([3, 1, 2], dtype=np.int64), np.array([5.0, 6.5, 7.25]))
    assert len(points) == 3 and points[0] == (3, 5.0) and points[-1] == (2, 7.25)
    assert list(points) == [(3, 5.0), (1, 6.5), (2, 7.25)] and points == [(3, 5.0), (1, 6.5), (2, 7.25)]
    assert points[1:] == [(1, 6.5), (2, 7.25)] and points != [(3, 5.0)] and points != "abc"
    assert type(points[0][0]) is int and type(points[0][1]) is float
    with pytest.raises(IndexError):
        points[3]


@pytest.mark.parametrize("database_url", ENGINES, indirect=True)
def test_the_history_s_columns_hold_every_judged_figure_of_each_series(database_url: str) -> None:
    rng = random.Random(7)
    cases = {"perf_tests/test_gemm.py::b": 50.0, "perf_tests/test_gemm.py::a": 3.0, "perf_tests/test_gemv.py::c": 9.0}
    documents = []
    for number in range(30):
        host = f"GPU-{number % 3:04d}"
        values = {case: level * (1.1 if host == "GPU-0002" else 1.0) * rng.gauss(1, 0.01)
                  for case, level in cases.items()}
        doc = document(f"2027-01-{1 + number // 24:02d}T{number % 24:02d}:00:00+00:00", values, host=host)
        for record in doc["records"]:
            record["status"] = rng.choice(["PASS", "PASS", "REGRESSED", *sorted(Status.UNJUDGED)])
            if rng.random() < 0.2:
                record["method"] = "cold-flush"
        documents.append((doc, f"run-{number}", None))
    with History(database_url) as history:
        assert all(history.append_batch(documents))
        runs = history.runs()
        columns = series_from_columns(*history.series_columns(), runs)
        rows = history.values()
        recent = history.runs(gpu="nvidia-h200", since="2027-01-02")
        since = series_from_columns(*history.series_columns(), recent)
        _, pks, values, bases = history.series_columns()
    assert not bases.any()  # no figure at max clock: every record judged on time
    assert pks.dtype == np.int64 and values.dtype == np.float64 and bases.dtype == np.bool_
    expected = per_record(rows, runs)
    assert len(runs) == 30 and all(run.git_dirty is None or isinstance(run.git_dirty, bool) for run in runs.values())
    assert list(columns) == list(expected) and {key: list(points) for key, points in columns.items()} == expected
    pooled = [pk for key, points in columns.items() if key.host == ALL_HOSTS for pk, _ in points]
    assert {key.host for key in columns} == {ALL_HOSTS}  # the 10 % faster host pooled, its offset removed
    assert {runs[pk].host for pk in pooled} == {"GPU-0000", "GPU-0001", "GPU-0002"}
    assert all(points.host_offsets["GPU-0002"].offset - points.host_offsets["GPU-0000"].offset == pytest.approx(
        0.1, abs=0.03) for points in columns.values() if "GPU-0002" in points.host_offsets
        and not points.host_offsets["GPU-0002"].from_class)
    assert sum(len(points) for points in columns.values()) == sum(
        1 for doc, _, _ in documents for record in doc["records"] if record["status"] not in Status.UNJUDGED)
    assert len(recent) == 6 and {key: list(points) for key, points in since.items()} == per_record(rows, recent)


def test_reading_rows_pauses_the_cycle_collector_and_gives_it_back(tmp_path: Path) -> None:
    with History(sqlite_url(tmp_path / "h.sqlite")) as history:
        assert history.append(document("2027-01-01T00:00:00+00:00", {"case": 5.0}), "run")
        assert gc.isenabled() and len(history.runs()) == 1 and gc.isenabled()
        gc.disable()
        try:
            assert len(history.series_columns()[0]) == 1 and not gc.isenabled()  # left as it was found
        finally:
            gc.enable()
        with history.reading() as connection, pytest.raises(sqlite3.OperationalError, match="no such table"):
            fetch(connection, sa.select(sa.table("missing", sa.column("x"))))
        assert gc.isenabled()
