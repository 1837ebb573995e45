"""One line for a file-system error (``OSError``): the file, the cause and the fix; a full disk said to be one.

Used by the command line (``commands/common.py``), the session's stages (``wiring/containment.py``) and the
writers of the store and the output. An error that names no file (a write to an open file, to the terminal)
names none, rather than ``?``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import errno


def describe_os_problem(exc: OSError) -> str:
    """``<path>: <cause>: <fix>`` (``<cause>: <fix>`` when ``exc`` names no file)."""
    path = exc.filename
    cause = exc.strerror or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "the disk (the file system it is on) is full, or the user's quota is: free some space and run it again"
    elif path is not None and str(path).endswith(".lock"):
        target = str(path).removesuffix(".lock")
        fix = (f"gpuperf locks {target} by creating this file beside it: make the folder writable, or work on a "
               "copy in a writable folder")
    elif isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
        fix = "make it (and its folder) readable and writable for this user, or work on a copy elsewhere"
    elif isinstance(exc, IsADirectoryError):
        fix = "it is a folder: pass a file"
    elif isinstance(exc, (FileExistsError, NotADirectoryError)):
        fix = "a file stands where a folder is needed: pass another path, or move that file away"
    elif isinstance(exc, FileNotFoundError):
        fix = "check the path (and that its folder exists)"
    else:
        fix = "check the path and its permissions"
    return f"{path}: {cause}: {fix}" if path is not None else f"{cause}: {fix}"
