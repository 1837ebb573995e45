"""Which history a session or a command uses: ``--history``, else ``$GPUPERF_HISTORY``, else the SQLite file under
the rootdir, or none. Apart from the database (``history/database.py``) and without SQLAlchemy, so that a session
started with ``--history none`` never imports the database layer.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

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


#: The form of a PostgreSQL URL, for the messages that refuse a malformed one.
POSTGRES_FORM = "postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE (a host in [ ] when it is an IPv6 address)"
#: Query keys whose value is a secret: libpq's ``password`` and ``sslpassword``, and any key naming one.
_SECRET_KEY = re.compile(r"pass|secret|token", re.IGNORECASE)
#: A URL inside free text (an argument, a driver's message): a scheme, ``://``, and what follows up to a space.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*")
MASK = "***"


def to_url(value: str, root: Path) -> str:
    """A URL as SQLAlchemy takes it (PostgreSQL through psycopg 3), or a file path made a SQLite URL. A URL that
    cannot be parsed is refused, named without its password; a PostgreSQL password holding an unescaped ``@``
    (or another character the URL form reserves) is percent-encoded, so that no part of it is taken for the
    host."""
    if "://" not in value:
        path = Path(value).expanduser()
        return sqlite_url(path if path.is_absolute() else root / path)
    scheme, rest = value.split("://", 1)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return _checked_postgres(value, f"postgresql+psycopg://{_quoted_userinfo(rest)}")
    if scheme == "sqlite":
        refuse_in_memory(value, rest)
        return value
    raise HistoryError(f"history {mask_url(value)!r}: unknown database kind {scheme!r}; use a file path, "
                       "sqlite:///PATH, postgresql://user@host/db, or none")


#: What follows a URL's user and password: a host (any text without a delimiter or ``@``, or an IPv6 address in
#: brackets) with its port, a database name, a query and a fragment, none holding an ``@``.
_AFTER_USERINFO = re.compile(r"(\[[^\]@/?#]*\]|[^/?#@\[\]]*)(:[^/?#@]*)?(/[^/?#@]*)?(\?[^@#]*)?(#[^@]*)?")


def _userinfo_end(rest: str) -> int:
    """Where the user and password end in a URL's part after ``://`` (the position of their ``@``), or -1: the
    first ``@`` after which the rest reads as a host, a port, a database name and a query, none holding an ``@``
    (a password may hold ``@``, ``/`` and ``?``, in any order: ``u:s3cr@t?pass@db:5432/gp``); failing that, the last
    ``@`` before the query."""
    first = rest.find("@")
    if first < 0:
        return -1
    at = first
    while at >= 0:
        if _AFTER_USERINFO.fullmatch(rest, at + 1):
            return at
        at = rest.find("@", at + 1)
    query = rest.find("?", first)
    return rest.rfind("@", 0, query if query >= 0 else len(rest))


def _quoted_userinfo(rest: str) -> str:
    """``rest`` with its user and password percent-encoded (each decoded first: encoding is not done twice)."""
    at = _userinfo_end(rest)
    if at < 0:
        return rest
    user, colon, password = rest[:at].partition(":")
    encoded = quote(unquote(user), safe="") + (":" + quote(unquote(password), safe="") if colon else "")
    return f"{encoded}@{rest[at + 1:]}"


def _checked_postgres(value: str, url: str) -> str:
    """``url`` when its host and port can be parsed; else a ``HistoryError`` naming the flaw and the form."""
    try:
        parts = urlsplit(url)
        port = parts.port  # parsed on reading: a port that is not a number raises here
    except ValueError as exc:
        raise HistoryError(f"history {mask_url(value)!r}: not a database URL ({exc}); write "
                           f"{POSTGRES_FORM}") from None
    if port == 0:
        raise HistoryError(f"history {mask_url(value)!r}: port 0 is no server's; write {POSTGRES_FORM}")
    return url


def mask_url(url: str) -> str:
    """``url`` as it may be shown: its password, and every query value whose key names a secret
    (``?password=…``), replaced by ``***``; the one rule for every message, file and record that shows a
    database URL. Text that is no URL is returned as it is; a URL that cannot be parsed is masked all the same."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    at = _userinfo_end(rest)
    if at >= 0:
        user, colon, _password = rest[:at].partition(":")
        rest = f"{user}{':' + MASK if colon else ''}@{rest[at + 1:]}"
    where, question, query = rest.partition("?")
    if question:
        pairs = [pair.partition("=") for pair in query.split("&")]
        query = "&".join(f"{key}{equals}{MASK if equals and _SECRET_KEY.search(key) else text}"
                         for key, equals, text in pairs)
    return f"{scheme}://{where}{question}{query}"


def mask_text(text: str, url: str | None = None) -> str:
    """``text`` with every URL in it masked (``mask_url``), and ``url``'s password, as given or encoded, wherever
    else it appears (a driver's message may quote a part of the URL)."""
    masked = _URL_IN_TEXT.sub(lambda match: mask_url(match.group(0)), text)
    for secret in _secrets(url):
        masked = masked.replace(secret, MASK)
    return masked


def mask_args(args: Sequence[str]) -> list[str]:
    """A command line as it may be recorded: every URL among its arguments masked (``--history URL``,
    ``--history=URL``)."""
    return [mask_text(arg) for arg in args]


def _secrets(url: str | None) -> list[str]:
    if not url or "://" not in url:
        return []
    rest = url.split("://", 1)[1]
    at = _userinfo_end(rest)
    found = []
    if at >= 0:
        found.append(rest[:at].partition(":")[2])
    found += [value for key, values in parse_qs(rest.partition("?")[2]).items() if _SECRET_KEY.search(key)
              for value in values]
    return sorted({form for secret in found if len(secret) >= 3 for form in (secret, unquote(secret),
                                                                              quote(unquote(secret), safe=""))},
                  key=len, reverse=True)


def refuse_in_memory(value: str, rest: str) -> None:
    """A SQLite URL naming no file (``sqlite://``, ``sqlite:///``), ``:memory:`` or ``mode=memory`` is a database
    that vanishes with the command: a history there would report runs added and keep none."""
    database, _, query = rest.partition("?")
    name = unquote(database[1:] if database.startswith("/") else database)
    if name in ("", ":memory:") or "memory" in parse_qs(query).get("mode", []):
        raise HistoryError(f"history {mask_url(value)!r}: an in-memory SQLite database, which keeps nothing once the "
                           "command ends; name a file (sqlite:///results/history.sqlite, or a path), or pass none for no "
                           "history")
