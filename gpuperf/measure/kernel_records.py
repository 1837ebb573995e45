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

import hashlib
import math
import re
import shlex
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuperf.measure.kernel_names import SPELLED_LENGTH, SYMBOL_DIGEST_LENGTH
from gpuperf.measure.kernel_names import UNNAMED_KERNEL as UNNAMED_KERNEL
from gpuperf.measure.kernel_names import demangle as demangle
from gpuperf.measure.kernel_names import short_name as short_name
from gpuperf.measure.kernel_names import spelled_name, symbol_digest
#: Kernels the measurement loop launches around the measured calls (timing.py's sources): never part of a call.
FLUSH_KERNEL = "gpuperf_flush"
HOLD_KERNEL = "gpuperf_hold"
MARK_KERNEL = "gpuperf_mark"
SEPARATOR_KERNELS: frozenset[str] = frozenset({FLUSH_KERNEL, HOLD_KERNEL, MARK_KERNEL})

Dim3 = tuple[int, int, int]
SAME_KERNELS = "same kernels"
CODE_DIGEST_LENGTH = 12
_CODE_DIGEST = re.compile(f"[0-9a-f]{{{CODE_DIGEST_LENGTH}}}")
_SYMBOL_DIGEST = re.compile(f"[0-9a-f]{{{SYMBOL_DIGEST_LENGTH}}}")

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


#: Code digest → the configuration its compiler was given (``note_config``): a Triton kernel's launch options.
_CONFIGS: dict[str, str] = {}
#: The longest configuration text kept: options, not source.
CONFIG_LENGTH = 200


def note_config(digest: str, config: str) -> None:
    """Record the configuration the code of ``digest`` was compiled with (``num_warps=4 num_stages=1``), so a
    kernel's identity shows it and a change of code says whether the configuration changed with it."""
    _CONFIGS[digest] = " ".join(config.split())[:CONFIG_LENGTH]


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
    #: A digest of its whole symbol (``kernel_names.symbol_digest``): two kernels that share a short name
    #: (``vectorized_elementwise_kernel<4, AddFunctor…>`` and ``<4, MulFunctor…>``) differ here. Empty where unknown
    #: (an entry recorded before the suite kept it).
    symbol: str = ""
    #: The configuration its code was compiled with, where the launcher says (a Triton autotuner's choice:
    #: ``num_warps=4 num_stages=1``); empty where unknown.
    config: str = ""
    #: Its name with the template arguments, shortened (``kernel_names.spelled_name``): where two symbols share a
    #: short name, the part of it that differs tells a reader which kernel each is. Empty where unknown.
    spelled: str = ""

    @property
    def pattern(self) -> str:
        """A regular expression that finds this kernel in its full demangled name (``ncu --kernel-name-base
        demangled --kernel-name regex:…``): the short name, escaped; a wrapper's (``device_kernel<FlashAttnFwdSm90>``)
        as the wrapper, then what it wraps after any namespaces and guards between them."""
        wrapper, bracket, wrapped = self.name.removesuffix(">").partition("<")
        if bracket and wrapper and wrapped:
            return f"{re.escape(wrapper)}<.*{re.escape(wrapped)}"
        return re.escape(self.name.removesuffix(">"))

    @property
    def launch(self) -> tuple[Dim3, Dim3, Dim3]:
        return self.grid, self.block, self.cluster

    def describe(self) -> str:
        """One line: ``gemv2T_kernel_val grid 64x1x1 block 128x1x1 40 regs 1024 B smem 6.2 µs``, with the
        configuration its launcher compiled it with after the name (``triton_poi_… (num_warps=4 num_stages=1)``)."""
        cluster = f" cluster {_dims(self.cluster)}" if any(self.cluster) else ""
        median = f" {self.median_us:.3g} µs" if self.median_us is not None else ""
        config = f" ({self.config})" if self.config else ""
        return (f"{self.name}{config} grid {_dims(self.grid)} block {_dims(self.block)}{cluster} {self.registers} "
                f"regs {self.shared_memory} B smem{median}")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "grid": list(self.grid), "block": list(self.block)}
        if any(self.cluster):
            data["cluster"] = list(self.cluster)
        data.update(registers=self.registers, shared_memory=self.shared_memory)
        if self.median_us is not None:
            data["median_us"] = float(f"{self.median_us:.4g}")
        if self.code:
            data["code"] = self.code
        if self.symbol:
            data["symbol"] = self.symbol
        if self.config:
            data["config"] = self.config
        if self.spelled:
            data["spelled"] = self.spelled
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
        symbol = data.get("symbol", "")
        if not isinstance(symbol, str) or not _SYMBOL_DIGEST.fullmatch(symbol or "0" * SYMBOL_DIGEST_LENGTH):
            raise ValueError(f"kernel {data['name']!r}: symbol must be {SYMBOL_DIGEST_LENGTH} hex digits, got "
                             f"{symbol!r}")
        config = data.get("config", "")
        if not isinstance(config, str) or len(config) > CONFIG_LENGTH or not config.isprintable():
            raise ValueError(f"kernel {data['name']!r}: config must be one printable line of at most "
                             f"{CONFIG_LENGTH} characters, got {config!r}")
        spelled = data.get("spelled", "")
        if not isinstance(spelled, str) or len(spelled) > SPELLED_LENGTH or not spelled.isprintable():
            raise ValueError(f"kernel {data['name']!r}: spelled must be one printable line of at most "
                             f"{SPELLED_LENGTH} characters, got {spelled!r}")
        return cls(name=data["name"], grid=_dim3(data, "grid", 1), block=_dim3(data, "block", 1),
                   cluster=_dim3(data, "cluster", 0), registers=_count(data, "registers"),
                   shared_memory=_count(data, "shared_memory"),
                   median_us=None if median is None else float(median), code=code, symbol=symbol, config=config,
                   spelled=spelled)


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


# --- names: kernel_names.py (re-exported, the suite's modules take them here) -------------------------------


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
    return tuple((a.symbol, a.grid, a.block, a.cluster) for a in call)


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
        code = launched_code(first.name) or codes.get(first.name, "")
        kernels.append(Kernel(name=first.name, grid=first.grid, block=first.block, cluster=first.cluster,
                              registers=first.registers, shared_memory=first.shared_memory,
                              median_us=statistics.median(durations) * 1e6, code=code,
                              symbol=symbol_digest(first.symbol), config=_CONFIGS.get(code, "") if code else "",
                              spelled=spelled_name(first.symbol)))
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
    edited = [_code_change(before, after) for before, after in zip(recorded, measured)
              if before.code and after.code and before.code != after.code]
    if edited:
        return f"kernel changed: {', '.join(edited)}"
    others = [_symbol_change(before, after) for before, after in zip(recorded, measured)
              if before.symbol and after.symbol and before.symbol != after.symbol]
    if others:
        return f"kernel changed: {', '.join(others)}"
    launches = []
    for before, after in zip(recorded, measured):
        for what, old, new in (("grid", before.grid, after.grid), ("block", before.block, after.block),
                               ("cluster", before.cluster, after.cluster)):
            if old != new:
                launches.append(f"{before.name} {what} {_dims(old)} → {_dims(new)}")
    return SAME_KERNELS + (f"; launch changed: {', '.join(launches)}" if launches else "")


#: How much of each side of a spelled name's difference a change note shows.
DIFFERENCE_LENGTH = 60


def _symbol_change(before: Kernel, after: Kernel) -> str:
    """``name …FillFunctor<float>, array<char*, 1… → …CUDAFunctor_add<float>, array<char*, 3… (same short
    name, another symbol A → B)``: the part of the two spelled names that differs, where both runs recorded them."""
    digests = f"another symbol {before.symbol} → {after.symbol}"
    if before.spelled and after.spelled and before.spelled != after.spelled:
        old, new = spelled_difference(before.spelled, after.spelled)
        return f"{before.name} {old} → {new} (same short name, {digests})"
    return (f"{before.name} symbol {before.symbol} → {after.symbol} (same short name, another symbol: other "
            "template arguments)")


def spelled_difference(old: str, new: str, length: int = DIFFERENCE_LENGTH) -> tuple[str, str]:
    """The parts of two spelled names that differ, widened to whole identifiers and numbers, each at most ``length``
    characters, ``…`` where the common part was left out: ``…gelu_kernel_impl…`` and ``…add_kernel_impl…``."""
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    while prefix > 0 and _word(old[prefix - 1]):
        prefix -= 1
    while suffix > 0 and _word(old[len(old) - suffix]):
        suffix -= 1

    def shown(text: str) -> str:
        middle = text[prefix:len(text) - suffix]
        cut = len(middle) > length
        if cut:
            middle = middle[:length - 1]
        return ("…" if prefix else "") + middle + ("…" if suffix or cut else "")

    return shown(old), shown(new)


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _code_change(before: Kernel, after: Kernel) -> str:
    """``name code A → B (same name, other code: config X → Y; grid …)``: which part of the compiled kernel changed,
    as far as the records tell (the launcher's configuration, the launch), else its source or constants."""
    parts = []
    if before.config and after.config and before.config != after.config:
        parts.append(f"config {before.config} → {after.config}")
    parts += [f"{what} {_dims(old)} → {_dims(new)}" for what, old, new in
              (("grid", before.grid, after.grid), ("block", before.block, after.block)) if old != new]
    if not parts and before.config and before.config == after.config:
        parts.append(f"same config {before.config}: its source or constants changed")
    detail = f": {'; '.join(parts)}" if parts else ""
    return f"{before.name} code {before.code} → {after.code} (same name, other code{detail})"


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
