"""A backfill of many files: read and checked in worker processes, written in the files' order, on both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from history_support import ENGINES, TEMPLATE, database_url  # noqa: F401  (a fixture)
from gpuperf.history.database import History
from gpuperf.history import backfill
from gpuperf.history.schema import RUNS

pytestmark = pytest.mark.parametrize("database_url", ENGINES, indirect=True)

#: The pool's threshold in the fast tier: what the pool does (order, refusals, inherited state) is under test, not
#: where it pays; the long tier's parity bench ingests at the real threshold.
SMALL_POOL = 12


@pytest.fixture(autouse=True)
def _small_pool(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("long") is None:
        monkeypatch.setattr(backfill, "POOL_FILES", SMALL_POOL)


def _files(folder: Path, count: int) -> list[Path]:
    """``count`` results files of distinct runs (the README's H200 run, started an hour apart, figures moved)."""
    folder.mkdir(parents=True)
    paths = []
    for number in range(count):
        data = json.loads(json.dumps(TEMPLATE))
        data["run"]["started"] = f"2027-01-{1 + number // 24:02d}T{number % 24:02d}:00:00+00:00"
        for index, record in enumerate(data["records"]):
            record["value"] = record["value"] * (1 + 0.001 * ((number * 7 + index) % 11))
        path = folder / f"run-{number:03d}.json"
        path.write_text(json.dumps(data, indent=2) + "\n")
        paths.append(path)
    return paths


@pytest.mark.long
def test_a_pool_ingests_every_file_in_order_and_names_the_refused(database_url: str, tmp_path: Path) -> None:
    paths = _files(tmp_path / "runs", backfill.POOL_FILES + 6)
    broken = tmp_path / "runs" / "run-010.json"
    broken.write_text(broken.read_text().replace('"value": ', '"value": "', 1))  # damaged JSON
    duplicated = tmp_path / "runs" / "run-011.json"
    data = json.loads(duplicated.read_text())
    duplicated.write_text(json.dumps(data)[:-1] + ', "schema": 1}')  # a repeated key
    with History(database_url) as history:
        first = history.ingest([tmp_path / "runs"], workers=2, batch=7)
        second = history.ingest([tmp_path / "runs"], workers=2)
        kept = [path for path in paths if path not in (broken, duplicated)]
        assert first.added == kept and second.present == kept and second.added == []
        assert sorted(path for path, _ in first.refused) == [broken, duplicated]
        reasons = dict(first.refused)
        assert "not valid JSON" in reasons[broken] and "appears twice" in reasons[duplicated]
        engine = sa.create_engine(database_url)
        with engine.connect() as connection:
            started = [row.started for row in connection.execute(sa.select(RUNS.c.started).order_by(RUNS.c.pk))]
        engine.dispose()
        assert started == [json.loads(path.read_text())["run"]["started"] for path in kept]
        last = json.loads(kept[-1].read_text())["records"][3]
        runs = history.runs()
        assert history.record_data(last["case_id"], list(runs)[-1]) == last


@pytest.mark.long  # a parity bench of the two paths; the fast tier ingests through the pool in the tests around it
def test_a_pool_and_the_main_process_store_the_same_rows(database_url: str, tmp_path: Path) -> None:
    _files(tmp_path / "runs", backfill.POOL_FILES)
    with History(database_url) as history:
        history.ingest([tmp_path / "runs"], workers=2)
        pooled = history.values()
    other = tmp_path / "other.sqlite"
    with History(f"sqlite:///{other}") as history:
        history.ingest([tmp_path / "runs"], workers=1)
        inline = history.values()
    assert len(pooled) == backfill.POOL_FILES * len(TEMPLATE["records"])
    def without_pk(rows: list[tuple[str, str, int, float | None, str, bool]]) -> list[tuple[str, str, float, str, bool]]:
        return sorted((case, method, value or 0.0, status, cycles) for case, method, _, value, status, cycles in rows)

    assert without_pk(pooled) == without_pk(inline)  # (the engines number their runs each their own way)


@pytest.mark.long
def test_a_file_whose_run_is_held_already_is_not_parsed_again(database_url: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A backfill run again over the same folder: a file whose bytes are a held run's (its id is their SHA-256)
    is counted present without being parsed, in the pool's workers and in the main process; a file whose bytes
    changed is parsed and added."""
    from gpuperf.history import rows as history_rows

    paths = _files(tmp_path / "runs", backfill.POOL_FILES + 2)
    with History(database_url) as history:
        assert len(history.ingest([tmp_path / "runs"], workers=2).added) == len(paths)
        parsed: list[bytes] = []
        real_parse = history_rows.parse_results_document

        def refuse_to_parse(*arguments: Any) -> Any:
            raise AssertionError(f"{arguments[0]!r:.80} was parsed again")

        monkeypatch.setattr(history_rows, "parse_results_document", refuse_to_parse)
        again = history.ingest([tmp_path / "runs"], workers=2)  # forked workers inherit the refusal
        assert again.present == paths and again.added == [] and again.refused == []

        def counted(path: Path, raw: bytes) -> Any:
            parsed.append(raw)
            return real_parse(path, raw)

        monkeypatch.setattr(history_rows, "parse_results_document", counted)
        changed = json.loads(paths[5].read_text())
        changed["records"][0]["value"] *= 1.01
        paths[5].write_text(json.dumps(changed, indent=2) + "\n")
        third = history.ingest([tmp_path / "runs"], workers=1)
        assert parsed == [paths[5].read_bytes()] and third.added == [paths[5]] and len(third.present) == len(paths) - 1
