"""What a user's launcher says it compiled, so an edited kernel that keeps its name is a kernel change.

The suite's own kernels note their code digest at every launch (``kernel_records.note_code``). A user's kernels
are compiled by their launchers, and two of them say what they compiled:

- **Triton**: every compiled kernel has a hash of its source, specialisation, options and compiler version.
  ``watch_triton`` adds a hook to Triton's kernel loading (``triton.knobs.runtime.kernel_load_end_hook``, Triton
  3.4 and later) that keeps each loaded kernel's function handle, name and hash; during the measured callable's
  first call a launch hook reads which handles it launched, so an autotuned kernel is known by the configuration
  it runs, not the last one tried. Kernels loaded before the hook (by code run at import time) stay without a
  digest, as do kernels of a Triton without these hooks.
- **CuPy**: a ``RawKernel`` or ``RawModule`` keeps its source, options and backend. The objects the callable
  reaches (its closure, defaults, the globals its code names, a bound method's instance, a ``functools.partial``'s
  parts, a few levels deep) are searched for them; each kernel defined in such source gets the digest of source,
  options and backend.

``identify(fn, operands)`` is the context the measuring loop wraps the callable's first call in; it yields a
mapping it fills, on leaving, with kernel name → digest. Nothing here imports Triton or CuPy unless the process
already has.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ContextManager

from gpuperf.measure.kernel_records import code_digest, note_config, short_name

#: How deep the search for CuPy kernels follows references from the callable (fn → helper → its globals).
SEARCH_DEPTH = 3
#: How many items of a list or tuple the search looks into (operands can be long lists of arrays).
CONTAINER_ITEMS = 64
#: A ``__global__`` function's name in CUDA source: what the kernel records call it (``extern "C"``), or the base
#: of the demangled name (a template).
_GLOBAL_FUNCTION = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                              r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)")


#: Around a measured callable's first call: a context that yields a mapping which, once the call is done, gives
#: the code digest of each kernel the call's launcher compiled, by kernel name (``identify``).
Identify = Callable[[Callable[..., Any], Sequence[Any]], ContextManager[Mapping[str, str]]]


@contextlib.contextmanager
def nothing_identified(fn: Callable[..., Any], operands: Sequence[Any]) -> Iterator[Mapping[str, str]]:
    """The ``Identify`` of a loop that asks no launcher (the default)."""
    yield {}


class _TritonWatch:
    """Triton's loaded kernels by function handle, and which handles are launched while ``recording``."""

    def __init__(self) -> None:
        self.loaded: dict[int, tuple[str, str]] = {}  # function handle → (name, hash)
        self.launched: list[int] = []
        self.loads = 0  # every load, also of a handle seen before (a module loaded again)
        self.recording = False
        self.lock = threading.Lock()

    def on_load(self, module: Any, function: Any, name: Any, metadata_group: Any, hash: Any) -> None:
        with self.lock:
            self.loaded[int(function)] = (str(name), str(hash))
            self.loads += 1
        config = triton_config(metadata_group)
        if config:
            note_config(_triton_digest(str(hash)), config)

    def on_launch(self, metadata: Any) -> None:
        if not self.recording:
            return
        data = getattr(metadata, "data", None)
        if isinstance(data, dict) and data.get("function") is not None:
            with self.lock:
                self.launched.append(int(data["function"]))

    def codes(self) -> dict[str, str]:
        """The digest of each kernel name launched while recording, else of every loaded kernel of a name loaded
        once (the launch hook is not called by every Triton launcher)."""
        with self.lock:
            by_name: dict[str, set[str]] = {}
            for name, hash_ in self.loaded.values():
                by_name.setdefault(name, set()).add(hash_)
            codes = {name: _triton_digest(next(iter(hashes))) for name, hashes in by_name.items() if len(hashes) == 1}
            for function in self.launched:
                if function in self.loaded:
                    name, hash_ = self.loaded[function]
                    codes[name] = _triton_digest(hash_)
            return codes


#: The compile options of a Triton kernel that make its configuration (an autotuner chooses among them, with the
#: block sizes, which the kernel's grid shows).
TRITON_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def triton_config(metadata_group: Any) -> str:
    """``num_warps=4 num_stages=1`` from the metadata file of a loaded Triton kernel (its cache group maps file
    names to paths; the ``.json`` one holds the compile options); empty when there is none to read."""
    import json

    if not isinstance(metadata_group, dict):
        return ""
    for file_name, path in metadata_group.items():
        if str(file_name).endswith(".json") and not str(file_name).startswith("__grp__"):
            try:
                with open(path, encoding="utf-8") as handle:
                    metadata = json.load(handle)
            except (OSError, ValueError):
                return ""
            if not isinstance(metadata, dict):
                return ""
            return " ".join(f"{key}={metadata[key]}" for key in TRITON_OPTIONS if metadata.get(key) is not None)
    return ""


def _triton_digest(hash_: str) -> str:
    return code_digest("triton", hash_)


@functools.cache
def _triton_watch() -> _TritonWatch | None:
    """The watch, its hooks added to Triton's once; ``None`` where this Triton has no such hooks."""
    try:
        from triton import knobs
    except ImportError:
        return None
    runtime = getattr(knobs, "runtime", None)
    load_hook: Any = getattr(runtime, "kernel_load_end_hook", None)
    launch_hook: Any = getattr(runtime, "launch_enter_hook", None)
    if not hasattr(load_hook, "add") or not hasattr(launch_hook, "add"):
        return None
    watch = _TritonWatch()
    load_hook.add(watch.on_load)
    launch_hook.add(watch.on_launch)
    return watch


def compiled_count() -> int:
    """How many kernels Triton has loaded in this process since the watch began (0 without Triton or its hooks): a
    count that grows while a call is timed means it compiled then."""
    watch = _triton_watch() if "triton" in sys.modules else None
    if watch is None:
        return 0
    with watch.lock:
        return watch.loads


def watch_triton() -> None:
    """Start watching Triton's kernel loads, when this process has imported Triton (called before each GPU test,
    so the kernels a correctness test loads are known when a perf test launches them)."""
    if "triton" in sys.modules:
        _triton_watch()


@contextlib.contextmanager
def identify(fn: Callable[..., Any], operands: Sequence[Any]) -> Iterator[Mapping[str, str]]:
    """Around the first call of ``fn(*operands)``: yields a mapping that, once the call is done, gives the code
    digest of each kernel its launchers compiled, by the name the kernel records use."""
    codes: dict[str, str] = {}
    watch = _triton_watch() if "triton" in sys.modules else None
    if watch is not None:
        with watch.lock:
            watch.launched.clear()
        watch.recording = True
    try:
        yield codes
    finally:
        if watch is not None:
            watch.recording = False
            codes.update(watch.codes())
        codes.update(cupy_kernel_codes(fn, operands))


def cupy_kernel_codes(fn: Any, operands: Sequence[Any] = ()) -> dict[str, str]:
    """Kernel name → digest of every CuPy ``RawKernel`` / ``RawModule`` reachable from ``fn`` and ``operands``."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return {}
    kinds = tuple(kind for kind in (getattr(cupy, "RawKernel", None), getattr(cupy, "RawModule", None))
                  if isinstance(kind, type))
    codes: dict[str, str] = {}
    for found in reachable(fn, operands, kinds):
        source = getattr(found, "code", None)
        if not isinstance(source, str):
            continue
        digest = code_digest(source, repr(getattr(found, "options", ())), str(getattr(found, "backend", "")))
        names = set(_GLOBAL_FUNCTION.findall(source))
        own = getattr(found, "name", None)
        if isinstance(own, str):
            names.add(short_name(own))
        for name in names:
            codes[name] = digest
    return codes


def reachable(fn: Any, operands: Sequence[Any], kinds: tuple[type, ...], depth: int = SEARCH_DEPTH) -> list[Any]:
    """The objects of ``kinds`` that ``fn`` (and ``operands``) reach through the references a callable holds:
    itself, its closure cells, defaults, the module globals its code (and nested code) names, a bound method's
    ``__self__`` and that instance's attributes, a ``functools.partial``'s function and arguments."""
    found: list[Any] = []
    seen: set[int] = set()

    def visit(value: Any, level: int) -> None:
        if id(value) in seen or level < 0:
            return
        seen.add(id(value))
        if kinds and isinstance(value, kinds):
            found.append(value)
            return
        for child in _references(value):
            visit(child, level - 1)

    visit(fn, depth)
    for operand in operands:
        visit(operand, 0)
    return found


def _references(value: Any) -> list[Any]:
    if isinstance(value, functools.partial):
        return [value.func, *value.args, *value.keywords.values()]
    if isinstance(value, types.MethodType):
        return [value.__func__, value.__self__]
    if isinstance(value, types.FunctionType):
        children: list[Any] = list(value.__defaults__ or ())
        children += [cell.cell_contents for cell in value.__closure__ or () if _filled(cell)]
        globals_ = value.__globals__
        children += [globals_[name] for name in _names(value.__code__) if name in globals_]
        return children
    if isinstance(value, (list, tuple)):
        return list(value[:CONTAINER_ITEMS])
    if isinstance(value, (types.ModuleType, type)):
        return []  # a module's or a class's namespace is everyone's: the kernels fn uses are reached otherwise
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict) and type(value).__module__ not in ("builtins", "types"):
        return [item for item in attributes.values() if callable(item) or isinstance(item, (list, tuple))
                or hasattr(item, "__dict__")]
    return []


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _names(code: types.CodeType) -> list[str]:
    """The global names ``code`` and the code nested in it (lambdas, inner functions) refer to."""
    names = list(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names += _names(constant)
    return names
