"""The one way a persistent file is written: whole or not at all, and one writer at a time.

``write_atomically`` writes to a temporary file beside the target (``.<name>.<random>.tmp``, a pattern
``.gitignore`` lists in case a kill leaves one), fsyncs it and renames it over the target, so a reader sees
the old file or the new one, never half of either; the temporary file is removed on every other path,
exceptions and interrupts included. ``locked`` holds an exclusive ``flock`` on ``<name>.lock`` beside the
target for a read-modify-write (pytest-xdist workers, two CI jobs).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def temp_prefix(path: Path) -> str:
    """The start of the temporary files' names beside ``path``: hidden, and named after the target."""
    return f".{path.name}."


def _mode_for(path: Path) -> int:
    """Keep the file's permissions across the rename (a temporary file is created owner-only)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomically(path: Path, text: str | bytes, durable: bool = True) -> None:
    """Write ``text`` as UTF-8 (what loading expects, whatever the locale; bytes as they are) to a temporary
    file beside ``path``, fsync it (unless not ``durable``: output that is rebuilt from its source, such as the
    trend site's pages, need not wait for the disk), then rename it over ``path``."""
    path = Path(path)
    handle, temp_name = tempfile.mkstemp(prefix=temp_prefix(path), suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            temp.flush()
            if durable:
                os.fsync(temp.fileno())
        os.chmod(temp_name, _mode_for(path))
        os.replace(temp_name, path)
    except BaseException as exc:
        Path(temp_name).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a write or fsync: the file it was for
            exc.filename = str(path)
        raise


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock for a read-modify-write of ``path``, on ``<name>.lock`` beside it."""
    with open(lock_path(path), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
