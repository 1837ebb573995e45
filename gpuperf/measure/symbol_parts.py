"""A symbol read into the scopes of its qualified name, from either form a tracer reports: mangled (Itanium C++ ABI,
``_ZN2at6native29vectorized_elementwise_kernelILi4E…``) or demangled (``void at::native::vectorized_elementwise_kernel<4,
…>(int, …)``, as libstdc++, kineto, nsys or ncu write it).

Both readers take one pass from the left, each step consuming input and nesting bounded, so the time is linear in
the text they are given (``kernel_names`` gives them its first 4 KiB); a text cut short or outside the grammar keeps
the scopes read before that point. Substitutions and template parameters of a mangling are kept as references, never
expanded into text beyond ``RENDERED_LENGTH`` characters: no demangler's worst case (libstdc++'s is exponential in
the symbol's length) is met. The parameter types of the kernel itself are left unread.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re

#: The longest rendering of one scope or type (a symbol's template arguments are not all rendered).
RENDERED_LENGTH = 400


class Part:
    """One scope of a qualified name: its identifier (or ``{lambda(…)#n}``, ``(anonymous namespace)``…) and its
    template arguments, each a rendered type or value and, where it names a class, that class's own ``Part``."""

    __slots__ = ("text", "args", "outer")

    def __init__(self, text: str, outer: str = "") -> None:
        self.text = text
        self.args: list[tuple[str, Part | None]] = []
        self.outer = outer  # the identifier of the scope it belongs to, where known


def spelled_part(part: Part) -> str:
    """``name<arguments>``, at most ``RENDERED_LENGTH`` characters (a symbol's arguments are not all rendered)."""
    if not part.args:
        return part.text
    texts, length = [], len(part.text)
    for text, _ in part.args:
        texts.append(text)
        length += len(text) + 2
        if length > RENDERED_LENGTH:
            break
    return f"{part.text}<{', '.join(texts)}>"[:RENDERED_LENGTH]


def rendered(parts: list[Part], end: int | None = None) -> str:
    """``a::b<c>::d`` (the parts before ``end``), at most ``RENDERED_LENGTH`` characters, the last parts kept."""
    texts, length = [], 0
    for index in range(len(parts) - 1 if end is None else end - 1, -1, -1):
        texts.append(spelled_part(parts[index]))
        length += len(texts[-1]) + 2
        if length > RENDERED_LENGTH:
            break
    return "::".join(reversed(texts))[-RENDERED_LENGTH:]


def read_mangled(text: str) -> list[Part]:
    """The scopes of the name of a mangled symbol ``_Z…`` (as many as could be read)."""
    return _Mangled(text).read()


def read_declaration(text: str) -> list[Part]:
    """The scopes of the name of a demangled declaration (as many as could be read)."""
    return _declaration_parts(text)


# --- a mangled symbol (Itanium C++ ABI) ----------------------------------------------------------------------


class _Unreadable(Exception):
    """The mangling ends or holds something the grammar does not allow: what was read so far stands."""


_BUILTINS = {"v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
             "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
             "x": "long long", "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128", "f": "float",
             "d": "double", "e": "long double", "g": "__float128", "z": "..."}
_D_BUILTINS = {"d": "decimal64", "e": "decimal128", "f": "decimal32", "h": "half", "i": "char32_t", "s": "char16_t",
               "u": "char8_t", "a": "auto", "c": "decltype(auto)", "n": "decltype(nullptr)"}
_STD_SUBSTITUTIONS = {"t": "std", "a": "std::allocator", "b": "std::basic_string", "s": "std::string",
                      "i": "std::istream", "o": "std::ostream", "d": "std::iostream"}
_OPERATORS = frozenset(
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


class _Mangled:
    """A reader of a mangled symbol's name: recursive descent over the grammar, each step consuming input, nesting
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
            raise _Unreadable
        self.at += 1
        return char

    def number(self) -> int:
        """A ``<number>`` of at most 6 digits (no name is a megabyte long: more is no mangling)."""
        match = _NUMBER.match(self.text, self.at)
        if not match or len(match.group(2)) > 6:
            raise _Unreadable
        self.at = match.end()
        return -int(match.group(2)) if match.group(1) else int(match.group(2))

    def seq_id(self) -> int:
        """``<seq-id> _`` (base 36), or ``_`` alone (-1: the first)."""
        start = self.at
        while self.peek() != "_":
            if not (self.peek().isascii() and self.peek().isalnum()) or self.at - start > 6:
                raise _Unreadable
            self.at += 1
        digits = self.text[start:self.at]
        self.at += 1
        return int(digits, 36) if digits else -1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Unreadable

    # -- the grammar

    def read(self) -> list[Part]:
        try:
            self.take("_")
            self.take("Z")
            if self.peek() in ("T", "G"):  # special names (vtables, guard variables): no kernel
                raise _Unreadable
            self.name(self.root)
        except (_Unreadable, RecursionError, ValueError, IndexError):  # what was read so far stands
            pass
        return self.root

    def name(self, parts: list[Part]) -> None:
        """``<name>`` into ``parts`` (appended as read, so a symbol cut short keeps what was read)."""
        self.enter()
        char = self.peek()
        if char == "N":
            self.nested_name(parts)
        elif char == "Z":
            self.local_name(parts)
        else:
            substituted = char == "S" and self.peek(1) != "t"
            if substituted:
                text, part = self.substitution()
                parts.append(Part(part.text) if part is not None else Part(text))
            else:
                if char == "S":
                    self.at += 2
                    parts.append(Part("std"))
                parts.append(self.unqualified_name())
            if self.peek() == "I":
                if not substituted:
                    self.substitutions.append((parts, len(parts)))
                self.template_arguments(parts[-1], top=parts is self.root)
        self.depth -= 1

    def nested_name(self, parts: list[Part]) -> None:
        self.take("N")
        while self.peek() in ("r", "V", "K", "R", "O"):
            self.at += 1
        first = True
        while self.peek() != "E":
            char = self.peek()
            substituted = False
            if char == "I":
                if not parts:
                    raise _Unreadable
                self.template_arguments(parts[-1], top=parts is self.root)
            elif char == "S" and first:
                text, part = self.substitution()
                substituted = True
                parts.append(Part(part.text) if part is not None else Part(text))
            elif char == "T" and first:
                text, part = self.template_param()
                parts.append(part if part is not None else Part(text))
            elif char == "D" and self.peek(1) in ("t", "T") and first:
                self.at += 2
                self.expression_until_end()
                parts.append(Part("decltype(…)"))
            elif char == "M":
                self.at += 1
                continue
            else:
                parts.append(self.unqualified_name())
                parts[-1].outer = parts[-2].text if len(parts) > 1 else ""
            first = False
            if self.peek() != "E" and not substituted:
                self.substitutions.append((parts, len(parts)))
        self.at += 1

    def local_name(self, parts: list[Part]) -> None:
        """``Z <encoding> E <entity>``: an entity inside a function, named within the function's name."""
        self.take("Z")
        self.name(parts)
        self.skip_to_e()  # the enclosing function's parameter types
        self.take("E")
        if self.peek() == "s":
            self.at += 1
            parts.append(Part("{string literal}"))
        else:
            if self.peek() == "d":
                self.at += 1
                if self.peek() != "_":
                    self.number()
                self.take("_")
            self.name(parts)
        if self.peek() == "_":  # a discriminator
            self.at += 1
            if self.peek() == "_":
                self.at += 1
                self.number()
                self.take("_")
            elif self.peek().isdigit():
                self.at += 1

    def skip_to_e(self) -> None:
        """The parameter types of a local name's enclosing function, up to its ``E``: read as types."""
        while self.peek() and self.peek() != "E":
            self.type()

    def unqualified_name(self) -> Part:
        char = self.peek()
        if char == "L":  # an internal-linkage name
            self.at += 1
            char = self.peek()
        if char.isdigit():
            part = Part(self.source_name())
        elif char == "U" and self.peek(1) in ("l", "t"):
            part = self.unnamed_type()
        elif char == "C" and self.peek(1) in "12345I" and self.peek(1):
            self.at += 2
            if self.text[self.at - 1] == "I":
                self.type()
            part = Part(self.constructor_name())
        elif char == "D" and self.peek(1) in "0125" and self.peek(1):
            self.at += 2
            part = Part("~" + self.constructor_name())
        elif char == "D" and self.peek(1) == "C":
            self.at += 2
            names = []
            while self.peek() != "E":
                names.append(self.source_name())
            self.at += 1
            part = Part(f"[{', '.join(names)}]")
        elif char.islower() and char.isascii():
            part = Part(self.operator_name())
        else:
            raise _Unreadable
        while self.peek() == "B":  # ABI tags ([abi:cxx11], numba's B2v1 and its hash): no part of a name
            self.at += 1
            self.source_name()
        return part

    def constructor_name(self) -> str:
        """The name of the class just named (a constructor's or destructor's, which the mangling leaves out)."""
        entry = self.substitutions[-1] if self.substitutions else ("", None)
        part = entry[0][entry[1] - 1] if isinstance(entry[0], list) and isinstance(entry[1], int) else entry[1]
        if isinstance(part, Part) and len(part.text) <= RENDERED_LENGTH:
            return part.text.lstrip("~")  # a destructor's own scope names no class
        return "{constructor}"

    def operator_name(self) -> str:
        code = self.text[self.at:self.at + 2]
        if code == "cv":
            self.at += 2
            return f"operator {self.type()[0]}"
        if code == "li":
            self.at += 2
            return f'operator"" {self.source_name()}'
        if code.startswith("v") and code[1:].isdigit():
            self.at += 2
            return f"operator {self.source_name()}"
        if code not in _OPERATORS:
            raise _Unreadable
        self.at += 2
        return f"operator{_OPERATOR_TEXT.get(code, code)}"

    def source_name(self) -> str:
        length = self.number()
        if length <= 0 or self.at + length > len(self.text):
            raise _Unreadable
        text = self.text[self.at:self.at + length]
        self.at += length
        if text.startswith("_GLOBAL__N"):
            return "(anonymous namespace)"
        return text

    def unnamed_type(self) -> Part:
        self.at += 1
        if self.take() == "t":
            number = self.seq_id_number()
            return Part(f"{{unnamed type#{number}}}")
        while self.peek() == "T":  # a generic lambda's template parameters
            self.at += 2
        types = []
        while self.peek() != "E":
            types.append(self.type()[0])
        self.at += 1
        number = self.seq_id_number()
        signature = "" if types == ["void"] else ", ".join(types)
        return Part(f"{{lambda({signature})#{number}}}")

    def seq_id_number(self) -> int:
        if self.peek() == "_":
            self.at += 1
            return 1
        number = self.number()
        self.take("_")
        return number + 2

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

    def expression_until_end(self) -> None:
        """An expression and whatever it nests, up to the ``E`` that closes it: read for its extent (and the
        substitutions its types add), not rendered."""
        self.enter()
        closers = 1
        while closers:
            char = self.peek()
            if not char:
                raise _Unreadable
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
            elif code in _OPERATORS:
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
        """A type: its rendering and, where it names a class, the class's last ``Part``."""
        self.enter()
        char = self.peek()
        added = True
        result: tuple[str, Part | None]
        if char in _BUILTINS and char:
            self.at += 1
            result, added = (_BUILTINS[char], None), False
        elif char == "u":
            self.at += 1
            result = (self.source_name(), None)
        elif char in ("r", "V", "K"):
            qualifiers = []
            while self.peek() in ("r", "V", "K") and self.peek():
                qualifiers.append({"r": "restrict", "V": "volatile", "K": "const"}[self.take()])
            inner, part = self.type()
            result = (f"{inner} {' '.join(reversed(qualifiers))}"[:RENDERED_LENGTH], part)
        elif char in ("P", "R", "O"):
            self.at += 1
            inner, _ = self.type()
            result = (inner + {"P": "*", "R": "&", "O": "&&"}[char])[:RENDERED_LENGTH], None
        elif char == "F":
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
            result = (f"{returned} ({', '.join(parameters)})"[:RENDERED_LENGTH], None)
        elif char == "A":
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
            result = (f"{inner} [{size}]", None)
        elif char == "M":
            self.at += 1
            owner, _ = self.type()
            member, _ = self.type()
            result = (f"{member} {owner}::*"[:RENDERED_LENGTH], None)
        elif char == "T":
            result = self.template_param()
            if self.peek() == "I":
                self.substitutions.append(result)
                holder = result[1] or Part(result[0])
                self.template_arguments(Part(holder.text))
        elif char == "S" and self.peek(1) not in _STD_SUBSTITUTIONS:
            result, added = self.substitution(), False
            if self.peek() == "I":
                holder = Part(result[1].text if result[1] is not None else result[0])
                self.template_arguments(holder)
                result, added = (spelled_part(holder)[:RENDERED_LENGTH], holder), True
        elif char == "D":
            result, added = self.d_type()
        elif char == "U":  # a vendor qualifier
            self.at += 1
            self.source_name()
            if self.peek() == "I":
                self.template_arguments(Part(""))
            result = self.type()
        else:
            parts: list[Part] = []
            self.name(parts)
            result = (rendered(parts), parts[-1] if parts else None)
        if added:
            self.substitutions.append(result)
        self.depth -= 1
        return result

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
        raise _Unreadable

    def candidate(self, index: int) -> tuple[str, Part | None]:
        """Substitution candidate ``index``, rendered once."""
        entry = self.substitutions[index]
        if isinstance(entry[0], list):
            parts, end = entry[0], int(entry[1])
            entry = (rendered(parts, end), parts[end - 1] if end else None)
            self.substitutions[index] = entry
        text, part = entry
        return str(text), part if isinstance(part, Part) else None


_OPERATOR_TEXT = {"nw": " new", "na": " new[]", "dl": " delete", "da": " delete[]", "ps": "+", "ng": "-",
                  "ad": "&", "de": "*", "co": "~", "pl": "+", "mi": "-", "ml": "*", "dv": "/", "rm": "%",
                  "an": "&", "or": "|", "eo": "^", "aS": "=", "pL": "+=", "mI": "-=", "mL": "*=", "dV": "/=",
                  "rM": "%=", "aN": "&=", "oR": "|=", "eO": "^=", "ls": "<<", "rs": ">>", "lS": "<<=", "rS": ">>=",
                  "eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "ss": "<=>", "nt": "!",
                  "aa": "&&", "oo": "||", "pp": "++", "mm": "--", "cm": ",", "pm": "->*", "pt": "->", "cl": "()",
                  "ix": "[]", "qu": "?"}


# --- a demangled declaration ---------------------------------------------------------------------------------

_OPENING = {"<": ">", "(": ")", "{": "}", "[": "]"}
_OPERATOR = re.compile(r"operator(?:<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|<|>|\[\]|\(\)(?=\s*\())")
_IDENTIFIER = re.compile(r"\w+")
_QUALIFIER_AFTER_PARAMETERS = re.compile(r" ?(?:const\b|volatile\b|noexcept\b|&&|&)")


def _declaration_parts(text: str, depth: int = 0) -> list[Part]:
    """The qualified name of a demangled declaration (``void ns::f<int>(float) const`` → ``ns``, ``f<int>``), read
    from the left in one pass: a space at the top level ends a return type, ``::`` a scope, a ``(…)`` group after a
    scope's name the parameter list (unless ``::`` follows it: then it was a local entity's enclosing function).
    Brackets match by a stack, so a stray ``>`` (``(a>b)``) or an unclosed ``<`` inside parentheses cannot
    unbalance the rest. The first template argument of the last scope is read the same way, ``depth`` levels down
    at most (what a generic wrapper is named by)."""
    parts: list[Part] = []
    name = ""  # the scope's identifier, once its template arguments open
    arguments: list[str] = []
    argument_start = scope_start = index = 0
    stack: list[str] = []
    open_groups = {">": 0, ")": 0, "}": 0, "]": 0}  # how many of each closer the stack awaits: no scan of it
    blank = True  # nothing of the scope read yet at the top level
    length = len(text)
    while index < length:
        char = text[index]
        if char == "o" and text.startswith("operator", index) and (
                index == 0 or not (text[index - 1].isalnum() or text[index - 1] == "_")):
            match = _OPERATOR.match(text, index)
            if match:
                index, blank = match.end(), False
                continue
        if char.isalnum() or char == "_":  # an identifier, read as one step
            match = _IDENTIFIER.match(text, index)
            index = match.end() if match else index + 1
            blank = blank and bool(stack)
            continue
        if char in _OPENING:
            if not stack and char == "(" and not blank:
                tail = _after_qualifiers(text, _closing(text, index))
                if text.startswith("::", tail):  # a local entity's enclosing function: one scope of the name
                    index = tail
                    continue
                break
            if not stack and char == "<":
                name = name or text[scope_start:index].strip()
                argument_start = index + 1
            stack.append(_OPENING[char])
            open_groups[stack[-1]] += 1
            blank = False
        elif stack:
            if char == stack[-1]:
                open_groups[stack.pop()] -= 1
                if not stack and char == ">":
                    arguments.append(text[argument_start:index].strip())
            elif char in ")}]" and open_groups[char]:  # closed across an unclosed ``<``: close both
                while True:
                    closer = stack.pop()
                    open_groups[closer] -= 1
                    if closer == char:
                        break
            elif char == "," and len(stack) == 1 and stack[0] == ">":
                arguments.append(text[argument_start:index].strip())
                argument_start = index + 1
        elif char == " ":
            if not blank:  # what came before was a return type
                parts, scope_start, name, arguments, blank = [], index + 1, "", [], True
        elif char == ":" and text.startswith("::", index):
            parts.append(_scope(text[scope_start:index], name, arguments, depth, parts[-1].text if parts else ""))
            index += 2
            scope_start, name, arguments, blank = index, "", [], True
            continue
        else:
            blank = False
        index += 1
    if stack and name and stack[0] == ">":  # cut short inside the template arguments: keep what was read
        arguments.append(text[argument_start:index].strip())
        stack = []
    if not stack:
        parts.append(_scope(text[scope_start:index], name, arguments, depth, parts[-1].text if parts else ""))
    return [part for part in parts if part.text]


def _after_qualifiers(text: str, index: int) -> int:
    """``index`` past the qualifiers a demangler writes after a parameter list (`` const``, ``&``, ``noexcept``)."""
    while True:
        match = _QUALIFIER_AFTER_PARAMETERS.match(text, index)
        if not match or match.end() == index:
            return index
        index = match.end()


def _closing(text: str, start: int) -> int:
    """The index after the group that opens at ``start`` (the end of ``text`` when it is not closed)."""
    stack: list[str] = []
    for index in range(start, len(text)):
        char = text[index]
        if char in _OPENING and char != "<":
            stack.append(_OPENING[char])
        elif stack and char == stack[-1]:
            stack.pop()
            if not stack:
                return index + 1
    return len(text)


def _scope(text: str, name: str, arguments: list[str], depth: int, outer: str) -> Part:
    part = Part((name or text).strip(), outer)
    part.args = [(argument, None) for argument in arguments]
    for index, (argument, _) in enumerate(part.args[:4 if depth == 0 else 1] if depth < 8 else []):
        # the class an argument names, with its own arguments (a wrapper's, then the first one of what it wraps)
        if argument and not argument[0].isdigit() and argument[0] != "(":
            inner = _declaration_parts(argument[:_ARGUMENT_LENGTH], depth + 1)  # its name stands at its front
            part.args[index] = (argument, inner[-1] if inner else None)
    return part


#: How much of a template argument is read for the class it names.
_ARGUMENT_LENGTH = 4096
