"""Kernel names: the short name an engineer says for any symbol a tracer reports, and the symbol's own identity.

CUPTI names a kernel by its symbol: mangled for a C++ kernel, as it is for an ``extern "C"`` one (Triton's,
Inductor's, cuBLAS's ``nvjet_…``, the suite's own). Demangled, a C++ kernel's name is a declaration:

    void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, float, …)
    void at::native::vectorized_elementwise_kernel<4, at::native::…::{lambda(float)#1}, …>(int, …)
    void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_…::Params)
    std::enable_if<!false, void>::type internal::gemvx::kernel<float, 7>(float*, int)

Parentheses and spaces occur inside the name itself (``(anonymous namespace)``, ``{lambda(float)#1}``, template
arguments that are function types), so the name is read by its *outermost* brackets: the parameter list is the
top-level ``(…)`` group that closes the declaration, the return type is what stands before the last top-level space,
and the scopes are split at top-level ``::``. The short name is the last scope that names something (not an
anonymous namespace, a lambda or ``operator()``), without its template arguments — except a generic wrapper's
(``Kernel2<…>``, ``gemvx::kernel``), which is named by what it wraps or by its namespace.

A short name is never empty: a record with no name at all is ``UNNAMED_KERNEL``. Two symbols can share a short name
(``vectorized_elementwise_kernel`` is every one of PyTorch's elementwise operators), so a kernel's identity also holds
``symbol_digest``, a digest of the whole symbol: the same short name with another digest is another kernel.

Pure: libstdc++'s demangler through ctypes, nothing else. PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import re
from typing import Any

#: The short name of a kernel record that carries no name at all (a tracer that lost it): stable, never empty.
UNNAMED_KERNEL = "<unnamed kernel>"
#: Length of ``symbol_digest`` (hex digits), as the suite's code digests.
SYMBOL_DIGEST_LENGTH = 12

#: Kernel names that say nothing alone: CUTLASS's ``Kernel2<Operator>`` is named by what it wraps, cuBLAS's
#: ``gemvx::kernel<float, …>`` by its namespace.
_GENERIC_WRAPPERS = frozenset({"Kernel", "Kernel2", "kernel", "device_kernel"})
_BUILTIN_TYPE = re.compile(r"^(?:unsigned |signed )?(?:bool|char|short|int|long|float|double|__half|half|"
                           r"__nv_bfloat16|[0-9].*)$")
_OPENING = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSING = {closing: opening for opening, closing in _OPENING.items()}
#: Scopes that name no function of their own: go one scope up for the name.
_ANONYMOUS = re.compile(r"^(?:\(anonymous namespace\)|\{lambda\(.*\)#\d+\}|\{unnamed type#\d+\}|operator\(\)|"
                        r"\{closure#?\d*\})$")
#: What a demangler appends after the parameter list: cv-qualifiers, ref-qualifiers, clone suffixes.
_TRAILER = re.compile(r"(?:\s*(?:const|volatile|&&|&|noexcept|\[clone [^\]]*\]))+\s*$")


@functools.cache
def _cxa_demangle() -> Any:
    name = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        function = ctypes.CDLL(name).__cxa_demangle
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return function


@functools.cache
def demangle(symbol: str) -> str:
    """The C++ name of a mangled symbol (libstdc++'s demangler); an ``extern "C"`` name comes back as it is."""
    function = _cxa_demangle()
    if function is None or not symbol.startswith("_Z") or "\0" in symbol:
        return symbol
    status = ctypes.c_int()
    pointer = function(symbol.encode(errors="surrogateescape"), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return symbol
    try:
        return ctypes.string_at(pointer).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(pointer))


def symbol_digest(symbol: str) -> str:
    """The identity of a whole symbol (its template arguments and parameters included), shortened: two kernels that
    share a short name and not their symbol differ here."""
    return hashlib.sha256(symbol.encode(errors="surrogatepass")).hexdigest()[:SYMBOL_DIGEST_LENGTH]


def _depths(text: str) -> list[int]:
    """The bracket depth before each character of ``text`` (``<``, ``(``, ``{``, ``[``), never below zero; -1 for
    the characters of an operator's name (``operator<``, ``operator<<``, ``operator->``…), which are no brackets."""
    depths, depth, index = [], 0, 0
    while index < len(text):
        operator = _operator_at(text, index)
        if operator:
            depths += [-1] * len(operator)
            index += len(operator)
            continue
        char = text[index]
        depths.append(depth)
        if char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth = max(0, depth - 1)
        index += 1
    return depths


_OPERATOR = re.compile(r"operator(?:<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|<|>|\(\)|\[\])")


def _operator_at(text: str, index: int) -> str:
    """The operator name that starts at ``index`` (its brackets are part of a name, not brackets), or ``""``."""
    if text.startswith("operator", index) and (index == 0 or not (text[index - 1].isalnum() or text[index - 1] == "_")):
        match = _OPERATOR.match(text, index)
        if match and match.group() != "operator()":  # ``operator()`` is balanced: read as brackets, it nests right
            return match.group()
    return ""


def _strip_parameters(name: str) -> str:
    """``name`` without the parameter list that closes a function's declaration (the last top-level ``(…)``, with
    what a demangler puts after it), when there is one."""
    trailer = _TRAILER.search(name)
    core = name[:trailer.start()] if trailer else name
    if not core.endswith(")"):
        return name
    depths = _depths(core)
    for index in range(len(core) - 1, -1, -1):
        if core[index] == "(" and depths[index] == 0:
            return core[:index].rstrip() if index > 0 else name
    return name


def _without_return_type(head: str) -> str:
    """``std::enable_if<…, void>::type internal::gemvx::kernel<…>`` → ``internal::gemvx::kernel<…>``: what follows
    the last space outside any brackets."""
    depths = _depths(head)
    cut = 0
    for index, char in enumerate(head):
        if char == " " and depths[index] == 0:
            cut = index + 1
    return head[cut:] or head


def _split_scopes(qualified: str) -> list[str]:
    """``a::b<c::d>::e`` → ``["a", "b<c::d>", "e"]``: ``::`` outside brackets only."""
    depths = _depths(qualified)
    scopes, start, index = [], 0, 0
    while index < len(qualified):
        if qualified.startswith("::", index) and depths[index] == 0:
            scopes.append(qualified[start:index].strip())
            index += 2
            start = index
        else:
            index += 1
    scopes.append(qualified[start:].strip())
    return scopes


def _split_template(scope: str) -> tuple[str, str]:
    """``name<args>`` → ``("name", "args")``; a scope with no top-level template → ``(scope, "")``."""
    depths = _depths(scope)
    for index, char in enumerate(scope):
        if char == "<" and depths[index] == 0:
            end = len(scope) - 1 if scope.endswith(">") else len(scope)
            return scope[:index].strip(), scope[index + 1:end]
    return scope, ""


def _first_argument(template: str) -> str:
    depths = _depths(template)
    for index, char in enumerate(template):
        if char == "," and depths[index] == 0:
            return template[:index]
    return template


@functools.cache
def short_name(symbol: str) -> str:
    """A kernel's name as an engineer says it: demangled, without return type, parameters, namespaces and template
    arguments, except the first one of a generic wrapper (``cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_
    align1>`` → ``Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>``). Never empty (``UNNAMED_KERNEL``)."""
    if not symbol.strip():
        return UNNAMED_KERNEL
    name = demangle(symbol)
    if name == symbol and symbol.startswith("_Z"):
        return _mangled_short_name(symbol) or symbol  # the demangler gave up (CUTLASS's deepest templates)
    scopes = _split_scopes(_without_return_type(_strip_parameters(name.strip())))
    named = [scope for scope in scopes if scope and not _ANONYMOUS.match(_split_template(scope)[0])]
    if not named:
        return name.strip() or UNNAMED_KERNEL
    base, template = _split_template(named[-1])
    if not base:
        return named[-1]
    if base not in _GENERIC_WRAPPERS:
        return base
    first = _split_template(_split_scopes(_first_argument(template))[-1])[0].strip() if template else ""
    return _wrapped(base, first, _split_template(named[-2])[0] if len(named) > 1 else "")


def _wrapped(base: str, first: str, outer: str) -> str:
    """A generic wrapper's name: by what it wraps (its first template argument), else by its namespace."""
    if first and not _BUILTIN_TYPE.match(first):
        return f"{base}<{first}>"
    return f"{outer}::{base}" if outer else base


_SOURCE_NAME = re.compile(r"(\d+)")
_SUBSTITUTION = re.compile(r"S[0-9A-Z]*_|St|Sa|Sb|Ss|Si|So|Sd")


def _source_names(symbol: str, index: int) -> tuple[list[str], int]:
    """The ``<length><identifier>`` names of a mangled nested name from ``index`` on (substitutions skipped), and
    where they end."""
    names: list[str] = []
    while index < len(symbol):
        substitution = _SUBSTITUTION.match(symbol, index)
        if substitution:
            index = substitution.end()
            continue
        length = _SOURCE_NAME.match(symbol, index)
        if not length:
            break
        start = length.end()
        names.append(symbol[start:start + int(length.group(1))])
        index = start + int(length.group(1))
    return names, index


def _mangled_short_name(symbol: str) -> str:
    """The short name read from a mangled symbol itself, where the demangler gave up on it: the nested name's
    last part (``_ZN7cutlass6KernelINS_4gemm6kernel29SparseGemm…`` → ``Kernel<SparseGemm…>``), or ``""``."""
    index = 3 if symbol.startswith("_ZN") else 2
    names, index = _source_names(symbol, index)
    if not names:
        return ""
    base = names[-1]
    if base not in _GENERIC_WRAPPERS:
        return base
    first = ""
    if symbol.startswith("I", index):
        index += 2 if symbol.startswith("IN", index) else 1
        wrapped, _ = _source_names(symbol, index)
        first = wrapped[-1] if wrapped else ""
    return _wrapped(base, first, names[-2] if len(names) > 1 else "")
