"""The name of a demangled declaration (``void at::native::vectorized_elementwise_kernel<4, …>(int, …)``, as libstdc++,
kineto, nsys or ncu write it) read into the scopes of its qualified name.

The reader takes one pass from the left, brackets matched by a stack, so the time is linear in the text it is given;
a text cut short keeps the scopes read before that point. The parameter types of the kernel itself are left unread.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re

from gpuperf.measure.symbol_parts import Part


def read_declaration(text: str) -> list[Part]:
    """The scopes of the name of a demangled declaration (as many as could be read)."""
    return _declaration_parts(text)


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
        if char.isalnum() or char == "_":  # an operator's name or an identifier, read as one step
            index, operator = _word_end(text, index)
            blank = False if operator else blank and bool(stack)
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
            argument_start = _in_group(text, index, stack, open_groups, arguments, argument_start)
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


def _word_end(text: str, index: int) -> tuple[int, bool]:
    """The end of the operator's name or the identifier at ``index``, and whether it was an operator's name (read
    whole, so that the brackets of ``operator<<`` or ``operator()`` open no group)."""
    if text.startswith("operator", index) and (
            index == 0 or not (text[index - 1].isalnum() or text[index - 1] == "_")):
        match = _OPERATOR.match(text, index)
        if match:
            return match.end(), True
    match = _IDENTIFIER.match(text, index)
    return (match.end() if match else index + 1), False


def _in_group(text: str, index: int, stack: list[str], open_groups: dict[str, int], arguments: list[str],
              argument_start: int) -> int:
    """One character inside brackets: the closer the stack awaits pops its group, a closer of an outer group closes
    every group across to it (an unclosed ``<``), a comma of the outermost template arguments ends one; an argument
    ended goes to ``arguments``. Returns where the current argument starts."""
    char = text[index]
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
        return index + 1
    return argument_start


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
