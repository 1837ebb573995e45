"""A symbol read into the scopes of its qualified name: the ``Part`` each scope is, and its rendering, shared by the
readers of the two forms a tracer reports, mangled (``mangled_names``, the Itanium C++ ABI) and demangled
(``demangled_names``, as libstdc++, kineto, nsys or ncu write it).

Both readers take one pass from the left, each step consuming input and nesting bounded, so the time is linear in
the text they are given (``kernel_names`` gives them its first 4 KiB); a text cut short or outside the grammar keeps
the scopes read before that point. A rendering is at most ``RENDERED_LENGTH`` characters, whatever the symbol holds.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

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
