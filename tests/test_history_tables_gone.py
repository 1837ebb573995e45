"""A history edited by hand past what a reader checks, on both engines: a ``schema_version`` that holds text, a
``runs`` or ``records`` table dropped. ``history ingest`` and the readers say it in one line, exit 1, never a
traceback (issue 54)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from gpuperf.history.database import History, to_url
from history_support import ENGINES, ROOT, database_url  # noqa: F401  (the fixture)

RUNS = [ROOT / "evidence" / "fleet" / "1e941103-1.json", ROOT / "evidence" / "fleet" / "1e941103-2.json"]
CASE = "test_batched_gemm_perf[strided-fp32-1024x256x256x256-cold]"
EDITS = {
    "schema_version holds 'abc'": ["ALTER TABLE schema_version ALTER COLUMN version TYPE text",
                                   "UPDATE schema_version SET version = 'abc'"],
    "runs table dropped": ["DROP TABLE runs CASCADE"],
    "records table dropped": ["DROP TABLE records CASCADE"],
}


def _edited(url: str, edit: str) -> None:
    with History(url) as history:
        history.append(json.loads(RUNS[0].read_text()), str(RUNS[0]))
    engine = sa.create_engine(to_url(url, ROOT))
    with engine.begin() as connection:
        for statement in EDITS[edit]:
            if connection.dialect.name == "sqlite":  # no ALTER COLUMN TYPE, no CASCADE: SQLite holds any text
                statement = statement.replace(" CASCADE", "")
                if statement.startswith("ALTER"):
                    continue
            connection.execute(sa.text(statement))
    engine.dispose()


@pytest.mark.long
@pytest.mark.parametrize("database_url", ENGINES, indirect=True)
@pytest.mark.parametrize("edit", list(EDITS))
def test_a_history_edited_by_hand_is_one_line_for_ingest_and_readers(database_url: str, edit: str,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    _edited(database_url, edit)
    for command in (["history", "ingest", str(RUNS[1])], ["history", "changes"], ["history", "show", CASE]):
        done = subprocess.run([sys.executable, "-m", "gpuperf", *command, "--history", database_url], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=False,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
        assert done.returncode == 1 and done.stderr.count("\n") == 1, (command, done.stderr)
        assert "Traceback" not in done.stderr
        assert ": cannot be read, it is damaged or was edited by hand (" in done.stderr, (command, done.stderr)
