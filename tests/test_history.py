"""The history store on both engines: append, the run id, ingest, migrations, a newer schema, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
import sqlalchemy as sa

from history_support import ENGINES, ROOT, database_url, document, write  # noqa: F401  (a fixture)
from gpuperf.history.database import History, HistoryError, records_with_data, resolve_target, sqlite_url, to_url
from gpuperf.history.rows import RECORD_VALUE_COLUMNS, canonical_text, run_id
from gpuperf.history.schema import (MIGRATIONS, RECORDS, RUN_DOCUMENTS, RUNS, SCHEMA_VERSION, SERIES_INDEX,
                                          VERSION_TABLE, SchemaError, decode_document, has_series_index)

pytestmark = pytest.mark.parametrize("database_url", ENGINES, indirect=True)

CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"


def _count(url: str, table: sa.Table) -> int:
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        count = connection.execute(sa.select(sa.func.count()).select_from(table)).scalar()
    engine.dispose()
    return int(count or 0)


def test_a_run_is_appended_once_and_every_figure_is_kept(database_url: str) -> None:
    doc = document("2026-12-01T10:00:00+00:00", {CASE: 50.0, CASE + "x": 40.0}, commit="c" * 40,
                   cycles_per_call=123456.0, value_at_max_clock=51.0, sm_clock_mhz=1755, future_field={"a": 1},
                   clock_bound=True, call_clock_mhz=1700.0, max_clock_mhz=1980)
    with History(database_url) as history:
        assert history.append(doc, "a") is True
        assert history.append(json.loads(json.dumps(doc)), "b") is False  # same document: same run id
        runs = history.runs()
        data = history.record_data(CASE, next(iter(runs)))
    assert _count(database_url, RUNS) == 1 and _count(database_url, RECORDS) == 2
    (run,) = runs.values()
    assert run.run_id == run_id(canonical_text(doc)) and run.git_commit == "c" * 40 and run.host == "GPU-aaaa0001"
    assert data is not None and data["future_field"] == {"a": 1} and data["value"] == 50.0
    engine = sa.create_engine(database_url)
    with engine.connect() as connection:
        row = connection.execute(sa.select(RECORDS).where(RECORDS.c.case_id == CASE)).one()
        run_row = connection.execute(sa.select(RUNS)).one()
    engine.dispose()
    assert (row.cycles_per_call, row.value_at_max_clock, row.sm_clock_mhz) == (123456.0, 51.0, 1755.0)
    assert row.basis == "cycles"  # clock-bound, its calls 14 % below the max clock: judged at max clock
    assert row.spread == doc["records"][0]["rel_iqr"] and row.samples == doc["records"][0]["samples"]
    assert row.kernels.startswith("sm80_xmma_gemm_f32f32") and row.method == "cupti-cold"
    assert run_row.gpu_serial == "serial-GPU-aaaa0001" and run_row.pci_bus_id == "0000:00:06.0"
    assert run_row.driver == "580.159.04" and run_row.cupy == "14.2.0" and run_row.git_dirty is False


def test_ingest_backfills_and_a_second_ingest_adds_nothing(database_url: str, tmp_path: Path) -> None:
    write(tmp_path / "results" / "20261201-100000" / "results.json", document("2026-12-01T10:00:00+00:00", {CASE: 50}))
    (tmp_path / "results" / "notes.json").write_text('{"not": "results"}')
    paths = [tmp_path / "results", ROOT / "evidence" / "h200"]
    runs = 1 + len(list((ROOT / "evidence" / "h200").glob("*.json")))  # the committed gate runs, and this one
    with History(database_url) as history:
        first = history.ingest(paths)
        second = history.ingest(paths)
    assert len(first.added) == runs and len(first.refused) == 1
    assert "notes.json" in str(first.refused[0][0]) and "not a gpuperf results file" in first.refused[0][1]
    assert second.added == [] and len(second.present) == runs
    assert _count(database_url, RUNS) == runs


def test_an_old_schema_is_migrated_keeping_its_runs(database_url: str) -> None:
    engine = sa.create_engine(database_url)
    with engine.begin() as connection:
        MIGRATIONS[0](connection)
        connection.execute(sa.insert(VERSION_TABLE).values(version=1))
        connection.execute(sa.text("INSERT INTO runs (run_id, kind, started, appended, source, gpu_model, gpu_slug, "
                                   "host, run_json) VALUES ('old', 'run', '2026-01-01', '2026-01-01', 'x', 'H200', "
                                   "'nvidia-h200', 'GPU-old', '{}')"))
    with History(database_url) as history:
        assert history.append(document("2026-12-01T10:00:00+00:00", {CASE: 50}, cycles_per_call=9.0), "new")
        assert {run.run_id for run in history.runs().values()} >= {"old"}
    with engine.connect() as connection:
        version = connection.execute(sa.select(VERSION_TABLE.c.version)).scalar()
        columns = {table: {column["name"] for column in sa.inspect(connection).get_columns(table)}
                   for table in ("runs", "records")}
    engine.dispose()
    assert version == SCHEMA_VERSION
    assert columns == {"runs": set(RUNS.c.keys()), "records": set(RECORDS.c.keys())}


def test_a_version_3_database_keeps_every_figure_of_every_record_in_its_runs_documents(database_url: str) -> None:
    """Schema 3 kept each record's JSON in ``records.data``; 4 keeps each run's document once, compressed."""
    docs = [document(f"2026-12-0{day}T10:00:00+00:00", {CASE: 50.0 + day, CASE + "x": 40.0 - day}, commit=str(day) * 40,
                     future_field={"day": day}) for day in (1, 2)]
    engine = sa.create_engine(database_url)
    with engine.begin() as connection:
        for migration in MIGRATIONS[:3]:
            migration(connection)
        connection.execute(sa.insert(VERSION_TABLE).values(version=3))
        for number, doc in enumerate(docs, start=1):
            connection.execute(sa.text(
                "INSERT INTO runs (run_id, kind, started, appended, source, gpu_model, gpu_slug, host, run_json) "
                "VALUES (:id, 'run', :started, :started, 'old', 'H200', 'nvidia-h200', 'GPU-old', :run)"),
                {"id": f"old{number}", "started": doc["run"]["started"], "run": json.dumps(doc["run"])})
            pk = connection.execute(sa.text("SELECT pk FROM runs WHERE run_id = :id"), {"id": f"old{number}"}).scalar()
            for record in doc["records"]:
                connection.execute(sa.text("INSERT INTO records (run_pk, case_id, value, data) "
                                           "VALUES (:pk, :case, :value, :data)"),
                                   {"pk": pk, "case": record["case_id"], "value": record["value"],
                                    "data": json.dumps(record)})
    with History(database_url) as history:
        kept = {pk: history.record_data(CASE + "x", pk) for pk in history.runs()}
        assert history.append(document("2026-12-03T10:00:00+00:00", {CASE: 53.0}), "new")
        groups, pks, figures, _ = history.series_columns()
        shown = {case: sorted(row[3] for row in history.values(case=case)) for case in (CASE, CASE + "x")}
    # the migrated records are numbered into their series (and, with no status kept, not judged)
    assert shown == {CASE: [51.0, 52.0, 53.0], CASE + "x": [38.0, 39.0]}
    assert [group[0] for group in groups] == [CASE] and figures.tolist() == [53.0] and len(pks) == 1
    with engine.connect() as connection:
        version = connection.execute(sa.select(VERSION_TABLE.c.version)).scalar()
        columns = {column["name"] for column in sa.inspect(connection).get_columns("records")}
        bodies = connection.execute(sa.select(RUN_DOCUMENTS.c.run_pk, RUN_DOCUMENTS.c.body)
                                    .order_by(RUN_DOCUMENTS.c.run_pk)).all()
    engine.dispose()
    assert version == SCHEMA_VERSION == 6 and "data" not in columns and "position" in columns and "basis" in columns
    assert list(kept.values()) == [docs[0]["records"][1], docs[1]["records"][1]]  # every key, the future one too
    assert [json.loads(decode_document(body))["records"] for _, body in bodies[:2]] == [doc["records"] for doc in docs]


def test_a_run_document_is_its_results_text_and_records_get_their_data_back(database_url: str) -> None:
    doc = document("2026-12-01T10:00:00+00:00", {CASE: 50.0, CASE + "x": 40.0}, sm_clock_mhz=[1755, 1740])
    text = json.dumps(doc, indent=1)
    with History(database_url) as history:
        assert history.append(doc, "a", text)
        with history.reading() as connection:
            (body,) = connection.execute(sa.select(RUN_DOCUMENTS.c.body)).scalars()
            rows = [dict(row._mapping) for row in connection.execute(sa.select(RECORDS).order_by(RECORDS.c.pk))]
            with_data = records_with_data(connection, rows)
    assert decode_document(body) == text and run_id(decode_document(body)) == next(iter(
        History(database_url).runs().values())).run_id
    assert [json.loads(row["data"]) for row in with_data] == doc["records"]
    assert rows[0]["sm_clock_mhz"] == 1747.5 and [row["position"] for row in rows] == [0, 1]
    assert tuple(RECORDS.c.keys()) == ("pk", *RECORD_VALUE_COLUMNS)  # the driver-level INSERT's column order


def test_a_backfill_builds_the_series_index_at_its_end_and_an_interrupted_one_is_repaired(database_url: str) -> None:
    with History(database_url) as history:
        with pytest.raises(KeyboardInterrupt), history.bulk():
            history.append(document("2026-12-01T10:00:00+00:00", {CASE: 50.0}), "a")
            with history.reading() as connection:
                assert not has_series_index(connection)
            raise KeyboardInterrupt
        with history.reading() as connection:
            assert has_series_index(connection)  # rebuilt on the way out
        with history.engine.begin() as connection:
            connection.execute(sa.text(f"DROP INDEX {SERIES_INDEX}"))  # as a killed backfill leaves it
    with History(database_url) as history, history.reading() as connection:
        assert has_series_index(connection)
        assert len(history.values(case=CASE)) == 1


def test_a_newer_schema_is_refused_naming_the_fix(database_url: str) -> None:
    History(database_url).close()
    engine = sa.create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.update(VERSION_TABLE).values(version=SCHEMA_VERSION + 1))
    engine.dispose()
    with pytest.raises(SchemaError, match=f"schema version {SCHEMA_VERSION + 1}, newer than the {SCHEMA_VERSION}.*"
                                          "upgrade gpuperf"):
        History(database_url)


def _append_many(url: str, writer: int, runs: int) -> None:
    with History(url) as history:
        for number in range(runs):
            values = {f"{CASE}-{case}": 40.0 + writer + number / 100 for case in range(20)}
            history.append(document(f"2026-12-01T10:{writer:02d}:{number:02d}+00:00", values,
                                    host=f"GPU-writer{writer}"), f"writer {writer}")
        history.append(document("2026-12-01T09:00:00+00:00", {CASE: 1.0}), "everyone")  # the same run, at once


def test_concurrent_writers_lose_nothing(database_url: str) -> None:
    History(database_url).close()
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    writers = [context.Process(target=_append_many, args=(database_url, writer, 10)) for writer in range(4)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=300)
    assert [process.exitcode for process in writers] == [0, 0, 0, 0]
    assert _count(database_url, RUNS) == 4 * 10 + 1
    assert _count(database_url, RECORDS) == 4 * 10 * 20 + 1


def test_targets_resolve_from_the_option_the_environment_or_the_default(database_url: str, tmp_path: Path) -> None:
    assert resolve_target(None, {}, tmp_path) == sqlite_url(tmp_path / "results" / "history.sqlite")
    assert resolve_target("none", {"GPUPERF_HISTORY": "x.sqlite"}, tmp_path) is None
    assert resolve_target(None, {"GPUPERF_HISTORY": "x.sqlite"}, tmp_path) == sqlite_url(tmp_path / "x.sqlite")
    assert resolve_target("postgresql://u@h/db", {}, tmp_path) == "postgresql+psycopg://u@h/db"
    assert to_url(database_url, tmp_path) == database_url
    with pytest.raises(HistoryError, match="unknown database kind 'mysql'"):
        resolve_target("mysql://u@h/db", {}, tmp_path)


def test_a_run_written_twice_through_the_drivers_cursor_is_refused_as_sqlalchemy_refuses_it(database_url: str) -> None:
    """The writer hands a run's rows to the driver's own cursor; a run id taken already (another process appended
    the run first) is still SQLAlchemy's IntegrityError, which the append answers by finding the run present."""
    from gpuperf.history import writes as history_writes
    from gpuperf.history.backfill import prepare

    run = document("2026-12-01T11:00:00+00:00", {CASE: 2.0})
    with History(database_url) as history:
        assert history.append(run, "first")
        row, body, columns = prepare(run, "again", None)
        with pytest.raises(sa.exc.IntegrityError), history.engine.begin() as connection, \
                history_writes.driver_cursor(connection) as cursor:
            history._insert(connection, cursor, row, body, columns)
        assert history.append(run, "again") is False
    assert _count(database_url, RUNS) == 1
