"""Kernel names: the short name an engineer says for any symbol a tracer reports, and the symbol's own identity.

CUPTI names a kernel by its symbol: mangled for a C++ kernel (Itanium C++ ABI), as it is for an ``extern "C"`` one
(Triton's, Inductor's, cuBLAS's ``nvjet_…``, the suite's own); a profiler's trace holds the same kernels demangled:

    void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, float, …)
    void at::native::vectorized_elementwise_kernel<4, at::native::…::{lambda(float)#1}, …>(int, …)
    void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_…::Params)
    std::enable_if<!false, void>::type internal::gemvx::kernel<float, 7>(float*, int)

The short name is the last scope that names something (not an anonymous namespace, a lambda or ``operator()``),
without its template arguments — except a generic wrapper's (``Kernel2<…>``, ``device_kernel<…>``), which is named
by what it wraps (looking through an architecture guard such as FlashAttention 3's ``enable_sm90_or_later<…>``), or
by its namespace (``gemvx::kernel``).

Both forms are read into scopes (``symbol_parts``) by ``mangled_names`` or ``demangled_names`` in one pass, in time
linear in the text, and only the first ``READ_LENGTH`` characters: a kernel's name stands at the front of its symbol, and no demangler's worst case
(libstdc++'s is exponential in the symbol's length) is met. Any text gets a short name, never an exception; a record
with no name at all is ``UNNAMED_KERNEL``.

Two symbols can share a short name (``vectorized_elementwise_kernel`` is every one of PyTorch's elementwise
operators), so a kernel's identity also holds ``symbol_digest``, a digest of the whole symbol, and ``spelled_name``,
its name with the template arguments and without namespaces, shortened: what tells the two apart to a reader.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import re
from typing import Any

from gpuperf.measure.demangled_names import read_declaration
from gpuperf.measure.mangled_names import read_mangled
from gpuperf.measure.symbol_parts import Part, rendered

#: The short name of a kernel record that carries no name at all (a tracer that lost it): stable, never empty.
UNNAMED_KERNEL = "<unnamed kernel>"
#: Length of ``symbol_digest`` (hex digits), as the suite's code digests.
SYMBOL_DIGEST_LENGTH = 12
#: How much of a symbol is read for its name: almost twice the longest symbol of the libraries' 4,581 kernels
#: (2,221 characters, tests/data/kernel-symbols.tsv.gz); the traces' longest names (to 5,160 characters,
#: tests/data/kernel-names-traces.tsv.gz) hold their name and what a wrapper wraps at the front. A hostile megabyte
#: costs what 4 KiB does.
READ_LENGTH = 4096
#: The longest ``spelled_name``: enough for the template arguments that tell two kernels apart.
SPELLED_LENGTH = 240
#: The longest short name: the longest ``extern "C"`` kernel name in the public traces of the names' corpus
#: (tests/data/kernel-names-traces.tsv.gz, a 2,004-character AMD Tensile GEMM) fits; a hostile megabyte is cut.
SHORT_LENGTH = 2048

#: The longest short name of a mangled symbol that could not be read (it is shown as it is, cut).
UNREAD_LENGTH = 120
#: Kernel names that say nothing alone: CUTLASS's ``Kernel2<Operator>`` and CK Tile's ``kentry<2, Kernel>`` are
#: named by the first class they wrap, cuBLAS's ``gemvx::kernel<float, …>`` by its namespace.
_GENERIC_WRAPPERS = frozenset({"Kernel", "Kernel2", "kernel", "device_kernel", "kentry"})
#: A wrapper's argument that only guards the architecture (``enable_sm90_or_later<FlashAttnFwdSm90<…>>``,
#: CUTLASS's ``enable_3x_kernel_for_sm9x<GemmUniversal<…>>``): named by what it guards.
_GUARD = re.compile(r"^enable_\w*sm\d")
#: What a wrapper's argument may be without naming the wrapped kernel: a number, a scalar or CUDA's vector types.
_BUILTIN_TYPE = re.compile(r"^(?:unsigned |signed )?(?:bool|char|short|int|long|long long|float|double|__half|half|"
                           r"__nv_bfloat16|(?:u?(?:char|short|int|long|longlong)|float|double|half|__half|"
                           r"__nv_bfloat16)[1-4]|Half|BFloat16|cuComplex|cuDoubleComplex|complex|[0-9(-].*)$")
#: A class that names an implementation's helper, not the kernel (CUTLASS's
#: ``DefaultGemmWithVisitor<…>::SelectBase``): named by the class it belongs to.
_MEMBER_HELPERS = frozenset({"SelectBase", "type"})
#: Scopes that name no function of their own: go one scope up for the name.
_ANONYMOUS = re.compile(r"^(?:\(anonymous namespace\)|\{lambda\(.*\)#\d+\}|\{unnamed type#\d+\}|operator ?\(\)|"
                        r"\{closure#?\d*\}|\{lambda#\d+\}|\[lambda\(.*\) \(instance \d+\)\])$", re.DOTALL)
#: A ``static __global__`` kernel of a relocatable-device-code build: ``__nv_static_<n>__<tu>_<hash>__Z…``, the
#: ``<n>`` characters after ``__nv_static_<n>_`` naming its translation unit.
_NV_STATIC = re.compile(r"__nv_static_(\d{1,4})_")


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


def demangle(symbol: str) -> str:
    """The C++ name of a mangled symbol (libstdc++'s demangler), for tools and tests on known symbols: its time is
    exponential in the worst case, so the suite's own naming never calls it (``short_name`` reads the mangling)."""
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


# --- a name, from the scopes either form was read into ------------------------------------------------------


def _named(parts: list[Part]) -> list[Part]:
    return [part for part in parts if part.text and not _ANONYMOUS.match(part.text)]


def _name_of(parts: list[Part]) -> str:
    """The short name of a kernel whose qualified name is ``parts``."""
    named = _named(parts)
    if not named:
        return ""
    last = named[-1]
    if last.text not in _GENERIC_WRAPPERS:
        return last.text
    classes = [argument for argument in last.args[:4] if argument[1] is not None and not _plain(argument[1].text)]
    wrapped = classes[0] if classes else last.args[0] if last.args else ("", None)
    for _ in range(8):  # through the architecture guards
        text, part = wrapped
        if part is None or not _GUARD.match(part.text) or not part.args:
            break
        wrapped = part.args[0]
    text, part = wrapped
    first = text if part is None else part.outer if part.text in _MEMBER_HELPERS and part.outer else part.text
    if first and not _plain(first):
        return f"{last.text}<{first}>"
    return f"{named[-2].text}::{last.text}" if len(named) > 1 else last.text


def _plain(name: str) -> bool:
    """Whether a template argument names no kernel: a number, a scalar or vector type, an anonymous scope."""
    return bool(_BUILTIN_TYPE.match(name) or _ANONYMOUS.match(name))


@functools.lru_cache(maxsize=4096)
def short_name(symbol: str) -> str:
    """A kernel's name as an engineer says it: without return type, parameters, namespaces and template arguments,
    except the first one of a generic wrapper (``cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>`` →
    ``Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>``). Never empty (``UNNAMED_KERNEL``), never an exception,
    in time linear in the first ``READ_LENGTH`` characters."""
    parts, rest = _read(symbol)
    name = _name_of(parts) if parts else ""
    if not name:
        name = " ".join(rest.split())
        if name.startswith("_Z") and len(name) > UNREAD_LENGTH:  # a mangling no reader could read: its start
            name = name[:UNREAD_LENGTH - 1] + "…"
    if not name or not name.isprintable():
        name = "".join(char if char.isprintable() else "?" for char in name).strip()
    if len(name) > SHORT_LENGTH:
        name = name[:SHORT_LENGTH - 1] + "…"
    return name or UNNAMED_KERNEL


@functools.lru_cache(maxsize=4096)
def spelled_name(symbol: str) -> str:
    """The kernel's name with its template arguments and without namespaces or parameters, at most
    ``SPELLED_LENGTH`` characters: ``vectorized_elementwise_kernel<4, FillFunctor<float>, array<char*, 1>>``. What a
    reader tells two kernels of one short name apart by; empty where the symbol holds nothing more than that name."""
    parts, _ = _read(symbol)
    named = _named(parts)
    if not named:
        return ""
    start = parts.index(named[-1])
    if not any(part.args for part in parts[start:]):
        return ""
    text = _NAMESPACE.sub("", rendered(parts[start:]))
    text = "".join(char if char.isprintable() else "?" for char in text)
    if text == short_name(symbol):
        return ""
    return text if len(text) <= SPELLED_LENGTH else text[:SPELLED_LENGTH - 1] + "…"


#: A namespace or class qualifier inside a spelled name: ``at::native::``, ``(anonymous namespace)::``.
_NAMESPACE = re.compile(r"(?:\b\w+|\(anonymous namespace\))::(?!\{|operator)")

def clear_caches() -> None:
    """Forget the names read so far (a session reads each kernel's symbol once per call; a timing reads it afresh)."""
    short_name.cache_clear()
    spelled_name.cache_clear()
    _read.cache_clear()


@functools.lru_cache(maxsize=1024)
def _read(symbol: str) -> tuple[list[Part], str]:
    """The qualified name of ``symbol`` as parts (empty when there is none to read) and the text it was read from."""
    if not isinstance(symbol, str):
        symbol = str(symbol)
    text = symbol[:READ_LENGTH].strip()
    static = _NV_STATIC.match(text)
    if static:  # a relocatable-device-code build's file-static kernel: the symbol after its translation unit
        rest = text[static.end() + int(static.group(1)):]
        mangled = text.find("__Z", static.end())
        if rest.startswith("_") and len(rest) > 1:
            text = rest[1:]
        elif mangled >= 0:  # a translation unit's length that does not hold: the mangled symbol after it
            text = text[mangled + 1:]
    if text.startswith("_Z"):
        parts = read_mangled(text)
        if _named(parts):
            return parts, text
        return [], text
    return read_declaration(text), text
