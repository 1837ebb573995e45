"""The history judges, shows and draws the figure the gate judges (at max clock where a run's basis is cycles, the
measured figure beside it); it never makes a history it is asked to read, never passes on an empty selection,
orders runs by the instant they started, and names every change within a change point's uncertainty."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from gpuperf.cli import main
from gpuperf.history.database import History, HistoryError, sqlite_url
from gpuperf.history.rows import HistoryInputError, check_document, started_instant
from gpuperf.history.guard import BASES as guard_bases
from gpuperf.history.schema import CYCLES, MIGRATIONS, RECORDS, RUNS, VERSION_TABLE
from gpuperf.history.changepoints import placement
from gpuperf.verdict.gate import Basis, figure_at_max_clock, own_basis
from history_support import document, write

CAPPED = "perf_tests/test_gemm.py::test_gemm_perf[fp64-nn-4096x4096x4096-cold]"
GEMV = "perf_tests/test_gemv.py::test_gemv_perf[fp16-opN-16384x16384-cold]"
MAX_CLOCK = 1980


def _capped(rng: random.Random, level: float, clock: float | None = None) -> dict[str, Any]:
    """A power-capped GEMM's record fields: its clock wanders 10-25 % below the maximum, so its time does; its
    figure at max clock moves 0.1 %."""
    clock = clock if clock is not None else MAX_CLOCK * rng.uniform(0.75, 0.9)
    at_max = level * rng.gauss(1, 0.001)
    return {"value": at_max * clock / MAX_CLOCK, "value_at_max_clock": at_max, "call_clock_mhz": clock,
            "max_clock_mhz": MAX_CLOCK, "clock_bound": True, "cycles_rel_iqr": 0.001, "status": "PASS"}


def _runs(folder: Path, fields: list[dict[str, Any]], case: str = CAPPED, **options: Any) -> None:
    for number, record in enumerate(fields):
        doc = document(f"2026-12-{1 + number // 24:02d}T{number % 24:02d}:00:00+00:00", {case: record["value"]},
                       commit=f"{number:02x}" * 20, **options)
        doc["records"][0].update(record)
        write(folder / f"run-{number:03d}.json", doc)


def test_the_rule_s_one_home_gives_no_figure_at_max_clock_to_a_memory_bound_case() -> None:
    assert figure_at_max_clock(False, 4824.0) is None and figure_at_max_clock(None, 4824.0) is None
    assert figure_at_max_clock(True, 63.4) == 63.4 and figure_at_max_clock(True, float("nan")) is None
    assert own_basis(True, 63.4, 1742.0, MAX_CLOCK) == Basis.CYCLES  # 12 % below the max clock
    assert own_basis(True, 63.4, 1975.0, MAX_CLOCK) == Basis.TIME  # at the max clock: time is the figure
    assert own_basis(False, 4824.0, 1500.0, MAX_CLOCK) == Basis.TIME
    assert CYCLES == Basis.CYCLES  # the schema's spelling of it
    assert set(guard_bases) == {Basis.TIME, Basis.CYCLES}  # and the readers' check's (guard.check_meaning)


def test_a_power_capped_slowdown_is_found_at_max_clock_with_the_time_figure_beside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The time figure moves ±8 % with the host's clock and hides a 3 % slowdown; at max clock it is plain."""
    rng = random.Random(3)
    fields = [_capped(rng, 63.4) for _ in range(30)] + [_capped(rng, 63.4 * 0.97) for _ in range(3)]
    _runs(tmp_path / "runs", fields)
    target = sqlite_url(tmp_path / "h.sqlite")
    assert main(["history", "--history", target, "ingest", str(tmp_path / "runs")]) == 0
    capsys.readouterr()
    assert main(["history", "--history", target, "changes", "--last", "3"]) == 1
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("SLOWDOWN")]
    assert re.search(r": -(2\.9|3\.0|3\.1) % at max clock \(", line) and "measured -" in line and "3 runs since" in line
    assert main(["history", "--history", target, "show", CAPPED]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "basis" in shown[1] and "measured" in shown[1] and all(" cycles " in row for row in shown[2:-1])


def test_a_memory_bound_record_is_kept_without_a_figure_at_max_clock_and_judged_on_time(tmp_path: Path) -> None:
    doc = document("2026-12-01T10:00:00+00:00", {GEMV: 4650.0, CAPPED: 55.0})
    doc["records"][0].update(clock_bound=False, value_at_max_clock=4824.0, call_clock_mhz=1500.0,
                             max_clock_mhz=MAX_CLOCK)
    doc["records"][1].update(_capped(random.Random(1), 63.4, clock=1742.0))
    with History(sqlite_url(tmp_path / "h.sqlite")) as history:
        assert history.append(doc, "run")
        rows = {row[0]: row for row in history.values()}
        with history.reading() as connection:
            stored = {row.case_id: (row.value_at_max_clock, row.basis)
                      for row in connection.execute(sa.select(RECORDS))}
    assert stored[GEMV] == (None, Basis.TIME) and stored[CAPPED][1] == Basis.CYCLES
    assert rows[GEMV][3] == 4650.0 and rows[GEMV][5] is False  # judged on its measured figure
    assert rows[CAPPED][3] == pytest.approx(63.4, rel=0.01) and rows[CAPPED][5] is True


def test_a_change_of_basis_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A host that starts throttling: the figure judged goes from the measured one to the one at max clock."""
    rng = random.Random(5)
    steady = [_capped(rng, 63.4, clock=1975.0) for _ in range(20)]
    throttled = [_capped(rng, 63.4 * 0.95, clock=1600.0) for _ in range(10)]
    _runs(tmp_path / "runs", steady + throttled)
    target = sqlite_url(tmp_path / "h.sqlite")
    assert main(["history", "--history", target, "ingest", str(tmp_path / "runs")]) == 0
    capsys.readouterr()
    main(["history", "--history", target, "changes"])
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("SLOWDOWN")]
    assert "basis changed: time → cycles" in line


def test_a_version_change_within_a_change_point_s_uncertainty_is_named_with_a_bracketing_commit_range(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The driver changes at run 20, the step lands there, but a low run 19 makes run 19 as good a place: the
    driver is named, and the commits printed run from before run 19 to run 20."""
    values = [100.0 + (1.0 if i % 2 else -1.0) for i in range(20)] + [96.0 + (1.0 if i % 2 else -1.0) for i in range(12)]
    values[19] = 97.8  # a dip of 2 σ
    folder = tmp_path / "runs"
    for number, value in enumerate(values):
        doc = document(f"2026-12-01T{number // 60:02d}:{number % 60:02d}:00+00:00", {CAPPED: value},
                       commit=f"{number:02x}" * 20, driver="580.159.04" if number < 20 else "590.10")
        write(folder / f"run-{number:03d}.json", doc)
    target = sqlite_url(tmp_path / "h.sqlite")
    assert main(["history", "--history", target, "ingest", str(folder)]) == 0
    capsys.readouterr()
    main(["history", "--history", target, "changes"])
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("SLOWDOWN")]
    assert "versions changed: driver 580.159.04 → 590.10" in line
    good, bad = line.split("culprit in commits ")[1].split(" ")[0].split("..")
    assert int(good[:2], 16) < 20 <= int(bad[:2], 16)  # the range holds the run that changed the driver


def test_placement_admits_the_runs_a_step_could_be_at() -> None:
    clear = np.r_[np.full(20, 100.0) + np.tile([0.1, -0.1], 10), np.full(10, 90.0)]
    assert placement(clear, 20, 0, 30) == (20, 20)  # a step of 100 σ: one place
    rng = np.random.default_rng(1)
    noisy = np.r_[rng.normal(100, 1, 30), rng.normal(98.5, 1, 10)]
    first, last = placement(noisy, 30, 0, 40)
    assert first <= 30 <= last and last - first >= 1  # 1.5 σ: several places


@pytest.mark.parametrize("command", [["changes"], ["show", "gemm"], ["page", "--out", "site"]])
def test_reading_commands_never_create_a_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["history", "--history", "nodir/x.sqlite", *command]) != 0
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "nodir").exists()


def test_a_database_without_a_history_is_refused_by_the_reading_commands(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.sqlite"
    engine = sa.create_engine(sqlite_url(other))
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE unrelated (x INTEGER)"))
    engine.dispose()
    assert main(["history", "--history", str(other), "changes"]) == 1
    assert "holds no gpuperf history" in capsys.readouterr().err


def test_an_empty_history_is_an_error_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = sqlite_url(tmp_path / "h.sqlite")
    History(target).close()
    assert main(["history", "--history", target, "changes"]) == 1
    assert "holds no runs; add some with python -m gpuperf history ingest" in capsys.readouterr().err


def test_runs_are_ordered_by_the_instant_they_started(tmp_path: Path) -> None:
    """12:00+05:00 is 07:00 UTC: before 08:00Z, though its text sorts after it."""
    with History(sqlite_url(tmp_path / "h.sqlite")) as history:
        for started, value in (("2026-12-01T08:00:00Z", 2.0), ("2026-12-01T12:00:00+05:00", 1.0),
                               ("2026-12-01T09:00:00+00:00", 3.0)):
            assert history.append(document(started, {CAPPED: value}), started)
        assert [run.started for run in history.runs().values()] == [
            "2026-12-01T12:00:00+05:00", "2026-12-01T08:00:00Z", "2026-12-01T09:00:00+00:00"]
        assert [run.started for run in history.runs(since="2026-12-01T08:30").values()] == [
            "2026-12-01T09:00:00+00:00"]
    assert started_instant("2026-12-01T12:00:00+05:00") == "2026-12-01T07:00:00.000000+00:00"
    assert started_instant("2026-12-01") == "2026-12-01T00:00:00.000000+00:00"
    assert started_instant("yesterday") is None and started_instant(20261201) is None


def test_a_started_that_is_not_a_timestamp_is_refused_where_the_history_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = document("last tuesday", {CAPPED: 1.0})
    with pytest.raises(HistoryInputError, match="'last tuesday' is not a timestamp"):
        check_document(bad, "bad.json")
    write(tmp_path / "runs" / "bad.json", bad)
    assert main(["history", "--history", str(tmp_path / "h.sqlite"), "ingest", str(tmp_path / "runs")]) == 1
    # the results format's reader refuses it first, naming the field (store/field_forms.py)
    assert "bad.json: run: field 'started' must be an ISO 8601 time" in capsys.readouterr().out
    # a history of an older schema that holds such a run: migrated, and refused where its runs are read
    old = sqlite_url(tmp_path / "old.sqlite")
    engine = sa.create_engine(old)
    with engine.begin() as connection:
        for migration in MIGRATIONS[:4]:
            migration(connection)
        connection.execute(sa.insert(VERSION_TABLE).values(version=4))
        connection.execute(sa.text("INSERT INTO runs (run_id, kind, started, appended, source, gpu_model, gpu_slug, "
                                   "host, run_json) VALUES ('bad', 'run', 'last tuesday', '', 'bad.json', 'H200', "
                                   "'nvidia-h200', 'GPU-x', :run)"), {"run": json.dumps({"started": "last tuesday"})})
    engine.dispose()
    with History(old) as history, pytest.raises(HistoryError, match="started 'last tuesday', which is not a timestamp"):
        history.runs()
    with History(old) as history, history.reading() as connection:
        assert connection.execute(sa.select(RUNS.c.started_utc)).scalar() is None


def test_summary_md_s_recent_runs_are_the_judged_figures(tmp_path: Path) -> None:
    """The recent runs summary.md shows for a power-capped case: its figures at max clock, this run's too."""
    from gpuperf.trend.source import summary_history
    from gpuperf.store.records import Record, RunInfo

    rng = random.Random(9)
    url = sqlite_url(tmp_path / "h.sqlite")
    with History(url) as history:
        for day in (1, 2):
            doc = document(f"2026-12-0{day}T10:00:00+00:00", {CAPPED: 50.0})
            doc["records"][0].update(_capped(rng, 63.4))
            assert history.append(doc, f"run-{day}")
    run = RunInfo("NVIDIA H200", "nvidia-h200", "9.0", "580.159.04", "13.2", "13.1.0", "14.2.0", MAX_CLOCK, 3201,
                  ("cold",), "2026-12-03T10:00:00+00:00")
    now = Record(case_id=CAPPED, nodeid=CAPPED, family="gemm", params={}, metric="TFLOPS", value=52.0,
                 unit="TFLOPS", status="PASS", value_at_max_clock=61.5, call_clock_mhz=1700.0,
                 max_clock_mhz=MAX_CLOCK, clock_bound=True)
    shown = summary_history(url, run, [now], tmp_path / "site")
    assert shown is not None
    values = shown.recent[CAPPED].values
    assert len(values) == 3 and all(value is not None and 63.0 < value < 63.8 for value in values[:2])
    assert values[2] == 61.5
