"""What a results file may hold in each field a record or a run declares: checked one value at a time, to name
the first fault, or a whole column at a time, to prove a file sound quickly.

Each declared field type (the dataclass annotation's text, ``"float | None"``) has three forms of the same rule:

- ``value``: one JSON value, as the reader checks a record field by field to name the field at fault;
- ``column``: the set of Python types found in a column of values (one field over every record of a file) and
  the column itself. It is written with C-level passes (``set(map(type, …))``, ``sum``, ``min``) and only ever
  says ``True`` for a column whose every value ``value`` accepts; it may say ``False`` for a sound column, and
  then the value-by-value check decides. A backfill of a million records is checked this way in a fraction of
  the time (``columns_sound``);
- ``decoded``: the type a typed JSON decoder (msgspec's, ``store/results_typed.py``) is given for the field. It
  decodes only JSON values that ``value`` accepts, and the same values (a whole number given for a float is
  decoded as that float), so that a file decoded by it needs no check of its fields' types; it may refuse a
  value ``value`` accepts (a parameter that is not text), and then the reader decides.

A sum of floats is finite only when each of them is (an infinity or a NaN term keeps it non-finite); a sum that
overflows is not finite either, and leaves the column to the value-by-value check.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Optional, Union

from gpuperf.measure.kernel_records import Kernel

NoneType = type(None)
_NUMBERS = frozenset({float, int, NoneType})
_SCALARS: frozenset[type] = frozenset({str, int, float, bool, NoneType})
_INTS: frozenset[type] = frozenset({int})
_TEXTS = frozenset({str})
_DICTS = frozenset({dict})
_LISTS = frozenset({list, NoneType})
#: Stands in a column for a field a record does not hold.
ABSENT: Any = object()


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


def finite_floats(values: Any) -> bool:
    """Whether the floats among ``values`` are all finite (their sum is)."""
    total = sum([value for value in values if type(value) is float])
    return bool(total - total == 0)


def _figures(kinds: set[type], column: Sequence[Any]) -> bool:
    if not kinds <= _NUMBERS:
        return False
    try:
        total = sum(filter(None, column))  # no true or false here: only nulls and zeros are left out
    except OverflowError:  # a whole number too large for a float: left to the value-by-value check
        return False
    return bool(total - total == 0)


def _inner_types(column: Sequence[Any]) -> set[type]:
    return set(map(type, chain.from_iterable(filter(None, column))))


def _pairs(kinds: set[type], column: Sequence[Any]) -> bool:
    lists = [value for value in column if value is not None]
    return kinds <= _LISTS and set(map(len, lists)) <= {2} and _inner_types(lists) <= _INTS


def _mappings_of(allowed: frozenset[type]) -> Callable[[set[type], Sequence[Any]], bool]:
    def check(kinds: set[type], column: Sequence[Any]) -> bool:
        if not kinds <= _DICTS:
            return False
        values = list(chain.from_iterable(map(dict.values, column)))
        return set(map(type, values)) <= allowed and finite_floats(values)
    return check


@dataclass(frozen=True)
class FieldType:
    """One declared field type: what a value of it may be (``value``), the same over a column (``column``),
    what that is in words (for the reader's refusals), and the type that decodes such values (``decoded``)."""

    value: Callable[[Any], bool]
    column: Callable[[set[type], Sequence[Any]], bool]
    words: str
    decoded: Any


#: A plain JSON value, as a typed decoder is given it.
_SCALAR = Union[str, int, float, bool, None]

#: Each field type a record or run declares.
TYPE_CHECKS: dict[str, FieldType] = {
    "str": FieldType(lambda v: isinstance(v, str), lambda kinds, _: kinds <= _TEXTS, "text", str),
    "float": FieldType(lambda v: v is None or type(v) is float and v - v == 0 or _number(v), _figures,
                       "a finite number (or null for no figure)", Optional[float]),
    "float | None": FieldType(lambda v: v is None or type(v) is float and v - v == 0 or _number(v), _figures,
                              "a finite number or null", Optional[float]),
    "int | None": FieldType(lambda v: v is None or _whole(v), lambda kinds, _: kinds <= {int, NoneType},
                            "a whole number or null", Optional[int]),
    "bool": FieldType(lambda v: isinstance(v, bool), lambda kinds, _: kinds <= {bool}, "true or false", bool),
    "bool | None": FieldType(lambda v: v is None or isinstance(v, bool), lambda kinds, _: kinds <= {bool, NoneType},
                             "true, false or null", Optional[bool]),
    "tuple[str, ...]": FieldType(lambda v: v is None or _texts(v),
                                 lambda kinds, column: kinds <= _LISTS and _inner_types(column) <= _TEXTS,
                                 "a list of texts", Optional[list[str]]),
    "tuple[int, int] | None": FieldType(lambda v: v is None or isinstance(v, list) and len(v) == 2
                                        and all(map(_whole, v)), _pairs, "two whole numbers or null",
                                        Optional[tuple[int, int]]),
    "dict[str, str]": FieldType(lambda v: isinstance(v, dict) and all(map(scalar, v.values())),
                                _mappings_of(_SCALARS), "a mapping of names to values",
                                dict[str, str]),
    "dict[str, int]": FieldType(lambda v: isinstance(v, dict) and all(map(_whole, v.values())),
                                _mappings_of(_INTS), "a mapping of sizes to whole numbers",
                                dict[str, int]),
    "dict[str, Any]": FieldType(lambda v: isinstance(v, dict), lambda kinds, _: kinds <= _DICTS, "a mapping",
                                dict[str, Any]),
    "tuple[Kernel, ...]": FieldType(lambda v: v is None or isinstance(v, list), lambda kinds, _: kinds <= _LISTS,
                                    "a list of kernels", Optional[list[Kernel]]),
}
#: A field of a type not in the table holds a plain value.
PLAIN = FieldType(scalar, lambda _, column: all(map(scalar, column)), "a plain value", _SCALAR)

FieldTable = tuple[tuple[str, bool, FieldType], ...]
_FIELD_TABLES: dict[type, FieldTable] = {}


def field_table(cls: type) -> FieldTable:
    """Each declared field of the dataclass ``cls``: its name, whether it is required, and its type's checks
    (worked out once: a backfill checks a million records)."""
    if cls not in _FIELD_TABLES:
        _FIELD_TABLES[cls] = tuple((f.name, f.default is MISSING and f.default_factory is MISSING,
                                    TYPE_CHECKS.get(str(f.type), PLAIN)) for f in fields(cls))
    return _FIELD_TABLES[cls]


def columns_sound(cls: type, rows: Sequence[Any]) -> dict[str, list[Any]] | None:
    """Every declared field of ``cls`` over ``rows``, as columns (``ABSENT`` where a row lacks it), when each
    row is a mapping holding every required field and every column passes its type's check; else ``None``, and
    the value-by-value check names the fault (or finds none)."""
    if not set(map(type, rows)) <= _DICTS:
        return None
    table = field_table(cls)
    columns = columns_of(rows, [name for name, _, _ in table])
    for name, required, checks in table:
        column = columns[name]
        kinds = set(map(type, column))
        present = column
        if object in kinds:
            if required:
                return None
            present = [value for value in column if value is not ABSENT]
            kinds.discard(object)
        if not checks.column(kinds, present):
            return None
    return columns


def columns_of(rows: Sequence[Mapping[str, Any]], names: Sequence[str], absent: Any = ABSENT) -> dict[str, list[Any]]:
    """The values of ``names`` over ``rows``, a list per name (``absent`` where a row lacks one). The names the
    first row holds are taken apart by ``itemgetter`` and ``zip``, without a Python step per value, when every
    row holds them (as a suite writes its records); any other name, or all of them when the rows differ, is
    read row by row."""
    held = [name for name in names if name in rows[0]] if rows else []
    columns: dict[str, list[Any]] = {}
    if len(held) > 1:
        try:
            columns = dict(zip(held, map(list, zip(*map(itemgetter(*held), rows)))))
        except KeyError:
            columns = {}
    return {name: columns[name] if name in columns else [row.get(name, absent) for row in rows] for name in names}
