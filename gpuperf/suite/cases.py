"""Case identity: shape types whose ``str()`` is the test-id segment, dtype names, case tables.

Shapes, dtypes and per-family case lists are data (``perf_tests/cases/<family>.yaml``), loaded here so a
test module only names the table it wants, and checked against the table's schema (``gpuperf.suite.case_schema``).
A table of any other name (a user's ``attention.yaml``) names its own sizes (``sizes: [batch, heads, seq, dim]``)
and is checked as strictly against them (``SizedCase``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import difflib
import itertools
import re
import reprlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from gpuperf.store.baseline_entry import MAX_SHAPE_SIZES, SIZE_NAME
from gpuperf.store.reading import MIB, InputError, load_yaml, read_text
from gpuperf.suite.case_schema import SHAPE_KINDS, TABLES, VALUE, Names, Ref, Schema, ShapeKind
from gpuperf.suite.cases_dir import cases_dir as cases_dir, use_cases_dir as use_cases_dir  # their home: cases_dir.py

#: A case table is a few kilobytes; a larger file is not one.
CASE_TABLE_LIMIT = 1 * MIB
FIX = "fix the table (git diff shows what changed)"


@dataclass(frozen=True, order=True)
class GemmShape:
    """``C[m×n] = A[m×k] · B[k×n]``; its id is ``MxNxK``."""

    m: int
    n: int
    k: int

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True, order=True)
class GemvShape:
    """``y[m] = A[m×n] · x[n]``; its id is ``MxN``."""

    m: int
    n: int

    def __str__(self) -> str:
        return f"{self.m}x{self.n}"


@dataclass(frozen=True, order=True)
class BatchedShape:
    """``batch`` independent ``m×n×k`` products; its id is ``BxMxNxK``."""

    batch: int
    m: int
    n: int
    k: int

    def __str__(self) -> str:
        return f"{self.batch}x{self.m}x{self.n}x{self.k}"

    @property
    def gemm(self) -> GemmShape:
        return GemmShape(self.m, self.n, self.k)


Shape = Union[GemmShape, GemvShape, BatchedShape]

_SHAPE_TYPES: dict[int, type[Shape]] = {3: GemmShape, 2: GemvShape, 4: BatchedShape}


#: What a string of 2, 3 or 4 sizes is, for an error about a shape of the wrong kind.
_SHAPE_BY_SIZES: dict[int, ShapeKind] = {kind.sizes: kind for kind in SHAPE_KINDS.values() if kind.n is None}

_WHOLE_NUMBER = re.compile(r"-?[0-9]+")


class CaseTableError(InputError):
    """A case table in ``perf_tests/cases`` is malformed."""


def _sizes(text: str) -> list[int]:
    """The sizes of ``"MxNxK"``-style text; the CaseTableError names the first part that is not a whole number."""
    parts = text.lower().split("x")
    bad = next((part for part in parts if not _WHOLE_NUMBER.fullmatch(part)), None)
    if bad == "":
        raise CaseTableError(f"{text!r} has an empty size (a stray 'x')")
    if bad is not None:
        raise CaseTableError(f"{text!r} has the size {bad!r}, which is not a whole number")
    huge = next((part for part in parts if len(part.lstrip("-")) > 18), None)
    if huge is not None:
        raise CaseTableError(f"{reprlib.repr(text)} has a size of {len(huge)} digits, larger than any matrix")
    return [int(part) for part in parts]


def parse_shape(text: str | list[int]) -> Shape:
    """``"4096x4096x4096"`` → ``GemmShape``; ``"64x65536"`` → ``GemvShape``; four numbers → ``BatchedShape``."""
    try:
        dims = [int(p) for p in text] if isinstance(text, list) else _sizes(str(text))
    except ValueError as exc:
        raise CaseTableError(f"shape {text!r} is not 'MxN', 'MxNxK' or 'BxMxNxK' with integer sizes") from exc
    if len(dims) not in _SHAPE_TYPES or any(d < 1 for d in dims):
        raise CaseTableError(f"shape {text!r} must have 2, 3 or 4 positive sizes ('MxN', 'MxNxK', 'BxMxNxK')")
    return _SHAPE_TYPES[len(dims)](*dims)


def _shape_problem(value: object, kind: ShapeKind) -> str | None:
    """Why ``value`` is not a shape of ``kind``, or None when it is one."""
    if not isinstance(value, str):
        return f"{reprlib.repr(value)} is a YAML {type(value).__name__}, not a shape string"
    try:
        dims = _sizes(value)
    except CaseTableError as exc:
        return str(exc)
    if len(dims) != kind.sizes:
        found = _SHAPE_BY_SIZES.get(len(dims))
        what = f"is a {found.title} ({found.pattern})" if found else f"has {len(dims)} sizes"
        return f"{value!r} {what} where a {kind.title} {kind.pattern} is expected"
    small = next((d for d in dims if d < 1), None)
    if small is not None:
        return f"{value!r} has the size {small}, but every size must be at least 1"
    if kind.n is not None and dims[2] != kind.n:
        return f"{value!r} has N = {dims[2]}, but a {kind.title} {kind.pattern} has N = {kind.n}"
    return None


def _shape(value: object, kind: ShapeKind, where: str) -> Shape:
    problem = _shape_problem(value, kind)
    if problem is not None:
        raise CaseTableError(f"{where}: {problem}; write a {kind.title} as {kind.pattern} with positive whole "
                             f"sizes, e.g. {kind.example!r}")
    return parse_shape(str(value))


def _describe(schema: Schema) -> str:
    """What a schema expects, for an error where the table holds something else."""
    if isinstance(schema, list):
        items = "" if schema[0] == VALUE else f" whose items are each {_describe(schema[0])}"
        return f"a list (in [ ]){items}"
    if isinstance(schema, Names):
        return "a mapping of names to entries"
    if isinstance(schema, Ref):
        return f"a name from {schema.table}"
    if isinstance(schema, dict):
        return f"a mapping with the keys {', '.join(schema)}"
    if schema == VALUE:
        return "a value"
    kind = SHAPE_KINDS[schema]
    return f"a {kind.title} {kind.pattern}"


def _mismatch(value: object, schema: Schema, where: str) -> CaseTableError:
    return CaseTableError(f"{where}: expected {_describe(schema)}, got {reprlib.repr(value)}")


def _unknown_key(key: object, allowed: dict[str, Schema], where: str) -> CaseTableError:
    guess = difflib.get_close_matches(str(key), list(allowed), n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    return CaseTableError(f"{_join(where, key)}: unknown key {key!r}{hint}; the keys allowed here are "
                          f"{', '.join(allowed)}")


def _join(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


def _checked(value: Any, schema: Schema, where: str, root: dict[Any, Any]) -> Any:
    """``value`` checked against ``schema``, its shape strings turned into shape objects.

    ``where`` is the key path of ``value`` in its table (``perf[0].shapes[3]``), the start of every error;
    ``root`` is the whole table, where a ``Ref`` looks its name up.
    """
    if schema == VALUE:
        return value
    if isinstance(schema, Ref):
        names = root.get(schema.table)
        if not isinstance(names, dict) or not isinstance(value, str) or value not in names:
            known = list(names) if isinstance(names, dict) else []
            guess = difflib.get_close_matches(str(value), known, n=1)
            hint = f" (did you mean {guess[0]!r}?)" if guess else ""
            raise CaseTableError(f"{where}: {value!r} is not one of the {schema.table} this table defines"
                                 f"{hint}: {', '.join(map(str, known)) or 'none'}")
        return value
    if isinstance(schema, str):
        return _shape(value, SHAPE_KINDS[schema], where)
    if isinstance(schema, list):
        if not isinstance(value, list):
            raise _mismatch(value, schema, where)
        items = [_checked(item, schema[0], f"{where}[{i}]", root) for i, item in enumerate(value)]
        _refuse_repeats(items, where)
        return items
    if not isinstance(value, dict):
        raise _mismatch(value, schema, where)
    if isinstance(schema, Names):
        return {name: _checked(entry, schema.entry, _join(where, name), root) for name, entry in value.items()}
    unknown = next((key for key in value if key not in schema), None)
    if unknown is not None:
        raise _unknown_key(unknown, schema, where)
    return {key: _checked(item, schema[key], _join(where, key), root) for key, item in value.items()}


def _cases_of(item: Any) -> list[str]:
    """The cases a list item stands for: itself, or for a group (a mapping), every combination of its values
    (a group's lists multiply: paths × trans × shapes). A case of named sizes is its test id: two that differ only
    in a value's type (``1`` and ``'1'``) are the same test to pytest."""
    if isinstance(item, SizedCase):
        return [str(item)]
    if not isinstance(item, dict):
        return [repr(item)]
    axes = [value if isinstance(value, list) else [value] for _, value in sorted(item.items(), key=str)]
    return [repr(combination) for combination in itertools.product(*axes)]


def _refuse_repeats(items: list[Any], where: str) -> None:
    """No item twice in a list, and no two groups of a list that expand to the same case: pytest would rename
    the copies ``…_0``/``…_1``, which re-keys their baseline entries."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        for case in dict.fromkeys(_cases_of(item)):
            if case in first:
                what = str(item) if not isinstance(item, dict) else f"the case {case}"
                if isinstance(item, SizedCase) and item != items[first[case]]:
                    what = f"test id {case} (its values differ from the other's only in type)"
                raise CaseTableError(f"{where}[{index}]: {what} is already listed at {where}[{first[case]}]: a "
                                     "case twice would be renamed _0/_1 by pytest and re-key its baseline "
                                     "entry; remove one of them")
            first[case] = index


class CaseTables(dict[str, Any]):
    """A loaded case file: its tables by name. Reading a table the file lacks names the file and the table
    (a project's own table may hold only the tables its tests read) rather than raising a bare ``KeyError``."""

    def __init__(self, shown: str, tables: dict[str, Any]) -> None:
        super().__init__(tables)
        self.shown = shown

    def __missing__(self, key: str) -> Any:
        raise CaseTableError(f"{self.shown}: has no table {key!r}, which the test module reads; add it (see "
                             "gpuperf/suite/case_schema.py TABLES for what it holds)")


def _refuse_empty_tables(data: dict[Any, Any], shown: str) -> None:
    """A table that is there but empty would run no case, silently."""
    empty = [str(key) for key, value in data.items() if value in (None, [], {})]
    if empty:
        raise CaseTableError(f"{shown}: the table(s) {', '.join(empty)} are empty: they would run no case; "
                             "list the cases, or remove the table and the tests that read it")


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it: ``perf_tests/cases/gemm.yaml``. A path
    through a loop of links cannot be resolved (``RuntimeError``, or ``OSError`` on a newer Python): it is shown as
    given, and the reader names the loop."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, RuntimeError, OSError):
        return str(path)


def load_cases(family: str, directory: Path | None = None) -> dict[str, Any]:
    """Load ``<directory>/<family>.yaml`` (by default ``cases_dir()``), checked against its schema (``gpuperf.suite.case_schema.TABLES``); its
    shape strings become shape objects of the kind the schema names.

    Test modules call this at import time, so a malformed table is a collection error naming the file, the
    entry and the fix.
    """
    path = (cases_dir() if directory is None else directory) / f"{family}.yaml"
    shown = _shown(path)
    try:
        data = load_yaml(Path(shown), read_text(path, CASE_TABLE_LIMIT, "a case table", FIX), FIX)
    except FileNotFoundError as exc:
        raise CaseTableError(f"{shown}: case table not found; create it or fix the family name {family!r}") from exc
    except InputError as exc:
        raise CaseTableError(str(exc)) from None
    if not isinstance(data, dict):
        raise CaseTableError(f"{shown}: expected a mapping of table names to lists, got {type(data).__name__}")
    schema = TABLES.get(family)
    try:
        checked: dict[str, Any] = _checked(data, schema, "", data) if schema is not None else _sized_tables(data)
    except CaseTableError as exc:
        raise CaseTableError(f"{shown}: {exc}") from None
    _refuse_empty_tables(checked, shown)
    return CaseTables(shown, checked)


# --- a family of the user's own: sizes named in the table --------------------------------------------------

#: The keys of a table of the user's own family that are no list of cases: which sizes every case names, and
#: which other values a case may give.
SIZES_KEY = "sizes"
PARAMS_KEY = "params"
#: The text a ``params`` value may hold: it becomes part of the test id, which ``-k`` selects and the suggested
#: ``--update-baselines -k '…'`` command quotes, so no shell or ``-k`` syntax (quotes, spaces, ``::``, brackets,
#: parentheses) and never empty (``mode: ''`` would read as the flag ``mode: true``).
PARAM_TEXT = re.compile(r"[A-Za-z0-9_.+-]+")
#: A size larger than this is no tensor dimension (and would overflow the FLOP counts of ``Work``).
MAX_SIZE = 2**48


@dataclass(frozen=True)
class SizedCase(Mapping[str, Any]):
    """One case of a table whose sizes the table names: ``case["seq"]``, ``case.sizes`` (the named sizes, in the
    table's order, for ``Work(sizes=…)``); its ``str()`` is its test-id segment, ``batch8-heads32-seq4096-dim128``
    (a true flag adds its name, a false one ``no_<name>``, another value ``<name><value>``)."""

    sizes: tuple[tuple[str, int], ...]
    params: tuple[tuple[str, Any], ...] = ()

    def __getitem__(self, name: str) -> Any:
        for key, value in self.sizes + self.params:
            if key == name:
                return value
        raise KeyError(f"{name!r}: this case has {', '.join(key for key, _ in self.sizes + self.params)}")

    def __iter__(self) -> Iterator[str]:
        return iter([key for key, _ in self.sizes + self.params])

    def __len__(self) -> int:
        return len(self.sizes) + len(self.params)

    def __str__(self) -> str:
        parts = [f"{name}{size}" for name, size in self.sizes]
        for name, value in self.params:
            parts.append(name if value is True else f"no_{name}" if value is False else f"{name}{value}")
        return "-".join(parts)


def _names(value: object, key: str) -> list[str]:
    """The names a ``sizes`` or ``params`` list declares, checked: lower-case words, each once."""
    if not isinstance(value, list) or not value:
        raise CaseTableError(f"{key}: expected a non-empty list of names (e.g. [batch, heads, seq, dim]), got "
                             f"{reprlib.repr(value)}")
    for index, name in enumerate(value):
        if not isinstance(name, str) or not SIZE_NAME.fullmatch(name):
            raise CaseTableError(f"{key}[{index}]: {reprlib.repr(name)} is not a name: use lower-case letters, "
                                 "digits and _, starting with a letter, at most 32 characters")
        if name in value[:index]:
            raise CaseTableError(f"{key}[{index}]: {name!r} is listed twice")
    return value


def _sized_case(value: object, sizes: list[str], params: list[str], where: str) -> SizedCase:
    if not isinstance(value, dict):
        raise CaseTableError(f"{where}: expected a mapping of the sizes {', '.join(sizes)} to whole numbers, got "
                             f"{reprlib.repr(value)}")
    allowed: dict[str, Schema] = {name: VALUE for name in sizes + params}
    unknown = next((key for key in value if key not in allowed), None)
    if unknown is not None:
        raise _unknown_key(unknown, allowed, where)
    missing = [name for name in sizes if name not in value]
    if missing:
        raise CaseTableError(f"{where}: lacks the size(s) {', '.join(missing)}; every case of this table names "
                             f"{', '.join(sizes)}")
    for name in sizes:
        size = value[name]
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_SIZE:
            raise CaseTableError(f"{_join(where, name)}: {reprlib.repr(size)} is not a size: every size is a whole "
                                 f"number from 1 to 2**48")
    for name in params:
        if name in value and not isinstance(value[name], (str, int, float, bool)):
            raise CaseTableError(f"{_join(where, name)}: expected a plain value (text, number, true/false), got "
                                 f"{reprlib.repr(value[name])}")
        if isinstance(value.get(name), str) and not PARAM_TEXT.fullmatch(value[name]):
            raise CaseTableError(f"{_join(where, name)}: {reprlib.repr(value[name])} is not a value a test id can "
                                 "carry: the id is what -k selects and what the suggested re-record command names, "
                                 "so text there holds only letters, digits and _ . + - (at least one); rename it")
    return SizedCase(tuple((name, value[name]) for name in sizes),
                     tuple((name, value[name]) for name in params if name in value))


def _sized_tables(data: dict[Any, Any]) -> dict[str, Any]:
    """A table of a family with no schema of its own: ``sizes`` (and optionally ``params``) name what each case
    gives; every other key is a list of cases, each a mapping of those names (or, with no ``sizes``, a shape
    string such as ``4096x4096x4096``)."""
    sizes = _names(data[SIZES_KEY], SIZES_KEY) if SIZES_KEY in data else []
    if len(sizes) > MAX_SHAPE_SIZES:
        raise CaseTableError(f"{SIZES_KEY}: {len(sizes)} sizes; a case names at most {MAX_SHAPE_SIZES}")
    params = _names(data[PARAMS_KEY], PARAMS_KEY) if PARAMS_KEY in data else []
    both = sorted(set(sizes) & set(params))
    if both:
        raise CaseTableError(f"{PARAMS_KEY}: {', '.join(both)} is also a size; name each value once")
    if params and not sizes:
        raise CaseTableError(f"{PARAMS_KEY}: a table with params names its sizes too ({SIZES_KEY}: [...])")
    tables: dict[str, Any] = {}
    for key, value in data.items():
        if key in (SIZES_KEY, PARAMS_KEY):
            continue
        where = str(key)
        if not isinstance(value, list):
            raise CaseTableError(f"{where}: expected a list of cases, got {reprlib.repr(value)}; a table of your "
                                 f"own family holds '{SIZES_KEY}: [names]' and lists of cases naming them")
        if sizes:
            cases: list[Any] = [_sized_case(item, sizes, params, f"{where}[{i}]") for i, item in enumerate(value)]
        else:
            cases = [_any_shape(item, f"{where}[{i}]") for i, item in enumerate(value)]
        _refuse_repeats(cases, where)
        tables[key] = cases
    if not tables:
        raise CaseTableError(f"no list of cases: add one (e.g. perf: [...]) beside {SIZES_KEY}")
    return tables


def _any_shape(value: object, where: str) -> Shape:
    if isinstance(value, dict):
        raise CaseTableError(f"{where}: a case of named sizes needs the table to declare them first "
                             f"('{SIZES_KEY}: [{', '.join(map(str, value))}]')")
    if not isinstance(value, str):
        raise CaseTableError(f"{where}: expected a shape such as '4096x4096x4096', got {reprlib.repr(value)}")
    return parse_shape(value)
