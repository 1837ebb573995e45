"""The one way a file is read: limits first, then the text, then YAML or JSON, each refusing what no gpuperf
file holds.

Every loader (baselines, results files, case tables) reads through ``read_text`` and then ``load_yaml`` or
``load_json``, so the same hostile input gets the same one-line refusal whichever command it is given to:

- only a regular file is opened (a folder, a FIFO, ``/dev/zero`` or a socket is refused by its kind, before
  a byte is read), and at most ``max_bytes`` of it: a larger file is refused with the limit named, so
  nothing grows without bound;
- the text must be UTF-8 without a byte-order mark (an editor's BOM and UTF-16 are named as such);
- YAML is parsed by a ``SafeLoader`` that refuses anchors and aliases outright (no gpuperf file needs
  them, and an alias bomb expands a few hundred bytes into gigabytes), refuses a key repeated in any
  mapping (YAML would keep the last one silently) and refuses nesting deeper than ``MAX_DEPTH``;
- JSON refuses ``NaN``/``Infinity`` (not JSON: gpuperf writes ``null``), repeated keys and deep nesting;
- a number with more digits than Python converts (4,300) is refused rather than raised as a ``ValueError``;
- JSON given where YAML is expected, and YAML where JSON is, is named as such.

Every refusal is an ``InputError`` whose message names the file, the cause and the fix. The YAML parser
is libyaml's when PyYAML has it (several times faster: a baseline near its size limit loads in seconds),
composed in Python so that the checks above see every event.
PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
import stat
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import orjson
import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, CollectionStartEvent
from yaml.nodes import MappingNode, Node
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

MIB = 2**20
#: No gpuperf file nests deeper than a handful of levels (a baseline: document → entries → entry → kernels
#: → kernel → grid is 6); 32 leaves room and stops a recursion bomb long before Python's stack.
MAX_DEPTH = 32


#: No gpuperf figure or count is anywhere near 2**64; a larger integer cannot even become a float.
MAX_INTEGER = 2**64
#: A message longer than this (a huge value quoted in it) keeps its start and its end, where the fix is.
MAX_MESSAGE = 1000


class InputError(ValueError):
    """A file that cannot be read as what it should be; the message names the file, the cause and the fix.

    Every loader's own error derives from it, so a message quoting a huge hostile value stays one line of
    bounded length (its middle cut out) whichever loader raises it."""

    def __init__(self, message: str) -> None:
        if len(message) > MAX_MESSAGE:
            message = f"{message[:MAX_MESSAGE * 2 // 3]} … {message[-MAX_MESSAGE // 3:]}"
        super().__init__(message)


class DuplicateKeyError(InputError):
    """A key repeated in one mapping; ``location`` is the path of keys from the top to that mapping."""

    def __init__(self, path: Path, location: tuple[str, ...], key: str, line: int, first_line: int) -> None:
        where = ".".join(location) + ": " if location else ""
        super().__init__(f"{path}: {where}key {key!r} appears twice, at line {line} (first at line {first_line}): "
                         "a merge conflict or a bad hand edit, and YAML would keep the last one silently; "
                         "remove one of them")
        self.location = location
        self.key = key
        self.line = line
        self.first_line = first_line


# --- bytes and text ------------------------------------------------------------------------------------


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is (``a folder``, ``a FIFO (named pipe)``, …), by its mode."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character "
             "device (such as /dev/zero)"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _unopened(exc: OSError, what: str) -> str:
    """Why a file could not be opened, and the fix."""
    if exc.errno == errno.ELOOP:
        return f"is a symbolic link that leads back to itself (a loop of links), not {what}; fix the link or pass " \
               "the file itself"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "cannot be read: permission denied; make it readable (chmod a+r) or pass another file"
    return f"cannot be opened ({exc.strerror or exc}); pass {what} that can be read"


def read_bytes(path: Path, max_bytes: int, what: str) -> bytes:
    """At most ``max_bytes`` of the regular file ``path``. A missing file raises ``FileNotFoundError`` (each
    loader says what a missing file means for it); anything else that is not a file of bounded size is an
    ``InputError``. ``what`` names what the file should be (``a baseline file``), for the messages."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not {what}; pass the file itself") from None
    except FileNotFoundError:
        if not os.path.islink(path):
            raise
        raise InputError(f"{path}: is a symbolic link to {os.readlink(path)}, which does not exist; point the link "
                         f"at {what} or pass the file itself") from None
    except OSError as exc:
        raise InputError(f"{path}: {_unopened(exc, what)}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise InputError(f"{path}: is {file_kind(status.st_mode)}, not {what}; pass a regular file")
        chunks: list[bytes] = []
        size, want = 0, status.st_size + 1  # its size and a byte more, to see it end; one growing is read on
        while size <= max_bytes:
            chunk = os.read(descriptor, min(want, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            want = MIB
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise InputError(f"{path}: is a folder, not {what}; pass the file itself") from None
        raise
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InputError(f"{path}: larger than the {max_bytes // MIB} MiB that {what} may hold, so it is not read "
                         "(a wrong file, or one that grew without bound); pass the right file")
    return data


def decode(path: Path, data: bytes, fix: str) -> str:
    """The file's UTF-8 text. A byte-order mark, UTF-16 and undecodable bytes are refused, each named; ``fix``
    ends the message for damage (``restore it from version control``, say)."""
    if data.startswith(codecs.BOM_UTF8):
        return _refuse_bom(path)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InputError(f"{path}: is UTF-16 text (an editor re-encoded it), gpuperf reads UTF-8; convert it: "
                         f"iconv -f UTF-16 -t UTF-8 {path} > {path}.utf8 && mv {path}.utf8 {path}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}: not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} (line "
                         f"{line}) cannot be decoded (a binary, re-encoded or corrupted file); {fix}") from None


def _refuse_bom(path: Path) -> str:
    raise InputError(f"{path}: starts with a UTF-8 byte-order mark (EF BB BF) that gpuperf never writes (an "
                     f"editor added it); remove it: sed -i '1s/^\\xEF\\xBB\\xBF//' {path}")


def read_text(path: Path, max_bytes: int, what: str, fix: str) -> str:
    """``read_bytes`` then ``decode``."""
    return decode(path, read_bytes(path, max_bytes, what), fix)


# --- YAML ----------------------------------------------------------------------------------------------


class _Refused(yaml.YAMLError):
    """An event no gpuperf file holds (an anchor, an alias, nesting too deep), with its line."""

    def __init__(self, problem: str, line: int, fix: str = "write the value out in full") -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line
        self.fix = fix


_MAX_DIGITS = 4000  # Python converts at most 4,300 digits; the value bound below does the rest


def _bounded(value: int) -> int:
    if abs(value) > MAX_INTEGER:
        raise ValueError(f"an integer of {len(str(abs(value)))} digits, larger than any figure or count")
    return value


class _StrictComposer(Composer):
    """A composer that refuses anchors, aliases and deep nesting as the events arrive, before any node is
    built from them."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]  # the parser's, mixed in beside this class
        line = event.start_mark.line + 1
        if isinstance(event, AliasEvent):
            raise _Refused(f"an alias (*{event.anchor}), which no gpuperf file uses (an alias bomb expands a "
                           "few hundred bytes into gigabytes)", line)
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"an anchor (&{event.anchor}), which no gpuperf file uses", line)
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nesting deeper than {MAX_DEPTH} levels, which no gpuperf file needs", line,
                               "pass the right file")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _UniqueKeyConstructor(SafeConstructor):
    """``SafeConstructor`` whose mappings refuse a repeated key. A mapping is constructed before its children,
    so the path of keys to each child mapping is recorded on the way down and a duplicate can be reported
    as "field X of entry Y" rather than as a bare line."""

    source = Path()

    def __init__(self) -> None:
        super().__init__()
        self._locations: dict[int, tuple[str, ...]] = {}

    def construct_yaml_int(self, node: Node) -> int:
        if len(str(node.value)) > _MAX_DIGITS:
            raise ValueError(f"an integer of {len(str(node.value))} digits, larger than any figure or count")
        return _bounded(super().construct_yaml_int(node))  # type: ignore[arg-type]

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        location = self._locations.get(id(node), ())
        first_lines: dict[Hashable, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the base constructor reports an unhashable key
            line = key_node.start_mark.line + 1
            if key in first_lines:
                raise DuplicateKeyError(self.source, location, str(key), line, first_lines[key])
            first_lines[key] = line
            self._locations[id(value_node)] = (*location, str(key))
        return super().construct_mapping(node, deep=deep)


_UniqueKeyConstructor.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:int", _UniqueKeyConstructor.construct_yaml_int)

if yaml.__with_libyaml__:
    from yaml.cyaml import CParser  # type: ignore[attr-defined]

    class StrictLoader(_StrictComposer, CParser, _UniqueKeyConstructor, Resolver):
        """libyaml's parser, with the checks above in Python composition and construction."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _UniqueKeyConstructor.__init__(self)
            Resolver.__init__(self)
            _StrictComposer.__init__(self)
else:  # pragma: no cover - PyYAML built without libyaml
    class StrictLoader(Reader, Scanner, Parser, _StrictComposer, _UniqueKeyConstructor, Resolver):  # type: ignore[no-redef]
        """PyYAML's pure-Python parser, with the checks above."""

        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            _StrictComposer.__init__(self)
            _UniqueKeyConstructor.__init__(self)
            Resolver.__init__(self)


def load_yaml(path: Path, text: str, fix: str) -> Any:
    """The YAML document in ``text``, read by ``StrictLoader``. A repeated key raises ``DuplicateKeyError``
    (the loader of a format may word it for its own keys); anything else refused is an ``InputError``."""
    if text.lstrip().startswith(("{", "[")) and _is_json(text):
        raise InputError(f"{path}: is JSON (a results file?), not the YAML file expected here; pass the "
                         "right file")
    loader = StrictLoader(text)
    loader.source = path
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise InputError(f"{path}: line {exc.line} holds {exc.problem}; {exc.fix}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}: not valid YAML{where} ({problem}); {fix}") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{path}: holds a value that cannot be read ({_first_line(exc)}); {fix}") from None
    finally:
        loader.dispose()


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


# --- JSON ----------------------------------------------------------------------------------------------


def _json_int(digits: str) -> int:
    if len(digits) > _MAX_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits, larger than any figure or count")
    return _bounded(int(digits))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (gpuperf writes a missing figure as null)")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key!r} appears twice in one object (a bad hand edit or a merge)")
        result[key] = value
    return result


#: A JSON string (its escapes included): what the depth check leaves out, since brackets in it are text.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
#: Every byte but the four brackets: deleted (``bytes.translate``) to leave the structure alone.
_NOT_BRACKETS = bytes(code for code in range(256) if code not in b"[]{}")


def _depth_exceeds(text: str, limit: int) -> bool:
    """Whether the containers of ``text`` (JSON that has parsed) nest deeper than ``limit``: counted over its
    brackets outside strings, a scan at C speed but for one step per bracket (a traversal of the parsed value
    took 2.6 s of CPU for a 30 MiB results file, past the hostile-input limit with its parse)."""
    depth = 0
    for byte in _JSON_STRING.sub("", text).encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS):
        if byte in b"[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


#: orjson's options for the indented form gpuperf writes its JSON files in.
INDENTED = orjson.OPT_INDENT_2


def load_json(path: Path, text: str | bytes, fix: str) -> Any:
    """The JSON value in ``text`` (a file's text, or its bytes as read): strict (no ``NaN``, no repeated key, at
    most ``MAX_DEPTH`` levels), every object and number checked as it is read by Python's parser; YAML text is
    named as such, a cut-short file as cut short, bytes that are not UTF-8 as ``decode`` names them."""
    return load_json_strictly(path, decode(path, text, fix) if isinstance(text, bytes) else text, fix)


def load_json_strictly(path: Path, text: str, fix: str) -> Any:
    """``load_json`` by Python's parser alone, every object and number checked as it is read."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_pairs,
                          parse_int=_json_int)
    except json.JSONDecodeError as exc:
        stripped = text.lstrip()
        if stripped and not stripped.startswith(("{", "[")):
            raise InputError(f"{path}: not JSON: it reads as YAML or other text (a baseline file?), but JSON is "
                             f"expected here; pass the right file") from None
        cut = exc.pos >= len(text.rstrip())
        cause = "ends in the middle of a value: it was cut short (an interrupted write?)" if cut else "is damaged"
        raise InputError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}): the file "
                         f"{cause}; {fix}") from None
    except RecursionError:
        raise InputError(f"{path}: nests deeper than {MAX_DEPTH} levels, which no gpuperf file needs; "
                         f"{fix}") from None
    except ValueError as exc:
        raise InputError(f"{path}: {_first_line(exc)}; {fix}") from None
    if _depth_exceeds(text, MAX_DEPTH):
        raise InputError(f"{path}: nests deeper than {MAX_DEPTH} levels, which no gpuperf file needs; {fix}")
    return data
