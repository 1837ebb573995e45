"""Custom CUDA kernels under test (``kernels/cuda/*.cu``): compilation, launch, resource use.

Each wrapper takes row-major CuPy arrays (2-D, or 3-D stacks for the batched kernels; the last axis must
be contiguous, the row stride is the leading dimension, so a column slice of a wider buffer is a matrix
with ``ld > cols``) and enqueues one kernel on the current stream. It never synchronizes and returns the
``KernelResources`` of the kernel it launched, for ``perf.note(res.note())``.

The code is cut in two:
- *planning* (pure, no CuPy: ``kernels.custom_plan``, re-exported here): ``plan_*`` validate the
  operands (dtype, shape, layout) from their ``shape``/``strides``/``dtype``/``data.ptr`` and return
  ``LaunchPlan``s: which kernel of which file, the grid, the block, the dynamic shared memory and the
  argument tuple. Alignment decides between the 16-byte vector kernels and their scalar fallbacks there;
- *launching* (CuPy, this module): ``launch(plan)`` compiles the file with NVRTC for the current device's
  own architecture (``-arch=sm_XY`` from its compute capability; one ``RawModule`` per file, architecture
  and ``-D`` defines, cached), raises the kernel's dynamic shared-memory limit when a plan needs more
  than 48 KB, and launches.

Local ``#include "x.cu"`` lines are expanded here before NVRTC sees the source, so CuPy's on-disk kernel
cache (keyed by the source text) can never serve a binary built from an older included file.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuperf.measure.kernel_records import code_digest, note_code
from kernels.cuda_headers import MISSING_HEADERS_HINT, find_cuda_include
from kernels.custom_plan import (
    DEFAULT_DYNAMIC_SMEM_LIMIT,
    GEMM_PLANNERS,
    KernelArgumentError,
    LaunchPlan,
    PointerBatch,
    build_pointer_batch,
    build_stack_pointer_batch,
    plan_batched,
    plan_mma,
    plan_naive,
    plan_optimized,
    plan_tiled,
    plan_wmma,
    planner_for,
)

__all__ = [
    "CUDA_DIR",
    "GEMM_PLANNERS",
    "HeadersMissingError",
    "KernelArgumentError",
    "KernelResources",
    "LaunchPlan",
    "Launcher",
    "PointerBatch",
    "batched_sgemm",
    "batched_sgemm_pointers",
    "compile_options",
    "get_kernel",
    "launch",
    "launch_all",
    "launcher",
    "load_source",
    "mma_hgemm",
    "mma_unavailable_reason",
    "naive_sgemm",
    "optimized_sgemm",
    "plan_batched",
    "plan_mma",
    "plan_naive",
    "plan_optimized",
    "plan_tiled",
    "plan_wmma",
    "pointer_batch",
    "stack_pointer_batch",
    "prebuild",
    "resources",
    "tiled_sgemm",
    "wmma_hgemm",
    "wmma_unavailable_reason",
]

CUDA_DIR = Path(__file__).resolve().parent / "cuda"


class HeadersMissingError(RuntimeError):
    """``<mma.h>`` cannot be compiled: no CUDA toolkit headers were found."""


# ----------------------------------------------------------------------------------------------------
# Compiling and launching (CuPy)


def pointer_batch(arrays: Sequence[Any]) -> PointerBatch:
    """Upload the addresses of ``arrays`` (2-D row-major CuPy arrays of one shape, dtype and leading
    dimension) for the pointer-array kernels. Done once per operand set, outside any timed region."""
    import cupy

    return build_pointer_batch(arrays, cupy.asarray)


def stack_pointer_batch(stack: Any, order: Sequence[int]) -> PointerBatch:
    """Upload the addresses of a 3-D CuPy stack's items in ``order`` (``build_stack_pointer_batch``)."""
    import cupy

    return build_stack_pointer_batch(stack, order, cupy.asarray)


@dataclass(frozen=True)
class KernelResources:
    """What the compiler gave one kernel (``RawKernel.attributes``) and what a launch of it asks for."""

    kernel: str
    num_regs: int  # registers per thread
    static_shared_bytes: int  # __shared__ arrays, per block
    dynamic_shared_bytes: int  # asked for at launch, per block
    local_bytes: int  # local memory per thread: register spills and stack arrays
    max_threads_per_block: int  # the most this kernel can launch with, given its registers
    block_threads: int
    blocks_per_sm: int | None  # occupancy at this block size and shared memory, when the driver says
    binary_version: int  # SASS version, e.g. 90 for sm_90

    @property
    def shared_bytes(self) -> int:
        return self.static_shared_bytes + self.dynamic_shared_bytes

    def note(self) -> str:
        """e.g. ``optimized_sgemm_vec4 regs=127 smem=16.2KB spill=0B blocks/SM=2``."""
        occupancy = "" if self.blocks_per_sm is None else f" blocks/SM={self.blocks_per_sm}"
        return (f"{self.kernel} regs={self.num_regs} smem={self.shared_bytes / 1024:.1f}KB "
                f"spill={self.local_bytes}B{occupancy}")


@functools.cache
def _toolkit_include() -> str | None:
    """``-I<dir>`` for ``<mma.h>`` (searched once per process), or ``None``."""
    return find_cuda_include()


def wmma_unavailable_reason() -> str | None:
    """``None`` when the WMMA kernel can be compiled here, else the skip reason (naming the fix)."""
    if _toolkit_include() is None:
        return f"WMMA kernel needs <mma.h>, crt/mma.h and cuda_fp16.h from a CUDA toolkit: {MISSING_HEADERS_HINT}"
    return None


#: Oldest compute capability of mma_hgemm.cu's instructions (mma.sync m16n8k16 with FP32 accumulators, cp.async).
MMA_MIN_COMPUTE_CAPABILITY = 80


def mma_unavailable_reason() -> str | None:
    """``None`` when the current GPU runs the ``mma.sync`` kernel, else the skip reason."""
    arch = _device_arch()
    if int(arch) < MMA_MIN_COMPUTE_CAPABILITY:
        return f"the mma.sync kernel needs compute capability 8.0 or newer; this GPU is sm_{arch}"
    return None


_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)


def load_source(name: str, _seen: frozenset[str] = frozenset()) -> str:
    """``kernels/cuda/<name>`` with its local ``#include "x"`` lines replaced by the files' text."""
    if name in _seen:
        raise RuntimeError(f"{name}: recursive #include")
    text = (CUDA_DIR / name).read_text()

    def expand(match: re.Match[str]) -> str:
        return f"// ---- {match.group(1)} ----\n{load_source(match.group(1), _seen | {name})}\n"

    return _LOCAL_INCLUDE.sub(expand, text)


def _device_arch() -> str:
    import cupy

    return str(cupy.cuda.Device().compute_capability)


def compile_options(source: str, arch: str, defines: tuple[tuple[str, str], ...] = ()) -> tuple[str, ...]:
    """NVRTC options for one file: the device's own architecture, C++17, the defines, and for the WMMA
    file the toolkit include directory (``HeadersMissingError`` when there is none)."""
    options = [f"-arch=sm_{arch}", "-std=c++17", *(f"-D{key}={value}" for key, value in defines)]
    if source == "wmma_hgemm.cu":
        include = _toolkit_include()
        if include is None:
            raise HeadersMissingError(f"cannot compile {source}: <mma.h> not found; {MISSING_HEADERS_HINT}")
        options.append(include)
    return tuple(options)


@functools.cache
def _module(source: str, arch: str, defines: tuple[tuple[str, str], ...]) -> Any:
    import cupy

    return cupy.RawModule(code=load_source(source), options=compile_options(source, arch, defines))


@functools.cache
def _kernel(source: str, kernel: str, arch: str, defines: tuple[tuple[str, str], ...]) -> Any:
    return _module(source, arch, defines).get_function(kernel)


@functools.cache
def _code(source: str, arch: str, defines: tuple[tuple[str, str], ...]) -> str:
    """The digest of what is compiled for a plan: the expanded source and every NVRTC option."""
    return code_digest(load_source(source), *compile_options(source, arch, defines))


def code_of(plan: LaunchPlan, arch: str | None = None) -> str:
    return _code(plan.source, arch or _device_arch(), plan.defines)


def get_kernel(plan: LaunchPlan, arch: str | None = None) -> Any:
    """The compiled ``cupy.RawKernel`` of a plan, for the current device (or ``arch``)."""
    return _kernel(plan.source, plan.kernel, arch or _device_arch(), plan.defines)


def prebuild(plans: Iterable[LaunchPlan], workers: int | None = None) -> int:
    """Compile the module of every plan once, in parallel threads (NVRTC runs without the GIL, and a selection of
    many builds would otherwise spend most of its time compiling one after another). One compile per (source,
    defines), which every kernel of that file shares. A failed compile is left to the plan's own launch, which
    raises its error again where it belongs. Returns the number of modules."""
    arch = _device_arch()
    modules = {(plan.source, plan.defines): plan for plan in plans}

    def build(plan: LaunchPlan) -> None:
        try:
            get_kernel(plan, arch)  # a RawModule compiles when its first function is taken
        except Exception:  # noqa: BLE001 - raised again, with its build named, by the launch of that build
            pass

    with ThreadPoolExecutor(max_workers=workers or min(32, os.cpu_count() or 8)) as pool:
        list(pool.map(build, modules.values()))
    return len(modules)


@functools.cache
def _resources(source: str, kernel: str, arch: str, defines: tuple[tuple[str, str], ...], block_threads: int,
               dynamic_shared: int) -> KernelResources:
    from cupy.cuda import driver

    fn = _kernel(source, kernel, arch, defines)
    attrs = fn.attributes
    try:
        blocks = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.kernel.ptr, block_threads, dynamic_shared))
    except (AttributeError, TypeError, driver.CUDADriverError):  # occupancy is a nicety: never fail a run
        blocks = None
    return KernelResources(kernel=kernel, num_regs=int(attrs["num_regs"]),
                           static_shared_bytes=int(attrs["shared_size_bytes"]), dynamic_shared_bytes=dynamic_shared,
                           local_bytes=int(attrs["local_size_bytes"]),
                           max_threads_per_block=int(attrs["max_threads_per_block"]), block_threads=block_threads,
                           blocks_per_sm=blocks, binary_version=int(attrs["binary_version"]))


def resources(plan: LaunchPlan, arch: str | None = None) -> KernelResources:
    """Registers, shared memory, spills and occupancy of a plan's kernel (compiles it if needed; raises its
    dynamic shared-memory limit first, as a launch would, so the occupancy counts the plan's)."""
    arch = arch or _device_arch()
    _ready_kernel(plan, arch)
    threads = plan.block[0] * plan.block[1] * plan.block[2]
    return _resources(plan.source, plan.kernel, arch, plan.defines, threads, plan.shared_mem)


def _ready_kernel(plan: LaunchPlan, arch: str) -> Any:
    """The plan's kernel, with its dynamic shared-memory limit raised when the plan needs more than 48 KB."""
    kernel = get_kernel(plan, arch)
    if plan.shared_mem > DEFAULT_DYNAMIC_SMEM_LIMIT and kernel.max_dynamic_shared_size_bytes < plan.shared_mem:
        kernel.max_dynamic_shared_size_bytes = plan.shared_mem
    return kernel


def launch(plan: LaunchPlan) -> KernelResources:
    """Enqueue ``plan`` on the current stream (no synchronization) and return its kernel's resources."""
    arch = _device_arch()
    _ready_kernel(plan, arch)(plan.grid, plan.block, plan.args, shared_mem=plan.shared_mem)
    note_code(plan.kernel, code_of(plan, arch))
    return resources(plan, arch)


def launch_all(plans: Sequence[LaunchPlan]) -> KernelResources:
    """Enqueue every plan in order; the resources are those of the first (all share one kernel)."""
    result = None
    for plan in plans:
        res = launch(plan)
        result = result or res
    assert result is not None
    return result


class Launcher:
    """A low-overhead ``fn(a, b, c)`` for timing loops: plans once per operand set, then only launches.

    The timing harness calls ``fn`` with a few rotated operand copies; planning (validation, alignment,
    grid) runs on the first call with each set and is kept, together with the operands themselves, so an
    ``id()`` can never be reused by another array while its plan is cached. Every call still launches on
    the current stream and never synchronizes.
    """

    def __init__(self, planner: Callable[..., LaunchPlan | list[LaunchPlan]], **scalars: Any) -> None:
        self._planner = planner
        self._scalars = scalars
        self._cache: dict[tuple[int, ...], tuple[list[tuple[Any, LaunchPlan, str]], tuple[Any, ...]]] = {}
        self.resources: KernelResources | None = None

    def __call__(self, *operands: Any) -> None:
        key = tuple(id(x) for x in operands)
        entry = self._cache.get(key)
        if entry is None:
            planned = self._planner(*operands, **self._scalars)
            plans = planned if isinstance(planned, list) else [planned]
            arch = _device_arch()
            entry = ([(_ready_kernel(p, arch), p, code_of(p, arch)) for p in plans], operands)
            self._cache[key] = entry
            self.resources = resources(plans[0], arch)
        for kernel, plan, code in entry[0]:
            kernel(plan.grid, plan.block, plan.args, shared_mem=plan.shared_mem)
            note_code(plan.kernel, code)


def launcher(kind: str, alpha: float = 1.0, beta: float = 0.0, **options: Any) -> Launcher:
    """A ``Launcher`` for ``"batched"`` or one of ``GEMM_PLANNERS`` (``options``: e.g. ``tile=8``)."""
    return Launcher(planner_for(kind), alpha=alpha, beta=beta, **options)


# ----------------------------------------------------------------------------------------------------
# The wrappers the tests call


def naive_sgemm(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> KernelResources:
    """``C = alpha·A·B + beta·C`` (float32) with the naive kernel."""
    return launch(plan_naive(a, b, c, alpha, beta))


def tiled_sgemm(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0, tile: int = 16) -> KernelResources:
    """``C = alpha·A·B + beta·C`` (float32) with the shared-memory tiled kernel (``tile`` x ``tile``)."""
    return launch(plan_tiled(a, b, c, alpha, beta, tile))


def optimized_sgemm(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> KernelResources:
    """``C = alpha·A·B + beta·C`` (float32) with the register-tiled, double-buffered kernel."""
    return launch(plan_optimized(a, b, c, alpha, beta))


def wmma_hgemm(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> KernelResources:
    """``C = alpha·A·B + beta·C`` with FP16 A, B, C on the tensor cores (FP32 accumulate)."""
    return launch(plan_wmma(a, b, c, alpha, beta))


def mma_hgemm(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> KernelResources:
    """``C = alpha·A·B + beta·C`` with FP16 A, B, C on ``mma.sync`` tensor cores (FP32 accumulate)."""
    return launch(plan_mma(a, b, c, alpha, beta))


def batched_sgemm(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> KernelResources:
    """``C[i] = alpha·A[i]·B[i] + beta·C[i]`` (float32): 3-D strided stacks or ``PointerBatch``es."""
    return launch_all(plan_batched(a, b, c, alpha, beta))


def batched_sgemm_pointers(a: PointerBatch, b: PointerBatch, c: PointerBatch, alpha: float = 1.0,
                           beta: float = 0.0) -> KernelResources:
    """The pointer-array form of ``batched_sgemm`` (make the batches once with ``pointer_batch``)."""
    return launch_all(plan_batched(a, b, c, alpha, beta))
