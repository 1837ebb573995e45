"""How the history's database is connected to: the engine for a URL, with SQLite's settings on every connection.

SQLite runs in WAL mode with a busy timeout, and every writing transaction starts with ``BEGIN IMMEDIATE``
(reading ones, marked ``gpuperf_read`` or on a read-only engine, with ``BEGIN``): concurrent sessions on one
machine queue for the write lock instead of failing half-way. PostgreSQL's engine checks a pooled connection
before it is used.

An engine for a command that only reads (``read_only``) cannot change its database, and leaves no file beside it:
SQLite's file is opened as ``reading_mode`` says (read-only, or read-write with ``query_only`` so that SQLite
removes the ``-wal`` and ``-shm`` reading a WAL-mode file makes, or immutable on read-only storage), and left in
the journal mode it has; PostgreSQL's sessions are read-only transactions. A 0-byte file, another program's
database or a file that is not one is left byte for byte as it was.

Every writing connection to a SQLite file holds a shared ``flock`` on it (``_held_open``): a command that made a
new file and added nothing to it removes it again (``removed_unless_kept``) only under the exclusive lock, so
never while another writer has it open, and never once another writer's runs are in it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import fcntl
import os
import itertools
import sqlite3
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

from gpuperf.store.history_target import HistoryError, mask_text, mask_url

#: Seconds a writer waits for SQLite's write lock before giving up.
SQLITE_BUSY_TIMEOUT_S = 60
#: SQLite's page cache per connection: the series index's pages of a long history stay in memory during a
#: backfill instead of being read back for every run.
SQLITE_CACHE_KIB = 64 * 1024
#: A new database's page size: a backfill's writing takes a quarter less time than with 4 KiB pages (fewer pages
#: to split and to log for the same rows), and reading whole series does not slow.
SQLITE_PAGE_BYTES = 16384
#: WAL pages between SQLite's checkpoints (each syncs the WAL and the database): 64 MiB rather than the default
#: 4 MiB saves a backfill of a gigabyte some 250 pairs of syncs; what is committed is as durable either way.
SQLITE_CHECKPOINT_PAGES = 64 * 2**20 // SQLITE_PAGE_BYTES


def describe(url: str) -> str:
    """The URL without its password, for messages (``history_target.mask_url``: the one rule)."""
    return mask_url(url)


def _sqlite_engine(url: sa.URL, create: bool, read_only: bool) -> sa.Engine:
    database = url.database or ""
    if database and database != ":memory:" and not create and not Path(database).is_file():
        raise HistoryError(f"history {database}: no such file; pass --history the database that pytest "
                           "perf_tests appends to (default results/history.sqlite), or build one with python -m "
                           "gpuperf history ingest results/")
    if database and database != ":memory:" and create:
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"history {database}: its folder cannot be created ({exc.strerror or exc}); "
                               "choose a writable path with --history, or --history none") from exc
    if database and database != ":memory:" and not read_only:
        _require_writable(Path(database))
    if read_only and database and database != ":memory:":
        url = url.set(database=f"file:{quote(str(Path(database).resolve()))}",
                      query={"uri": "true", **_READING[reading_mode(Path(database))]})
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
    if not read_only and database and database != ":memory:":
        _held_while(engine, Path(database))

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions begin below, not in the driver
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        if read_only:  # opened read-write only so that SQLite removes its -wal and -shm: no statement may write
            cursor.execute("PRAGMA query_only = ON")
        else:  # each of these writes the file (a reader leaves it in the mode it has)
            cursor.execute(f"PRAGMA page_size = {SQLITE_PAGE_BYTES}")  # a new database's; one there keeps its own
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_CHECKPOINT_PAGES}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        reading = read_only or connection.get_execution_options().get("gpuperf_read", False)
        connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")

    return engine


#: A SQLite database file's first bytes, and where its header says it is in WAL mode (its write and read
#: versions, bytes 18 and 19, are 2: https://www.sqlite.org/fileformat2.html#the_database_header).
_SQLITE_MAGIC = b"SQLite format 3\x00"
_WAL_VERSIONS = slice(18, 20)


#: The URI parameters of each ``reading_mode``.
_READING = {"ro": {"mode": "ro"}, "rw": {"mode": "rw"}, "immutable": {"mode": "ro", "immutable": "1"}}


def reading_mode(path: Path) -> str:
    """How a reader opens a SQLite file so that it neither writes it nor leaves a file beside it:

    - ``"ro"`` (``mode=ro``): a file that is not in WAL mode (a rollback journal is made only by a writer), or one
      whose ``-wal`` is there already (a writer has it open, or left it: its frames are read where they are);
    - ``"rw"``: a WAL-mode file with no ``-wal``, in a writable folder: opened read-write with ``query_only``, so
      that the last connection to close removes the ``-wal`` and ``-shm`` that reading makes (a read-only
      connection cannot, and left them behind); there are no frames to move, so the file keeps every byte;
    - ``"immutable"``: a WAL-mode file with no ``-wal`` on storage this user cannot write (a read-only mount):
      no ``-shm`` can be made there, and nothing can change the file, so SQLite reads it without one.
    """
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return "ro"  # the driver names the cause
    in_wal = header.startswith(_SQLITE_MAGIC) and header[_WAL_VERSIONS] == b"\x02\x02"
    if not in_wal or os.path.lexists(f"{path}-wal"):
        return "ro"
    writable = os.access(path, os.R_OK | os.W_OK) and os.access(path.resolve().parent, os.W_OK | os.X_OK)
    return "rw" if writable else "immutable"


def _require_writable(path: Path) -> None:
    """A history this process is to write: an existing file it can read but not write (or in a folder it cannot
    write, where SQLite keeps its journal) is refused with the fix, not SQLite's "unable to open database file"."""
    if not path.exists():
        return
    folder = path.resolve().parent
    if not os.access(path, os.W_OK) or not os.access(folder, os.W_OK):
        which = "the file" if not os.access(path, os.W_OK) else f"its folder {folder}"
        raise HistoryError(f"history {path}: can be read but not written here ({which} is read-only); the reading "
                           "commands (history show, changes, page) work on it as it is; to add runs, make it "
                           "writable or pass --history a copy in a writable folder")


#: This process's shared ``flock`` on each SQLite file it writes, by (device, inode): held while an engine that
#: writes it exists (``_ENGINES``), and never closed while one may have a connection open, since closing any
#: descriptor of a file drops the process's POSIX locks on it, SQLite's own among them.
_HELD: dict[tuple[int, int], int] = {}
#: The engines of this process that write each file held (a number each, so that an engine of a file since
#: removed never releases another file that took its inode).
_ENGINES: dict[tuple[int, int], set[int]] = {}
_ENGINE_NUMBERS = itertools.count()


def _held_while(engine: sa.Engine, path: Path) -> None:
    """Hold ``path`` (``_hold``) for as long as ``engine`` exists: released when the last engine writing it is
    gone (its connections closed with it), so a process that writes many histories keeps no descriptor of each."""
    key = _hold(path)
    if key is None:
        return
    number = next(_ENGINE_NUMBERS)
    _ENGINES.setdefault(key, set()).add(number)
    weakref.finalize(engine, _released, key, number)


def _released(key: tuple[int, int], number: int) -> None:
    engines = _ENGINES.get(key)
    if engines is None or number not in engines:  # the file was removed, its lock with it (``_removed_if_unused``)
        return
    engines.discard(number)
    if not engines:
        del _ENGINES[key]
        descriptor = _HELD.pop(key, None)
        if descriptor is not None:
            os.close(descriptor)


def _hold(path: Path) -> tuple[int, int] | None:
    """A shared ``flock`` on the file ``path`` names now (made if it is not there), held by this process: a file
    removed while this waited for the lock is opened again, so the lock is never held on a file gone. A file this
    process cannot open for writing gets no lock: SQLite's own error says why it cannot be written."""
    while True:
        try:
            there = os.stat(path)
            if (there.st_dev, there.st_ino) in _HELD:
                return there.st_dev, there.st_ino
        except FileNotFoundError:
            pass
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:
            return None
        status = os.fstat(descriptor)
        key = (status.st_dev, status.st_ino)
        fcntl.flock(descriptor, fcntl.LOCK_SH)
        try:
            if os.stat(path).st_ino == status.st_ino:
                _HELD[key] = descriptor
                return key
        except FileNotFoundError:
            pass
        os.close(descriptor)


def create_engine(url: str, create: bool = True, read_only: bool = False) -> sa.Engine:
    """The engine for ``url``; ``create``: a SQLite file (and its folder) that is not there is made, else it is
    a ``HistoryError`` that names the fix (a command that reads a history never makes one); ``read_only``: an
    engine that cannot write (the module's docstring)."""
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as exc:
        cause = mask_text(str(exc), url).splitlines()[0][:200]
        raise HistoryError(f"history {mask_url(url)!r}: not a database URL ({cause}); "
                           "write sqlite:///PATH or postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE") from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, create, read_only)
    options = {"connect_args": {"options": "-c default_transaction_read_only=on"}} if read_only else {}
    try:
        return sa.create_engine(parsed, pool_pre_ping=True, **options)
    except ImportError as exc:
        from gpuperf.install.command import install_command

        raise HistoryError(f"history {describe(url)}: the PostgreSQL driver is missing ({exc}): "
                           f"{install_command('postgres')}") from exc


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (``None`` for another engine's, or one naming no file)."""
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


@contextmanager
def removed_unless_kept(url: str) -> Iterator[list[bool]]:
    """A SQLite file that is not there yet, and the folders made for it, removed again at the end unless the
    caller sets the flag it is given (``kept[0] = True``): a command that fails, or adds nothing, leaves no new
    file behind. Only the file this process created is removed, and only when no other writer has it open and it
    holds no run (another ingest or a suite's session may have filled it meanwhile). Another engine's database,
    and a file that was there or that another process made first, are left as they are."""
    kept = [False]
    path = sqlite_file(url)
    if path is None or os.path.lexists(path):
        yield kept
        return
    made = [folder for folder in [path.parent, *path.parent.parents] if not folder.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
        created = os.stat(path).st_ino
    except OSError:  # another process made it first, or the folder is not writable (the engine says so)
        yield kept
        return
    try:
        yield kept
    finally:
        if not kept[0] and _removed_if_unused(path, created):
            for folder in made:  # the innermost first
                try:
                    folder.rmdir()
                except OSError:
                    break


def _removed_if_unused(path: Path, created: int) -> bool:
    """Remove ``path`` (with its journal files) if it is still the file this process created (inode ``created``),
    no other writer has it open (the exclusive ``flock``: each holds a shared one, ``_hold``), and it holds no
    run; whether it was removed. Called once this process's connections to it are closed."""
    try:
        status = os.stat(path)
    except OSError:
        return False
    key = (status.st_dev, status.st_ino)
    descriptor = _HELD.get(key)
    if descriptor is None:
        try:
            descriptor = _HELD[key] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fcntl.flock(descriptor, fcntl.LOCK_SH)  # another writer has it open: kept, and held as before
        return False
    if status.st_ino != created or _holds_runs(path):
        fcntl.flock(descriptor, fcntl.LOCK_SH)
        return False
    for name in (path, *(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
        name.unlink(missing_ok=True)
    os.close(_HELD.pop(key))
    _ENGINES.pop(key, None)  # an engine still to be collected finds nothing to release
    return True


def _holds_runs(path: Path) -> bool:
    """Whether the SQLite file holds a run (or cannot be read: then it is kept)."""
    try:
        connection = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error:
        return True
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return "runs" in tables and connection.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return True
    finally:
        connection.close()
