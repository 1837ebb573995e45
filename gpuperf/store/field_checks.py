"""What a results file may hold in each field a record or a run declares: the one statement of that rule, which
the reader (``store/results.py``) applies to every field of every record, naming the first fault.

Each declared field type (the dataclass annotation's text, ``"float | None"``) has its check of one JSON value
(``value``) and the words a refusal gives for it (``words``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any


def _number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)  # a whole number, however large, is finite


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def scalar(value: Any) -> bool:
    """A plain JSON value: null, text, a whole or finite number, true or false."""
    return value is None or isinstance(value, (str, int, float, bool)) and (not isinstance(value, float)
                                                                          or math.isfinite(value))


@dataclass(frozen=True)
class FieldType:
    """One declared field type: what a value of it may be (``value``) and what that is in words (for the reader's
    refusals)."""

    value: Callable[[Any], bool]
    words: str


#: Each field type a record or run declares.
TYPE_CHECKS: dict[str, FieldType] = {
    "str": FieldType(lambda v: isinstance(v, str), "text"),
    "float": FieldType(lambda v: v is None or _number(v), "a finite number (or null for no figure)"),
    "float | None": FieldType(lambda v: v is None or _number(v), "a finite number or null"),
    "int | None": FieldType(lambda v: v is None or _whole(v), "a whole number or null"),
    "bool": FieldType(lambda v: isinstance(v, bool), "true or false"),
    "bool | None": FieldType(lambda v: v is None or isinstance(v, bool), "true, false or null"),
    "tuple[str, ...]": FieldType(lambda v: v is None or _texts(v), "a list of texts"),
    "tuple[int, int] | None": FieldType(lambda v: v is None or isinstance(v, list) and len(v) == 2
                                        and all(map(_whole, v)), "two whole numbers or null"),
    "dict[str, str]": FieldType(lambda v: isinstance(v, dict) and all(map(scalar, v.values())),
                                "a mapping of names to values"),
    "dict[str, int]": FieldType(lambda v: isinstance(v, dict) and all(map(_whole, v.values())),
                                "a mapping of sizes to whole numbers"),
    "dict[str, Any]": FieldType(lambda v: isinstance(v, dict), "a mapping"),
    "tuple[Kernel, ...]": FieldType(lambda v: v is None or isinstance(v, list), "a list of kernels"),
}
#: A field of a type not in the table holds a plain value.
PLAIN = FieldType(scalar, "a plain value")

FieldTable = tuple[tuple[str, bool, FieldType], ...]
_FIELD_TABLES: dict[type, FieldTable] = {}


def field_table(cls: type) -> FieldTable:
    """Each declared field of the dataclass ``cls``: its name, whether it is required, and its type's check
    (worked out once: a backfill checks a million records)."""
    if cls not in _FIELD_TABLES:
        _FIELD_TABLES[cls] = tuple((f.name, f.default is MISSING and f.default_factory is MISSING,
                                    TYPE_CHECKS.get(str(f.type), PLAIN)) for f in fields(cls))
    return _FIELD_TABLES[cls]
