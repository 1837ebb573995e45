"""A results file proved sound in one typed pass: msgspec decodes its bytes into structs made from the
``Record`` and ``RunInfo`` dataclasses, checking every field as it reads, so that a backfill need not build a tree
of plain values, write it out again and walk it (``reading._fast_json`` then ``results._sound``, a few times the
work).

``proved`` gives a file's run and records only when the results format's own reader (``results.parse_json`` then
``results.check_run``) certainly accepts the file and reads the same values from it; in any doubt it gives
``None`` and that reader decides, naming the fault. msgspec's decoder follows JSON's grammar as strictly as that
reader (no ``NaN``, no control character in a string, UTF-8 only, no byte-order mark, nothing after the value),
and each field's struct type decodes only values its rule accepts (``field_checks.FieldType.decoded``; a kernel
as ``Kernel.from_dict`` takes one, ``_KernelStruct``). What the decoder does not refuse by itself is proved here:

- **a repeated key**, or an unknown one: msgspec keeps the last of a repeated key and skips an unknown one,
  where the reader refuses the first and ignores the second. A field left out of a record is ``UNSET``, which
  msgspec does not write back, so the structs written back as JSON hold every key and text the file holds but
  those dropped. A JSON text holds each key and each string between two quotes of its own, and no other quote
  but those its strings hold, each written ``\\"`` (or ``\\u0022``, which a text given the proof lacks); so does
  msgspec's writing of the same values, which writes a quote in a string as ``\\"``. So when the two have as
  many quotes, nothing was dropped (a file with an unknown key is then left to the reader too);
- **a long integer** (the reader refuses one beyond 2**64), and a whole number given for a float field that a
  float would not hold exactly: a field's type bounds its numbers (whole numbers within 64 bits, figures within
  2**53), and the plain values within fields are walked for the first bound;
- **nesting deeper than ``MAX_DEPTH``**: only the plain values of a record's ``extra`` and of the run can nest,
  and they are walked with their depth;
- the rules beyond a field's type, as ``results._sound`` holds them: the schema, each status known and with a
  figure where it is a verdict on one, each reason known, each case once per GPU, and the run's fields
  (``columns_sound``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, compress
from operator import attrgetter
from typing import Annotated, Any, Union

import msgspec
import numpy as np
from msgspec import UNSET, UnsetType

from gpuperf.measure.kernel_records import CODE_DIGEST_LENGTH, Kernel
from gpuperf.store.field_checks import columns_sound, field_table
from gpuperf.store.reading import MAX_DEPTH
from gpuperf.store.records import Reason, Record, RunInfo
from gpuperf.store.results import NEEDS_FIGURE, SCHEMA, STATUSES

#: Numbers as the structs decode them. A whole number lies within what a 64-bit integer holds (the reader's bound
#: is 2**64, so a number between the two is left to it). A figure lies within 2**53, where a whole number given
#: for it is a float exactly, as the reader's figure is (no gpuperf figure comes near).
_BOUND = 2**63
_EXACT = 2.0**53
_WHOLE = Annotated[int, msgspec.Meta(ge=-_BOUND, le=_BOUND - 1)]
_FIGURE = Annotated[float, msgspec.Meta(gt=-_EXACT, lt=_EXACT)]
_COUNT = Annotated[int, msgspec.Meta(ge=0, le=_BOUND - 1)]
_DIM3 = tuple[_COUNT, _COUNT, _COUNT]
_UNIONS = (Union, types.UnionType)
#: The depth of a record's field values (the document, its ``records`` list, the record), and of the run.
_RECORD_FIELD_DEPTH = 4
_RUN_DEPTH = 2
_CONTAINERS = frozenset({dict, list})
#: A quote escaped by its code: the one way a text may hold a quote that msgspec writes with another quote.
_ESCAPED_QUOTE = b"\\u0022"
_QUOTE = ord('"')
_NUMBERS = frozenset({int, float})


class _KernelStruct(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A kernel as ``Kernel.from_dict`` takes one: a name that is not empty, three non-negative integers for each
    of its launch's dimensions, non-negative counts, a median that is a non-negative number, and a code digest
    (or none); a field left out takes ``from_dict``'s default."""

    name: Annotated[str, msgspec.Meta(min_length=1)]
    grid: _DIM3 | UnsetType = UNSET
    block: _DIM3 | UnsetType = UNSET
    cluster: _DIM3 | UnsetType = UNSET
    registers: _COUNT | UnsetType = UNSET
    shared_memory: _COUNT | UnsetType = UNSET
    median_us: Annotated[float, msgspec.Meta(ge=0, lt=_EXACT)] | None | UnsetType = UNSET
    # msgspec searches for the pattern: \Z ends it at the text's end, where $ would let a closing newline by
    code: Annotated[str, msgspec.Meta(pattern=f"^(?:[0-9a-f]{{{CODE_DIGEST_LENGTH}}})?\\Z")] | UnsetType = UNSET


def _bounded(decoded: Any) -> Any:
    """``decoded`` with each ``int`` and ``float`` in it given its bound, and ``Kernel`` the kernel's struct."""
    if decoded is int:
        return _WHOLE
    if decoded is float:
        return _FIGURE
    if decoded is Kernel:
        return _KernelStruct
    origin, arguments = typing.get_origin(decoded), typing.get_args(decoded)
    if origin in _UNIONS:
        return Union[tuple(map(_bounded, arguments))]
    if origin in (dict, list, tuple):
        return origin[tuple(map(_bounded, arguments))]
    return decoded


def _holds_plain_values(decoded: Any) -> bool:
    """Whether values of the type ``decoded`` may hold plain values of any kind (``Any``), which may nest."""
    return decoded is Any or any(map(_holds_plain_values, typing.get_args(decoded)))


def _struct(cls: type, name: str) -> type[msgspec.Struct]:
    """A struct of ``cls``'s declared fields: a required one must be present, any other is ``UNSET`` when absent.
    Like every struct here it is left out of the cyclic garbage collector (``gc=False``): a decoded value holds
    plain values only, never a cycle, and a backfill decodes a million of them."""
    members = [(field, _bounded(checks.decoded)) if required
               else (field, Union[_bounded(checks.decoded), UnsetType], UNSET)
               for field, required, checks in field_table(cls)]
    return msgspec.defstruct(name, members, kw_only=True, forbid_unknown_fields=True, gc=False)


@lru_cache(maxsize=1)
def _decoding() -> tuple[msgspec.json.Decoder[Any], msgspec.json.Encoder, list[Callable[[Any], Any]]]:
    """The decoder of a results file, the encoder that writes its structs back, and the getters of the record
    fields that hold plain values of any kind."""
    record = _struct(Record, "TypedRecord")
    document = msgspec.defstruct("TypedResults", [("schema", int), ("run", dict[str, Any]),
                                                  ("records", list[record])],  # type: ignore[valid-type]
                                 forbid_unknown_fields=True, gc=False)
    plain: list[Callable[[Any], Any]] = [attrgetter(field) for field, _, checks in field_table(Record)
                                         if _holds_plain_values(checks.decoded)]
    return msgspec.json.Decoder(document), msgspec.json.Encoder(), plain


def _quotes(text: bytes) -> int:
    """How many quotes ``text`` holds (NumPy counts them several times faster than ``bytes.count``)."""
    return int(np.count_nonzero(np.frombuffer(text, np.uint8) == _QUOTE))


def _plain_values_sound(containers: list[Any], depth: int) -> bool:
    """Whether the plain values in ``containers`` (at ``depth``) nest at most ``MAX_DEPTH`` deep and every number
    among them is within ``_BOUND``, found a level at a time."""
    while containers:
        if depth > MAX_DEPTH:
            return False
        values = list(chain(chain.from_iterable(map(dict.values, [item for item in containers if type(item) is dict])),
                            chain.from_iterable([item for item in containers if type(item) is list])))
        kinds = list(map(type, values))
        numbers = list(compress(values, map(_NUMBERS.__contains__, kinds)))
        if numbers and not (-_BOUND <= min(numbers) and max(numbers) < _BOUND):
            return False
        containers = list(compress(values, map(_CONTAINERS.__contains__, kinds)))
        depth += 1
    return True


def proved(raw: bytes) -> tuple[dict[str, Any], Sequence[Any]] | None:
    """The run (a plain object) and the records (structs whose attributes are the records' fields, ``UNSET``
    where a record lacks one) of a results file's bytes, when the results format's reader certainly accepts
    them and reads the same values; else ``None``."""
    if _ESCAPED_QUOTE in raw:
        return None
    decoder, encoder, plain = _decoding()
    try:
        document = decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    run, records = document.run, document.records
    if document.schema != SCHEMA or columns_sound(RunInfo, [run]) is None:
        return None
    if _quotes(encoder.encode(document)) != _quotes(raw):
        return None
    within = list(filter(None, chain.from_iterable(map(getter, records) for getter in plain)))
    if not _plain_values_sound(within, _RECORD_FIELD_DEPTH) or not _plain_values_sound([run], _RUN_DEPTH):
        return None
    return (run, records) if _rules_hold(records) else None


def _rules_hold(records: Sequence[Any]) -> bool:
    """``results._sound``'s rules beyond the fields' types, over the decoded records."""
    statuses = list(map(_STATUS, records))
    if not set(statuses) <= STATUSES or not set(map(_REASON, records)) <= {*Reason.ALL, UNSET}:
        return False
    if any(status in NEEDS_FIGURE for value, status in zip(map(_VALUE, records), statuses) if value is None):
        return False
    gpus = [None if index is UNSET else index for index in map(_GPU_INDEX, records)]
    return len(set(zip(map(_CASE, records), gpus))) == len(records)


_STATUS, _REASON, _VALUE = attrgetter("status"), attrgetter("reason"), attrgetter("value")
_GPU_INDEX, _CASE = attrgetter("gpu_index"), attrgetter("case_id")


def columns_of(records: Sequence[Any], names: Sequence[str], absent: Any = None) -> dict[str, list[Any]]:
    """The values of ``names`` over the decoded ``records``, a list per name, ``absent`` where a record lacks one
    (as ``field_checks.columns_of`` takes them from plain objects)."""
    if not records:
        return {name: [] for name in names}
    columns = dict(zip(names, map(list, zip(*map(attrgetter(*names), records))))) if len(names) > 1 \
        else {names[0]: list(map(attrgetter(names[0]), records))}
    for name, column in columns.items():
        if UnsetType in set(map(type, column)):
            columns[name] = [absent if value is UNSET else value for value in column]
    return columns
