"""Text that is no text: a JSON ``\\ud800`` escape without its pair reads as an unpaired surrogate, which no file,
terminal or database can hold (writing one raises). A results file holding one is refused where it is read
(``results.parse_json``), naming the place, instead of failing in whatever writes it next. (YAML's reader refuses
such an escape itself.)

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from typing import Any

#: A ``\u`` escape of a surrogate, as JSON writes one: only a text holding one can read as an unpaired one.
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def surrogate_fault(data: Any, text: str | bytes) -> str:
    """Where ``data`` (read from ``text``) holds an unpaired surrogate, and what that is; ``""`` when nowhere."""
    if (_ESCAPE_BYTES if isinstance(text, bytes) else _ESCAPE).search(text) is None:  # type: ignore[arg-type]
        return ""
    where = _lone_surrogate(data, "")
    if where is None:
        return ""
    return (f"{where or 'the value'} holds an unpaired surrogate (a \\ud800–\\udfff escape without its pair), "
            "which is no character: no tool can write it as text")


def _lone_surrogate(value: Any, where: str) -> str | None:
    """Where in ``value`` a text (a key or a value) holds an unpaired surrogate (``records[3].case_id``), ``""``
    for the value itself; ``None`` when none does."""
    if isinstance(value, str):
        return None if _encodable(value) else where
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not _encodable(key):
                shown = key.encode("ascii", "backslashreplace").decode("ascii")
                return f"the key {shown!r} of {where or 'the top level'}"
            found = _lone_surrogate(item, f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _lone_surrogate(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
