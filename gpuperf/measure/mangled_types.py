"""The Itanium C++ ABI mangling's input and its types: the reader's cursor (characters, ``<number>``, ``<seq-id>``,
nesting bounded), substitutions and template parameters, template arguments, literals and expressions. The names
these nest (``<name>``, read by ``mangled_names``) are the subclass's: a type may name a class, a class's template
arguments hold types.

Substitutions and template parameters are kept as references, never expanded into text beyond ``RENDERED_LENGTH``
characters: no demangler's worst case (libstdc++'s is exponential in the symbol's length) is met.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from gpuperf.measure.symbol_parts import RENDERED_LENGTH, Part, rendered, spelled_part


class Unreadable(Exception):
    """The mangling ends or holds something the grammar does not allow: what was read so far stands."""


_BUILTINS = {"v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
             "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
             "x": "long long", "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128", "f": "float",
             "d": "double", "e": "long double", "g": "__float128", "z": "..."}
_D_BUILTINS = {"d": "decimal64", "e": "decimal128", "f": "decimal32", "h": "half", "i": "char32_t", "s": "char16_t",
               "u": "char8_t", "a": "auto", "c": "decltype(auto)", "n": "decltype(nullptr)"}
_STD_SUBSTITUTIONS = {"t": "std", "a": "std::allocator", "b": "std::basic_string", "s": "std::string",
                      "i": "std::istream", "o": "std::ostream", "d": "std::iostream"}
OPERATORS = frozenset(
    "nw na dl da ps ng ad de co pl mi ml dv rm an or eo aS pL mI mL dV rM aN oR eO ls rs lS rS eq ne lt gt le ge ss "
    "nt aa oo pp mm cm pm pt cl ix qu cv li st sz at az dt ds sr sZ sP sp tw tr ti te dc sc cc rc fl fr fL fR tl il "
    "nx so gs".split())
#: Operators whose operands run to an ``E``.
_LIST_OPERATORS = frozenset({"cl", "tl", "il", "nw", "na", "sP"})
#: How a demangler writes an integer literal of each type (``array<char*, 2ul>``).
_LITERAL_SUFFIXES = {"int": "", "unsigned int": "u", "long": "l", "unsigned long": "ul", "long long": "ll",
                     "unsigned long long": "ull"}
_MAX_DEPTH = 200
#: ``<number>``: ``n`` for a negative one, then ASCII digits (seven read: six is the most a name may have).
_NUMBER = re.compile(r"(n?)([0-9]{1,7})")


class MangledReader(ABC):
    """A reader of a mangled symbol's types: recursive descent over the grammar, each step consuming input, nesting
    bounded, so the time is linear in the symbol. Substitutions and template parameters are kept as references,
    never expanded into text beyond ``RENDERED_LENGTH`` characters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.depth = 0
        #: Each candidate a ``S<n>_`` may name: a type as read, or a prefix of a name as the parts it ends at (rendered
        #: when named: rendering every prefix as it is read would cost a pass over the name per scope).
        self.substitutions: list[tuple[str, Part | None] | tuple[list[Part], int]] = []
        self.template_args: list[tuple[str, Part | None]] = []
        self.root: list[Part] = []

    # -- input

    def peek(self, offset: int = 0) -> str:
        """The character ``offset`` ahead, ``""`` past the end (a slice: no bounds to check)."""
        index = self.at + offset
        return self.text[index:index + 1]

    def take(self, expected: str = "") -> str:
        char = self.peek()
        if not char or (expected and char != expected):
            raise Unreadable
        self.at += 1
        return char

    def number(self) -> int:
        """A ``<number>`` of at most 6 digits (no name is a megabyte long: more is no mangling)."""
        match = _NUMBER.match(self.text, self.at)
        if not match or len(match.group(2)) > 6:
            raise Unreadable
        self.at = match.end()
        return -int(match.group(2)) if match.group(1) else int(match.group(2))

    def seq_id(self) -> int:
        """``<seq-id> _`` (base 36), or ``_`` alone (-1: the first)."""
        start = self.at
        while self.peek() != "_":
            if not (self.peek().isascii() and self.peek().isalnum()) or self.at - start > 6:
                raise Unreadable
            self.at += 1
        digits = self.text[start:self.at]
        self.at += 1
        return int(digits, 36) if digits else -1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise Unreadable

    def source_name(self) -> str:
        length = self.number()
        if length <= 0 or self.at + length > len(self.text):
            raise Unreadable
        text = self.text[self.at:self.at + length]
        self.at += length
        if text.startswith("_GLOBAL__N"):
            return "(anonymous namespace)"
        return text

    @abstractmethod
    def name(self, parts: list[Part]) -> None:
        """``<name>`` into ``parts`` (appended as read, so a symbol cut short keeps what was read)."""

    # -- substitutions, template arguments, expressions and types

    def substitution(self) -> tuple[str, Part | None]:
        self.take("S")
        char = self.peek()
        if char in _STD_SUBSTITUTIONS:
            self.at += 1
            text = _STD_SUBSTITUTIONS[char]
            return text, Part(text.split("::")[-1])
        index = self.seq_id() + 1
        if 0 <= index < len(self.substitutions):
            return self.candidate(index)
        return "…", None

    def template_param(self) -> tuple[str, Part | None]:
        self.take("T")
        index = self.seq_id() + 1
        if 0 <= index < len(self.template_args):
            return self.template_args[index]
        return "…", None

    def candidate(self, index: int) -> tuple[str, Part | None]:
        """Substitution candidate ``index``, rendered once."""
        entry = self.substitutions[index]
        if isinstance(entry[0], list):
            parts, end = entry[0], int(entry[1])
            entry = (rendered(parts, end), parts[end - 1] if end else None)
            self.substitutions[index] = entry
        text, part = entry
        return str(text), part if isinstance(part, Part) else None

    def template_arguments(self, owner: Part, top: bool = False) -> None:
        self.take("I")
        self.enter()
        owner.args = []
        while self.peek() != "E":
            owner.args.append(self.template_argument())
        self.at += 1
        self.depth -= 1
        if top:
            self.template_args = owner.args

    def template_argument(self) -> tuple[str, Part | None]:
        char = self.peek()
        if char == "L":
            return self.literal(), None
        if char == "X":
            self.at += 1
            self.expression_until_end()
            return "…", None
        if char == "J":
            self.at += 1
            self.enter()
            items = []
            while self.peek() != "E":
                items.append(self.template_argument())
            self.at += 1
            self.depth -= 1
            pack = Part("")
            pack.args = items
            return spelled_part(pack)[1:-1], items[0][1] if len(items) == 1 else None
        return self.type()

    def literal(self) -> str:
        self.take("L")
        if self.peek() == "_" and self.peek(1) == "Z":
            self.at += 2
            parts: list[Part] = []
            self.name(parts)
            self.skip_to_e()
            self.take("E")
            return "&" + (parts[-1].text if parts else "…")
        if self.peek() == "Z":
            self.at += 1
            parts = []
            self.name(parts)
            self.skip_to_e()
            self.take("E")
            return "&" + (parts[-1].text if parts else "…")
        kind, _ = self.type()
        start = self.at
        while self.peek() != "E":
            self.take()
        value = self.text[start:self.at].replace("n", "-", 1)
        self.at += 1
        if kind == "bool" and value in ("0", "1"):
            return "true" if value == "1" else "false"
        suffix = _LITERAL_SUFFIXES.get(kind)
        if suffix is not None:
            return value + suffix
        return f"({kind}){value}"

    def skip_to_e(self) -> None:
        """The parameter types of a local name's enclosing function, up to its ``E``: read as types."""
        while self.peek() and self.peek() != "E":
            self.type()

    def expression_until_end(self) -> None:
        """An expression and whatever it nests, up to the ``E`` that closes it: read for its extent (and the
        substitutions its types add), not rendered."""
        self.enter()
        closers = 1
        while closers:
            char = self.peek()
            if not char:
                raise Unreadable
            code = self.text[self.at:self.at + 2]
            if char == "E":
                self.at += 1
                closers -= 1
            elif char == "L":
                self.literal()
            elif char == "f" and self.peek(1) in ("p", "L"):
                self.at += 2
                while self.peek() != "_":
                    self.take()
                self.at += 1
            elif code in OPERATORS:
                self.at += 2
                if code in _LIST_OPERATORS:
                    closers += 1
                elif code == "cv" and self.peek() != "_":
                    self.type()
                    if self.peek() == "_":
                        self.at += 1
                        closers += 1
                elif code == "sr" and self.peek() == "N":
                    self.at += 1
                    closers += 1
            elif char == "I":
                self.at += 1
                closers += 1
            elif char == "J":
                self.at += 1
                closers += 1
            elif char == "_":
                self.at += 1
            elif char.isdigit():
                self.source_name()
                while self.peek() == "B":
                    self.at += 1
                    self.source_name()
            else:
                self.type()
        self.depth -= 1

    def type(self) -> tuple[str, Part | None]:
        """A type: its rendering and, where it names a class, the class's last ``Part``. Every type but a builtin
        and a plain substitution becomes a substitution candidate."""
        self.enter()
        char = self.peek()
        result: tuple[str, Part | None]
        if char in _BUILTINS and char:
            self.at += 1
            result, added = (_BUILTINS[char], None), False
        elif char == "S" and self.peek(1) not in _STD_SUBSTITUTIONS:
            result, added = self.substituted_type()
        elif char == "D":
            result, added = self.d_type()
        else:
            result, added = self.composed_type(char), True
        if added:
            self.substitutions.append(result)
        self.depth -= 1
        return result

    def composed_type(self, char: str) -> tuple[str, Part | None]:
        """A type that starts with ``char`` and is not a builtin: one built on other types, a template parameter, a
        vendor-qualified type or a class's name."""
        if char == "u":
            self.at += 1
            return self.source_name(), None
        if char in ("r", "V", "K"):
            return self.qualified_type()
        if char in ("P", "R", "O"):
            self.at += 1
            inner, _ = self.type()
            return (inner + {"P": "*", "R": "&", "O": "&&"}[char])[:RENDERED_LENGTH], None
        if char == "F":
            return self.function_type()
        if char == "A":
            return self.array_type()
        if char == "M":
            self.at += 1
            owner, _ = self.type()
            member, _ = self.type()
            return f"{member} {owner}::*"[:RENDERED_LENGTH], None
        if char == "T":
            return self.template_param_type()
        if char == "U":  # a vendor qualifier
            self.at += 1
            self.source_name()
            if self.peek() == "I":
                self.template_arguments(Part(""))
            return self.type()
        parts: list[Part] = []
        self.name(parts)
        return rendered(parts), parts[-1] if parts else None

    def qualified_type(self) -> tuple[str, Part | None]:
        """``r``, ``V``, ``K`` (restrict, volatile, const) and the type they qualify."""
        qualifiers = []
        while self.peek() in ("r", "V", "K") and self.peek():
            qualifiers.append({"r": "restrict", "V": "volatile", "K": "const"}[self.take()])
        inner, part = self.type()
        return f"{inner} {' '.join(reversed(qualifiers))}"[:RENDERED_LENGTH], part

    def function_type(self) -> tuple[str, Part | None]:
        """``F [Y] <return type> <parameter types> [<ref-qualifier>] E``."""
        self.at += 1
        if self.peek() == "Y":
            self.at += 1
        returned, _ = self.type()
        parameters = []
        while self.peek() not in ("E", "R", "O") or (self.peek() in ("R", "O") and self.peek(1) != "E"):
            parameters.append(self.type()[0])
        if self.peek() in ("R", "O"):
            self.at += 1
        self.take("E")
        return f"{returned} ({', '.join(parameters)})"[:RENDERED_LENGTH], None

    def array_type(self) -> tuple[str, Part | None]:
        """``A [<size>] _ <element type>``, the size a number, absent or an expression (not rendered)."""
        self.at += 1
        if self.peek().isdigit():
            size = str(self.number())
        elif self.peek() == "_":
            size = ""
        else:
            self.skip_to_underscore()
            size = "…"
        self.take("_")
        inner, _ = self.type()
        return f"{inner} [{size}]", None

    def template_param_type(self) -> tuple[str, Part | None]:
        """A template parameter used as a type; with template arguments, it is a candidate before them too."""
        result = self.template_param()
        if self.peek() == "I":
            self.substitutions.append(result)
            holder = result[1] or Part(result[0])
            self.template_arguments(Part(holder.text))
        return result

    def substituted_type(self) -> tuple[tuple[str, Part | None], bool]:
        """A substitution used as a type, and whether it is a new candidate (only with template arguments)."""
        result = self.substitution()
        if self.peek() != "I":
            return result, False
        holder = Part(result[1].text if result[1] is not None else result[0])
        self.template_arguments(holder)
        return (spelled_part(holder)[:RENDERED_LENGTH], holder), True

    def skip_to_underscore(self) -> None:
        """An array's or a vector's size that is an expression: its extent only, up to the ``_`` after it."""
        while self.peek() and self.peek() != "_":
            self.take()

    def d_type(self) -> tuple[tuple[str, Part | None], bool]:
        self.at += 1
        char = self.take()
        if char in _D_BUILTINS:
            return (_D_BUILTINS[char], None), False
        if char in ("t", "T"):
            self.expression_until_end()
            return ("decltype(…)", None), True
        if char == "p":
            return self.type(), True
        if char == "F":  # _FloatN, _FloatNx, std::bfloat16_t
            bits = self.number()
            if self.peek() == "b":
                self.at += 1
                return ("std::bfloat16_t", None), False
            if self.peek() == "x":
                self.at += 1
            else:
                self.take("_")
            return (f"_Float{bits}", None), False
        if char in ("B", "U"):
            self.number()
            self.take("_")
            return ("_BitInt", None), False
        if char == "v":
            if self.peek().isdigit():
                self.number()
            else:
                self.skip_to_underscore()
            self.take("_")
            inner, _ = self.type()
            return (f"{inner} vector", None), True
        raise Unreadable
