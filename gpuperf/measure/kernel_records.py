"""Kernel records: which kernels one call launched, and how long the call ran on the device. Pure: no CUPTI,
no CuPy (``cupti_trace.py`` turns CUPTI's activity records into ``KernelActivity``; this module reads them).

A measured call is bracketed by the suite's own *separator* kernels: the L2 flush before each cold call, the
hold kernel before a batch, an empty marker between hot calls. Sorted by start time, the records between two
separators are one call's kernels, whatever stream they ran on (a multi-stream call joins its side streams
before the next separator is enqueued). The call's device time is its *span*: first kernel start to last
kernel end, so a split-K GEMM and its reduction, four streams of batches or a loop of GEMMs count as the time
the device was busy with the call, not a sum of kernel times and not the host's launch gaps around it.

A call's kernels, in order, with grid, block, cluster, registers and shared memory, are its *identity*
(``Kernel``): a baseline entry stores it, and a regression note compares the two (``describe_change``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import math
import re
import shlex
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Kernels the measurement loop launches around the measured calls (timing.py's sources): never part of a call.
FLUSH_KERNEL = "gpuperf_flush"
HOLD_KERNEL = "gpuperf_hold"
MARK_KERNEL = "gpuperf_mark"
SEPARATOR_KERNELS: frozenset[str] = frozenset({FLUSH_KERNEL, HOLD_KERNEL, MARK_KERNEL})

Dim3 = tuple[int, int, int]
SAME_KERNELS = "same kernels"
CODE_DIGEST_LENGTH = 12
_CODE_DIGEST = re.compile(f"[0-9a-f]{{{CODE_DIGEST_LENGTH}}}")

#: Kernel name → digest of the code last launched under that name (``note_code``). A launcher of the suite's own
#: kernels notes it at every launch, so the digest read after a measurement is the one of the build it ran.
_LAUNCHED_CODE: dict[str, str] = {}


def code_digest(*parts: str) -> str:
    """The digest that identifies compiled code: SHA-256 of its parts (source, compile options), shortened."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:CODE_DIGEST_LENGTH]


def note_code(name: str, digest: str) -> None:
    """Record that the kernel called ``name`` (as its records name it) now runs the code of ``digest``."""
    _LAUNCHED_CODE[name] = digest


def launched_code(name: str) -> str:
    return _LAUNCHED_CODE.get(name, "")


@dataclass(frozen=True)
class KernelActivity:
    """One kernel execution as a tracer saw it (CUPTI's ``CONCURRENT_KERNEL`` record, the fields kept)."""

    symbol: str  # the name as the driver knows it: mangled for C++ kernels
    start_ns: int
    end_ns: int
    grid: Dim3 = (1, 1, 1)
    block: Dim3 = (1, 1, 1)
    cluster: Dim3 = (0, 0, 0)  # (0, 0, 0): launched without a cluster
    registers: int = 0  # per thread
    shared_memory: int = 0  # static + dynamic, bytes per block
    stream: int = 0

    @property
    def name(self) -> str:
        return short_name(self.symbol)

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass(frozen=True)
class Kernel:
    """One kernel of a call, as a baseline entry and a results file record it."""

    name: str  # short demangled name (``short_name``)
    grid: Dim3
    block: Dim3
    cluster: Dim3 = (0, 0, 0)
    registers: int = 0
    shared_memory: int = 0
    median_us: float | None = None  # its own median duration over the measured calls
    #: A digest of the code the suite compiled for it (source and defines: ``note_code``); empty for a library's
    #: kernel. Part of the identity: an edited kernel that keeps its name is another kernel.
    code: str = ""

    @property
    def pattern(self) -> str:
        """A regular expression that finds this kernel in its full demangled name (``ncu --kernel-name-base
        demangled --kernel-name regex:…``): the short name without a closing ``>``, escaped."""
        return re.escape(self.name.removesuffix(">"))

    @property
    def launch(self) -> tuple[Dim3, Dim3, Dim3]:
        return self.grid, self.block, self.cluster

    def describe(self) -> str:
        """One line: ``gemv2T_kernel_val grid 64x1x1 block 128x1x1 40 regs 1024 B smem 6.2 µs``."""
        cluster = f" cluster {_dims(self.cluster)}" if any(self.cluster) else ""
        median = f" {self.median_us:.3g} µs" if self.median_us is not None else ""
        return (f"{self.name} grid {_dims(self.grid)} block {_dims(self.block)}{cluster} {self.registers} regs "
                f"{self.shared_memory} B smem{median}")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "grid": list(self.grid), "block": list(self.block)}
        if any(self.cluster):
            data["cluster"] = list(self.cluster)
        data.update(registers=self.registers, shared_memory=self.shared_memory)
        if self.median_us is not None:
            data["median_us"] = float(f"{self.median_us:.4g}")
        if self.code:
            data["code"] = self.code
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Kernel:
        """Raises ``ValueError`` naming the field when ``data`` is not a kernel as ``to_dict`` writes one."""
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str) or not data["name"]:
            raise ValueError(f"a kernel needs a non-empty name, got {data!r}")
        median = data.get("median_us")
        if median is not None and (not isinstance(median, (int, float)) or isinstance(median, bool) or median < 0
                                   or not _finite(median)):
            raise ValueError(f"kernel {data['name']!r}: median_us must be a non-negative number, got {median!r}")
        code = data.get("code", "")
        if not isinstance(code, str) or not _CODE_DIGEST.fullmatch(code or "0" * CODE_DIGEST_LENGTH):
            raise ValueError(f"kernel {data['name']!r}: code must be {CODE_DIGEST_LENGTH} hex digits, got {code!r}")
        return cls(name=data["name"], grid=_dim3(data, "grid", 1), block=_dim3(data, "block", 1),
                   cluster=_dim3(data, "cluster", 0), registers=_count(data, "registers"),
                   shared_memory=_count(data, "shared_memory"),
                   median_us=None if median is None else float(median), code=code)


def _finite(number: float) -> bool:
    """Whether ``number`` is a finite float, or a whole number that becomes one."""
    try:
        return math.isfinite(number)
    except OverflowError:  # a whole number too large for a float
        return False


def _dim3(data: Mapping[str, Any], key: str, default: int) -> Dim3:
    value = data.get(key, [default, default, default])
    if type(value) is list and len(value) == 3 and all([type(v) is int and v >= 0 for v in value]):
        return value[0], value[1], value[2]
    if (not isinstance(value, (list, tuple)) or len(value) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        raise ValueError(f"kernel {data.get('name')!r}: {key} must be three non-negative integers, got {value!r}")
    return int(value[0]), int(value[1]), int(value[2])


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"kernel {data.get('name')!r}: {key} must be a non-negative integer, got {value!r}")
    return value


# --- names ------------------------------------------------------------------------------------------------


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
    if function is None or not symbol.startswith("_Z"):
        return symbol
    status = ctypes.c_int()
    pointer = function(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return symbol
    try:
        return ctypes.string_at(pointer).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(pointer))


#: Kernel names that say nothing alone: CUTLASS's ``Kernel2<Operator>`` is named by what it wraps, cuBLAS's
#: ``gemvx::kernel<float, …>`` by its namespace.
_GENERIC_WRAPPERS = frozenset({"Kernel", "Kernel2", "kernel", "device_kernel"})
_BUILTIN_TYPE = re.compile(r"^(?:unsigned |signed )?(?:bool|char|short|int|long|float|double|__half|half|"
                           r"__nv_bfloat16|[0-9].*)$")


def _split_top(text: str, opening: str, closing: str) -> tuple[str, str]:
    """``text`` up to its first top-level ``opening`` bracket, and what that bracket holds."""
    depth = 0
    for index, char in enumerate(text):
        if char == opening and depth == 0:
            end, depth_inner = index + 1, 1
            while end < len(text) and depth_inner:
                depth_inner += {opening: 1, closing: -1}.get(text[end], 0)
                end += 1
            return text[:index], text[index + 1:end - 1]
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(char, 0)
    return text, ""


@functools.cache
def short_name(symbol: str) -> str:
    """A kernel's name as an engineer says it: demangled, without return type, parameters or namespaces, and
    without template arguments, except the first one of a generic wrapper (``cutlass::Kernel2<cutlass_80_simt_
    sgemm_128x32_8x5_nn_align1>`` → ``Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>``)."""
    name = demangle(symbol)
    if name == symbol and symbol.startswith("_Z"):
        return symbol  # not demangled: better whole than cut at a guess
    head, _ = _split_top(name, "(", ")")
    qualified, template = _split_top(_without_return_type(head), "<", ">")
    scopes = [scope.strip() for scope in qualified.split("::")]
    base = scopes[-1]
    if base not in _GENERIC_WRAPPERS:
        return base
    first = _first_argument(template).split("::")[-1].strip() if template else ""
    if first and not _BUILTIN_TYPE.match(first):
        return f"{base}<{first}>"
    return "::".join(scopes[-2:])


def _without_return_type(head: str) -> str:
    """``std::enable_if<…, void>::type internal::gemvx::kernel<…>`` → ``internal::gemvx::kernel<…>``: what
    follows the last space outside any brackets."""
    depth, cut = 0, 0
    for index, char in enumerate(head):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(char, 0)
        if char == " " and depth == 0:
            cut = index + 1
    return head[cut:]


def _first_argument(template: str) -> str:
    depth = 0
    for index, char in enumerate(template):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            return template[:index]
    return template


# --- calls -------------------------------------------------------------------------------------------------


def split_calls(activities: Sequence[KernelActivity]) -> list[list[KernelActivity]]:
    """The measured calls' kernels: records sorted by start, cut at every separator kernel (``extern "C"``, so
    its symbol is its name); empty groups (a hold directly followed by a flush) are dropped."""
    calls: list[list[KernelActivity]] = []
    current: list[KernelActivity] = []
    for activity in sorted(activities, key=lambda a: (a.start_ns, a.end_ns)):
        if activity.symbol in SEPARATOR_KERNELS:
            if current:
                calls.append(current)
            current = []
        else:
            current.append(activity)
    if current:
        calls.append(current)
    return calls


def span_s(call: Sequence[KernelActivity]) -> float:
    """First kernel start to last kernel end, in seconds."""
    return (max(a.end_ns for a in call) - min(a.start_ns for a in call)) / 1e9


def _signature(call: Sequence[KernelActivity]) -> tuple[tuple[str, Dim3, Dim3, Dim3], ...]:
    return tuple((a.name, a.grid, a.block, a.cluster) for a in call)


def typical_call(calls: Sequence[Sequence[KernelActivity]]) -> list[Sequence[KernelActivity]]:
    """The calls that launched the most common kernel sequence (a call's identity is what it usually runs)."""
    if not calls:
        return []
    counts = Counter(_signature(call) for call in calls)
    common = max(counts, key=lambda sig: counts[sig])
    return [call for call in calls if _signature(call) == common]


def call_kernels(calls: Sequence[Sequence[KernelActivity]],
                 codes: Mapping[str, str] | None = None) -> tuple[Kernel, ...]:
    """The identity of a call: its most common kernel sequence, each kernel with its median duration and the
    digest of its code: the one the suite's own launcher noted (``note_code``), else the one ``codes`` gives by
    name (what the call's launcher said it compiled: ``launchers.py``)."""
    codes = codes or {}
    typical = typical_call(calls)
    if not typical:
        return ()
    kernels = []
    for position, first in enumerate(typical[0]):
        durations = [call[position].duration_s for call in typical]
        kernels.append(Kernel(name=first.name, grid=first.grid, block=first.block, cluster=first.cluster,
                              registers=first.registers, shared_memory=first.shared_memory,
                              median_us=statistics.median(durations) * 1e6,
                              code=launched_code(first.name) or codes.get(first.name, "")))
    return tuple(kernels)


# --- explaining a change ---------------------------------------------------------------------------------


def _names(kernels: Sequence[Kernel]) -> str:
    return " + ".join(kernel.name for kernel in kernels)


def _dims(dim: Dim3) -> str:
    return "x".join(str(v) for v in dim)


def describe_change(recorded: Sequence[Kernel], measured: Sequence[Kernel]) -> str:
    """``same kernels``, ``kernel changed: A → B`` or ``same kernels; grid changed: …``; empty when either side
    is unknown (an entry recorded without kernel records, a run without CUPTI)."""
    if not recorded or not measured:
        return ""
    if [k.name for k in recorded] != [k.name for k in measured]:
        return f"kernel changed: {_names(recorded)} → {_names(measured)}"
    edited = [f"{before.name} code {before.code} → {after.code}" for before, after in zip(recorded, measured)
              if before.code and after.code and before.code != after.code]
    if edited:
        return f"kernel changed: {', '.join(edited)} (same name, other code)"
    launches = []
    for before, after in zip(recorded, measured):
        for what, old, new in (("grid", before.grid, after.grid), ("block", before.block, after.block),
                               ("cluster", before.cluster, after.cluster)):
            if old != new:
                launches.append(f"{before.name} {what} {_dims(old)} → {_dims(new)}")
    return SAME_KERNELS + (f"; launch changed: {', '.join(launches)}" if launches else "")


def kernel_change(recorded: Sequence[Kernel], measured: Sequence[Kernel]) -> str:
    """``describe_change`` when something changed; empty when the kernels match or either side is unknown."""
    change = describe_change(recorded, measured)
    return "" if change == SAME_KERNELS else change


def dominant(kernels: Sequence[Kernel]) -> Kernel | None:
    """The kernel that takes most of the call (the first when durations are unknown)."""
    if not kernels:
        return None
    return max(kernels, key=lambda k: k.median_us or 0.0)


def ncu_command(kernels: Sequence[Kernel], nodeid: str, launch_skip: int = 1) -> str:
    """A ready Nsight Compute command that profiles one launch of the call's dominant kernel, run alone:
    ``launch_skip`` passes the first launch (module load, first-call effects)."""
    kernel = dominant(kernels)
    if kernel is None:
        return ""
    return (f"ncu --kernel-name-base demangled --kernel-name {shlex.quote('regex:' + kernel.pattern)} "
            f"--launch-skip {launch_skip} --launch-count 1 --set full python -m pytest {shlex.quote(nodeid)} "
            "-p no:cacheprovider")
