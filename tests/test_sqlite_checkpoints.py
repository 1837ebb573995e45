"""A backfill's checkpoints are taken by a thread of their own: the write-ahead log reaches the database file
while the writer goes on, without the writer checkpointing, and the thread ends with the block."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from gpuperf.store.history import create_engine, sqlite_url
from gpuperf.store.sqlite_checkpoints import checkpointing

ROWS = 2000
PAYLOAD = "x" * 500


def _execute(engine: sa.Engine, *statements: str) -> None:
    """Statements on a connection of the engine's own, outside any transaction but the writes' own."""
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        for statement in statements:
            if statement.startswith("INSERT"):
                cursor.execute("BEGIN IMMEDIATE")
                cursor.executemany(statement, [(PAYLOAD,)] * ROWS)
                cursor.execute("COMMIT")
            else:
                cursor.execute(statement).fetchall()
    finally:
        connection.close()


def _write_without_checkpoints(engine: sa.Engine) -> None:
    _execute(engine, "PRAGMA wal_autocheckpoint = 0", "INSERT INTO rows (body) VALUES (?)")


def _threads() -> set[str]:
    return {thread.name for thread in threading.enumerate()}


@pytest.mark.parametrize("checkpointed", [True, False])
def test_the_log_reaches_the_database_while_the_writer_goes_on(tmp_path: Path, checkpointed: bool) -> None:
    database = tmp_path / "history.sqlite"
    engine = create_engine(sqlite_url(database))
    try:
        # the empty table is in the database file, not only in the log
        _execute(engine, "CREATE TABLE rows (pk INTEGER PRIMARY KEY, body TEXT)", "PRAGMA wal_checkpoint(TRUNCATE)")
        empty = database.stat().st_size
        if checkpointed:
            with checkpointing(engine, interval_s=0.01):
                assert "gpuperf-checkpoints" in _threads()
                _write_without_checkpoints(engine)
                deadline = time.monotonic() + 10
                while database.stat().st_size < empty + ROWS * len(PAYLOAD) and time.monotonic() < deadline:
                    time.sleep(0.01)
        else:
            _write_without_checkpoints(engine)
            time.sleep(0.1)
        assert "gpuperf-checkpoints" not in _threads()
        grown = database.stat().st_size - empty
        if checkpointed:
            assert grown >= ROWS * len(PAYLOAD)
        else:
            assert grown < ROWS * len(PAYLOAD) // 10  # the rows are in the log only
        connection = engine.raw_connection()
        try:
            assert connection.cursor().execute("SELECT count(*) FROM rows").fetchone()[0] == ROWS
        finally:
            connection.close()
    finally:
        engine.dispose()


def test_no_thread_for_a_database_in_memory() -> None:
    engine = sa.create_engine("sqlite://")
    with checkpointing(engine, interval_s=0.01):
        assert "gpuperf-checkpoints" not in _threads()
    engine.dispose()
