"""Every reader of the history survives damage to a copy of a real database: pages overwritten with random
bytes, and rows edited by hand to values of any type. Each read ends with the answer, or one error line that
names the database and the fix (exit 1), never a traceback. The fast tier runs a few examples; the long tier,
at the long Hypothesis profile, hundreds."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuperf.cli import main
from gpuperf.history.database import History, HistoryError, sqlite_url
from gpuperf.history.schema import SchemaError
from gpuperf.trend.source import load_trend
from tests.history_support import document

CASES = ["perf_tests/test_gemm.py::test_gemm_perf[fp32-512x512x512-cold]",
         "perf_tests/test_gemv.py::test_gemv_perf[fp32-4096x4096-cold]"]
#: Each reading command, as a user runs it.
READERS = [["history", "show", "gemm"], ["history", "changes"], ["history", "changes", "--case", "gemv"]]
#: The tables and columns a hand edit may touch.
COLUMNS = {"runs": ["run_id", "kind", "started", "started_utc", "gpu_slug", "host", "driver", "git_dirty"],
           "records": ["case_id", "method", "run_pk", "value", "value_at_max_clock", "status", "basis", "position",
                       "series_pk", "spread", "kernels"],
           "run_documents": ["run_pk", "encoding", "body"], "series": ["case_id", "method"],
           "schema_version": ["version"]}
ANY_VALUE = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True), st.text(max_size=40),
                      st.binary(max_size=40))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real history of 12 runs of two cases, a slowdown in it, written by the history's own append."""
    path = tmp_path_factory.mktemp("damage") / "history.sqlite"
    with History(sqlite_url(path)) as history:
        for number in range(12):
            values = {CASES[0]: 50.0 - (3.0 if number >= 8 else 0.0) + number % 3 / 10, CASES[1]: 2.0 + number / 100}
            history.append(document(f"2026-12-{number + 1:02d}T10:00:00+00:00", values, commit=f"{number:040x}"),
                           f"run {number}")
    with sqlite3.connect(path) as connection:  # one file, no WAL beside it: a copy is the whole database
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("PRAGMA journal_mode = DELETE")
    connection.close()
    return path


def _read_everything(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every reader, on the damaged copy: an answer, or one error line and exit 1."""
    for command in READERS:
        code = main([*command, "--history", str(path)])
        captured = capsys.readouterr()
        assert code in (0, 1), (command, code, captured.err)
        if captured.err:
            assert code == 1 and captured.err.count("\n") == 1, (command, captured.err)
            assert captured.err.startswith("gpuperf: error: "), captured.err
    try:
        load_trend(sqlite_url(path))  # the trend page's reader
    except (HistoryError, SchemaError) as exc:
        assert "\n" not in str(exc) and "history" in str(exc)


def _copy(pristine: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    damaged = folder / "history.sqlite"
    shutil.copyfile(pristine, damaged)
    return damaged


@settings(max_examples=settings().max_examples // 4 or 1)
@given(damage=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=64)), min_size=1, max_size=4))
def test_readers_survive_overwritten_pages(damage: list[tuple[float, bytes]], pristine: Path, tmp_path_factory:
                                           pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    damaged = _copy(pristine, tmp_path_factory.mktemp("pages"))
    data = bytearray(damaged.read_bytes())
    for where, junk in damage:
        start = int(where * (len(data) - len(junk)))
        data[start:start + len(junk)] = junk
    damaged.write_bytes(bytes(data))
    _read_everything(damaged, capsys)


@settings(max_examples=settings().max_examples // 4 or 1)
@given(edits=st.lists(st.tuples(st.sampled_from(sorted(COLUMNS)), st.data()), min_size=1, max_size=3))
def test_readers_survive_rows_edited_by_hand(edits: list[tuple[str, st.DataObject]], pristine: Path,
                                             tmp_path_factory: pytest.TempPathFactory,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    damaged = _copy(pristine, tmp_path_factory.mktemp("rows"))
    with sqlite3.connect(damaged) as connection:
        for table, data in edits:
            column = data.draw(st.sampled_from(COLUMNS[table]))
            value = data.draw(ANY_VALUE)
            every = data.draw(st.booleans())
            where = "" if every else f" WHERE rowid = (SELECT min(rowid) FROM {table})"
            try:
                connection.execute(f"UPDATE {table} SET {column} = ?{where}", (value,))
            except sqlite3.IntegrityError:
                continue  # a constraint the schema keeps: no hand edit gets past it
    connection.close()
    _read_everything(damaged, capsys)


#: Hand edits that still decode but say what no run could: each makes every reader refuse the history.
MEANINGLESS = [("runs", "started_utc", "yesterday", "is not an instant in UTC"),
               ("records", "status", "BOGUS", "status 'BOGUS' of"),
               ("records", "value", -1, "value '-1.0' of"),
               ("records", "value", "abc", "value 'abc' of")]


@pytest.mark.parametrize(("table", "column", "value", "named"), MEANINGLESS)
def test_hand_edits_that_break_a_fields_meaning_are_refused_by_every_reader_alike(
        table: str, column: str, value: object, named: str, pristine: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    damaged = _copy(pristine, tmp_path / "edited")
    with sqlite3.connect(damaged) as connection:
        connection.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT min(rowid) FROM {table})",
                           (value,))
    connection.close()
    for command in [*READERS, ["history", "page", "--out", str(tmp_path / "site")]]:
        assert main([command[0], "--history", str(damaged), *command[1:]]) == 1, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot be read, it is damaged or was edited by hand" in err, (command, err)
        assert named in err, (command, err)
    assert not (tmp_path / "site").exists()
    with pytest.raises(HistoryError, match="edited by hand"):
        load_trend(sqlite_url(damaged))
