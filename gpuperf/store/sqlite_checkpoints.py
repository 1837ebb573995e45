"""A backfill's SQLite checkpoints, taken by a thread of their own so that the writer never waits for the disk.

In WAL mode a commit appends pages to the write-ahead log without syncing it (``synchronous = NORMAL``); a
checkpoint copies the log into the database and syncs both. SQLite runs one in the committing connection once
the log exceeds its limit, and a backfill's writer then stands still for the copy and the syncs, a seventh of
its time on a virtual machine's disk. While a backfill runs, a second connection takes ``PASSIVE`` checkpoints
(they never block the writer, nor wait for it) a few times a second, with the interpreter's lock released while
SQLite works: the log is copied while the writer goes on, and the writer's own checkpoints find little left to
copy. Nothing about durability changes: a committed transaction is in the log either way.

A checkpoint that fails (a full disk) ends the thread and leaves checkpointing to the writer, which meets the
same fault on its next commit and reports it; what was committed is already safe in the log.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

#: Seconds between a backfill's checkpoints: a few megabytes of log each.
CHECKPOINT_INTERVAL_S = 0.25


@contextmanager
def checkpointing(engine: sa.Engine, interval_s: float = CHECKPOINT_INTERVAL_S) -> Iterator[None]:
    """Passive checkpoints of ``engine``'s SQLite database every ``interval_s`` while the block runs (nothing
    for another engine, or a database in memory)."""
    database = engine.url.database or ""
    if engine.dialect.name != "sqlite" or database in ("", ":memory:"):
        yield
        return
    stop = threading.Event()
    worker = threading.Thread(target=_checkpoint_until, args=(engine, stop, interval_s),
                              name="gpuperf-checkpoints", daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()


def _checkpoint_until(engine: sa.Engine, stop: threading.Event, interval_s: float) -> None:
    try:
        connection = engine.raw_connection()
    except sa.exc.SQLAlchemyError:
        return
    try:
        while not stop.wait(interval_s):
            cursor = connection.cursor()
            try:
                cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
                cursor.fetchall()
            finally:
                cursor.close()
    except sqlite3.Error:  # the writer meets the same fault on its next commit, and reports it
        return
    finally:
        connection.close()
