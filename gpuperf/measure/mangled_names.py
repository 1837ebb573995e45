"""The name of a mangled symbol (Itanium C++ ABI, ``_ZN2at6native29vectorized_elementwise_kernelILi4E…``) read into
the scopes of its qualified name: nested and local names, unqualified names (source names, lambdas and unnamed
types, constructors, destructors, operators, ABI tags), on the types of ``mangled_types``.

The reader takes one pass from the left, each step consuming input and nesting bounded, so the time is linear in
the symbol; a symbol cut short or outside the grammar keeps the scopes read before that point. The parameter types
of the kernel itself are left unread.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from gpuperf.measure.mangled_types import OPERATORS, MangledReader, Unreadable
from gpuperf.measure.symbol_parts import RENDERED_LENGTH, Part


def read_mangled(text: str) -> list[Part]:
    """The scopes of the name of a mangled symbol ``_Z…`` (as many as could be read)."""
    return _Mangled(text).read()


class _Mangled(MangledReader):
    """A reader of a mangled symbol's name: recursive descent over the grammar, each step consuming input, nesting
    bounded, so the time is linear in the symbol."""

    # -- the grammar

    def read(self) -> list[Part]:
        try:
            self.take("_")
            self.take("Z")
            if self.peek() in ("T", "G"):  # special names (vtables, guard variables): no kernel
                raise Unreadable
            self.name(self.root)
        except (Unreadable, RecursionError, ValueError, IndexError):  # what was read so far stands
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
                    raise Unreadable
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
            raise Unreadable
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
        if code not in OPERATORS:
            raise Unreadable
        self.at += 2
        return f"operator{_OPERATOR_TEXT.get(code, code)}"

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


_OPERATOR_TEXT = {"nw": " new", "na": " new[]", "dl": " delete", "da": " delete[]", "ps": "+", "ng": "-",
                  "ad": "&", "de": "*", "co": "~", "pl": "+", "mi": "-", "ml": "*", "dv": "/", "rm": "%",
                  "an": "&", "or": "|", "eo": "^", "aS": "=", "pL": "+=", "mI": "-=", "mL": "*=", "dV": "/=",
                  "rM": "%=", "aN": "&=", "oR": "|=", "eO": "^=", "ls": "<<", "rs": ">>", "lS": "<<=", "rS": ">>=",
                  "eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "ss": "<=>", "nt": "!",
                  "aa": "&&", "oo": "||", "pp": "++", "mm": "--", "cm": ",", "pm": "->*", "pt": "->", "cl": "()",
                  "ix": "[]", "qu": "?"}
