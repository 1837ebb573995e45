"""Which history a session or a command uses: ``--history``, else ``$GPUPERF_HISTORY``, else the SQLite file under
the rootdir, or none. Apart from the database (``history/database.py``) and without SQLAlchemy, so that a session
started with ``--history none`` never imports the database layer.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote

#: Environment variable naming the history when ``--history`` is not given.
HISTORY_ENV = "GPUPERF_HISTORY"
#: The default SQLite file, relative to the rootdir of the suite.
DEFAULT_HISTORY = Path("results") / "history.sqlite"
NONE = "none"


class HistoryError(RuntimeError):
    """The history cannot be opened, read or written; the message names the database and the fix."""


def resolve_target(option: str | None, environ: dict[str, str] | os._Environ[str], root: Path) -> str | None:
    """The history URL from ``--history``, else ``$GPUPERF_HISTORY``, else ``<root>/results/history.sqlite``;
    ``None`` for ``none``."""
    value = (option or environ.get(HISTORY_ENV, "") or "").strip()
    if not value:
        return sqlite_url(root / DEFAULT_HISTORY)
    if value.lower() == NONE:
        return None
    return to_url(value, root)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def to_url(value: str, root: Path) -> str:
    """A URL as SQLAlchemy takes it (PostgreSQL through psycopg 3), or a file path made a SQLite URL."""
    if "://" not in value:
        path = Path(value).expanduser()
        return sqlite_url(path if path.is_absolute() else root / path)
    scheme, rest = value.split("://", 1)
    if scheme in ("postgresql", "postgres"):
        return f"postgresql+psycopg://{rest}"
    if scheme == "sqlite":
        refuse_in_memory(value, rest)
        return value
    if scheme == "postgresql+psycopg":
        return value
    raise HistoryError(f"history {value!r}: unknown database kind {scheme!r}; use a file path, sqlite:///PATH, "
                       "postgresql://user@host/db, or none")


def refuse_in_memory(value: str, rest: str) -> None:
    """A SQLite URL naming no file (``sqlite://``, ``sqlite:///``), ``:memory:`` or ``mode=memory`` is a database
    that vanishes with the command: a history there would report runs added and keep none."""
    database, _, query = rest.partition("?")
    name = unquote(database[1:] if database.startswith("/") else database)
    if name in ("", ":memory:") or "memory" in parse_qs(query).get("mode", []):
        raise HistoryError(f"history {value!r}: an in-memory SQLite database, which keeps nothing once the command "
                           "ends; name a file (sqlite:///results/history.sqlite, or a path), or pass none for no "
                           "history")
