"""cuBLASLt matmul through nvmath-python's low-level bindings: the heuristic's candidate algorithms for one
problem, each of them runnable, so a case can show how far the default is from the best algorithm.

cuBLAS picks one algorithm per call by a general heuristic; cuBLASLt exposes the ranked list behind it
(``cublasLtMatmulAlgoGetHeuristic``), each entry with the workspace it needs and its expected wave count.
Timing every candidate tells how far the default (rank 0) is from the fastest: a few percent means the
library covers the shape; 30 % or more means the shape is worth a custom kernel.

Operands are the suite's row-major CuPy arrays (``kernels.operands``; BF16 as ``uint16`` bits). cuBLASLt is
column-major, so the product goes through the same swap trick as ``kernels.cublas``: a row-major ``X[r×c]``
is the column-major ``Xᵀ[c×r]`` with the same leading dimension, so ``C = A·B`` is issued as
``Cᵀ = Bᵀ·Aᵀ`` — cuBLASLt's "A" is our B, its "B" is our A, no transposes, no copies.

nvmath-python is optional (``pip install -e '.[cublaslt]'``, docs/nvmath.md): it is imported lazily, and
``available()`` says why it cannot be used instead of raising.
"""

from __future__ import annotations

import functools
import importlib
import weakref
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from gpuperf.measure.device import driver_installed
from kernels import blas_args

INSTALL = "pip install -e '.[cublaslt]' (or: pip install 'nvmath-python[cu13]')"

#: Candidates asked of the heuristic. Hopper typically returns up to 8–16 for a plain GEMM.
REQUESTED_ALGOS = 16
#: Workspace the heuristic may assume: NVIDIA recommends 32 MiB on Hopper (cuBLAS docs, cublasSetWorkspace).
WORKSPACE_BYTES = 32 * 2**20

#: ``cudaDataType`` of alpha and beta for each host scalar type of ``blas_args.COMPUTE_TYPES``.
_SCALE_TYPES: dict[str, str] = {"float32": "CUDA_R_32F", "float64": "CUDA_R_64F", "float16": "CUDA_R_16F"}


_Plan = TypeVar("_Plan", bound="LtMatmul")


class LtError(RuntimeError):
    """cuBLASLt could not plan or run a product; the message names the problem and the fix."""


@functools.cache
def _bindings() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``(nvmath, nvmath.bindings.cublasLt, nvmath.bindings.cublas)``; ImportError when nvmath is absent."""
    return (importlib.import_module("nvmath"), importlib.import_module("nvmath.bindings.cublasLt"),
            importlib.import_module("nvmath.bindings.cublas"))


@functools.cache
def available() -> str | None:
    """``None`` when cuBLASLt can be used through nvmath-python, else why not and the command that fixes it."""
    try:
        _, lt, _ = _bindings()
    except ImportError as exc:
        return f"nvmath-python is not installed ({exc}): {INSTALL}"
    except Exception as exc:  # noqa: BLE001 — a broken install (e.g. mismatched cuda-bindings) is a reason too
        return f"nvmath-python failed to import ({type(exc).__name__}: {exc}): reinstall it with {INSTALL}"
    try:
        lt.get_version()
    except Exception as exc:  # noqa: BLE001 — nvmath raises its own loader errors
        if not driver_installed():  # nvmath then says "CUDA driver is not found": no package would fix it
            return (f"no NVIDIA driver is installed (libcuda.so.1 cannot be loaded; nvmath-python: {exc}): cuBLASLt "
                    "runs on an NVIDIA GPU with its driver")
        return (f"nvmath-python is installed but cuBLASLt is not usable ({type(exc).__name__}: {exc}): it needs "
                f"libcublasLt.so.13, which the cublaslt extra brings as a wheel: {INSTALL}")
    return None


def version() -> str:
    """cuBLASLt's version as ``major.minor.patch`` (``cublasLtGetVersion``: ``major·10000 + minor·100 + patch``)."""
    _, lt, _ = _bindings()
    number = int(lt.get_version())
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


@dataclass(frozen=True)
class LtTypes:
    """The cuBLASLt enum values of one math path: the storage and compute type ``kernels.cublas`` uses for it
    (``blas_args.GEMM_PATHS``), so cuBLAS and cuBLASLt are compared on the same math."""

    data_type: int  # cudaDataType of A, B, C and D
    compute_type: int  # cublasComputeType_t
    scale_type: int  # cudaDataType of alpha and beta
    compute_name: str  # e.g. "COMPUTE_32F_FAST_TF32"
    scalar: str  # NumPy dtype of alpha and beta


def lt_types(dtype: str) -> LtTypes:
    """The cuBLASLt types of suite dtype ``dtype`` (``fp32``, ``tf32``, ``fp16``, ``bf16``, ``fp64``)."""
    path = blas_args.gemm_path(dtype)
    nvmath, _, cublas = _bindings()
    compute_name = f"COMPUTE_{path.compute}"
    return LtTypes(
        data_type=int(nvmath.CudaDataType[blas_args.CUDA_TYPE[path.storage]]),
        compute_type=int(cublas.ComputeType[compute_name]),
        scale_type=int(nvmath.CudaDataType[_SCALE_TYPES[path.scalar]]),
        compute_name=compute_name,
        scalar=path.scalar,
    )


@dataclass(frozen=True)
class Candidate:
    """One algorithm the heuristic proposed, in its order (``rank`` 0 is what cuBLASLt uses by default)."""

    rank: int
    algo_id: int
    tile: str
    stages: str
    split_k: int
    reduction_scheme: int
    cta_swizzling: int
    custom_option: int
    workspace_bytes: int
    waves: float

    @property
    def label(self) -> str:
        """A compact name, e.g. ``#0 a21 t128x256 s64x3 k1`` (+ reduction scheme with split-K, swizzle, option)."""
        text = f"#{self.rank} a{self.algo_id} t{self.tile} s{self.stages} k{self.split_k}"
        if self.split_k > 1:
            text += f" r{self.reduction_scheme}"
        if self.cta_swizzling:
            text += " sw"
        if self.custom_option:
            text += f" c{self.custom_option}"
        return text


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    member = enum._value2member_map_.get(value)
    return member.name.removeprefix(prefix) if member is not None else str(value)


def _release(lt: ModuleType, handles: dict[str, int]) -> None:
    """Destroy what ``LtMatmul`` created, newest first (preference and layouts before descriptor and handle)."""
    destroy = {"handle": lt.destroy, "desc": lt.matmul_desc_destroy, "layout_a": lt.matrix_layout_destroy,
               "layout_b": lt.matrix_layout_destroy, "layout_c": lt.matrix_layout_destroy,
               "layout_d": lt.matrix_layout_destroy, "pref": lt.matmul_preference_destroy}
    while handles:
        name, pointer = handles.popitem()
        destroy[name](pointer)


class LtMatmul:
    """``C[m×n] = A[m×k]·B[k×n]`` for one shape and dtype: the heuristic's candidates, and a runner for each.

    Row-major, C-contiguous operands on the current device; ``run`` enqueues on CuPy's current stream and
    never synchronises, so it can be handed to the ``measure`` fixture. Release with ``close()`` or a
    ``with`` block (a finalizer also releases it when the object is collected).
    """

    def __init__(self, m: int, n: int, k: int, dtype: str, *, requested: int = REQUESTED_ALGOS,
                 workspace_bytes: int = WORKSPACE_BYTES) -> None:
        if min(m, n, k) < 1:
            raise ValueError(f"sizes must be positive, got m={m}, n={n}, k={k}")
        reason = available()
        if reason is not None:
            raise LtError(reason)
        self.m, self.n, self.k, self.dtype = m, n, k, dtype
        self.workspace_limit = workspace_bytes
        self._plan(requested, workspace_bytes)

    def _plan(self, requested: int, workspace_bytes: int) -> None:
        """Create the handle, the descriptors (``_describe_problem``) and the preference, and ask the heuristic."""
        _, lt, _ = _bindings()
        import cupy

        self._lt = lt
        handles: dict[str, int] = {}
        try:
            handles["handle"] = lt.create()
            self._describe_problem(handles)
            handles["pref"] = lt.matmul_preference_create()
            limit = np.array([workspace_bytes], dtype=np.uint64)
            lt.matmul_preference_set_attribute(handles["pref"], lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                                               limit.ctypes.data, limit.nbytes)
            self._handle, self._desc, self._pref = handles["handle"], handles["desc"], handles["pref"]
            self._layouts = (handles["layout_a"], handles["layout_b"], handles["layout_c"],
                             handles.get("layout_d", handles["layout_c"]))
            self._results, self._algo_ptrs, self.candidates = self._heuristic(requested)
        except BaseException:
            _release(lt, handles)
            raise
        self._finalizer = weakref.finalize(self, _release, lt, handles)
        self._finalizer.atexit = False  # at interpreter exit the CUDA context may already be gone
        largest = max(candidate.workspace_bytes for candidate in self.candidates)
        self._workspace = cupy.empty(max(largest, 1), dtype=cupy.uint8)

    def _describe_problem(self, handles: dict[str, int]) -> None:
        """The matmul descriptor and the layouts of cuBLASLt's A, B and C (D is C), added to ``handles``."""
        _, lt, cublas = _bindings()
        self.path = blas_args.gemm_path(self.dtype)
        self.types = lt_types(self.dtype)
        self._alpha = np.ones(1, dtype=self.types.scalar)
        self._beta = np.zeros(1, dtype=self.types.scalar)
        m, n, k = self.m, self.n, self.k
        handles["desc"] = lt.matmul_desc_create(self.types.compute_type, self.types.scale_type)
        no_transpose = np.array([int(cublas.Operation.N)], dtype=np.int32)
        for attribute in (lt.MatmulDescAttribute.TRANSA, lt.MatmulDescAttribute.TRANSB):
            lt.matmul_desc_set_attribute(handles["desc"], attribute, no_transpose.ctypes.data, no_transpose.nbytes)
        # The swap trick: cuBLASLt's A is our B seen column-major (n×k, ld n), its B is our A
        # (k×m, ld k), and its C and D are our C (n×m, ld n).
        handles["layout_a"] = lt.matrix_layout_create(self.types.data_type, n, k, n)
        handles["layout_b"] = lt.matrix_layout_create(self.types.data_type, k, m, k)
        handles["layout_c"] = lt.matrix_layout_create(self.types.data_type, n, m, n)

    def __repr__(self) -> str:
        return f"LtMatmul({self.m}x{self.n}x{self.k}, {self.dtype}, {len(self.candidates)} candidates)"

    @property
    def problem(self) -> str:
        return f"{self.m}x{self.n}x{self.k} {self.dtype} ({self.types.compute_name})"

    def _heuristic(self, requested: int) -> tuple[Any, tuple[int, ...], tuple[Candidate, ...]]:
        """Ask for ``requested`` candidates; keep the valid ones in rank order, with their algo pointers."""
        lt = self._lt
        layout_a, layout_b, layout_c, layout_d = self._layouts
        results = lt.MatmulHeuristicResult(requested)
        returned = np.zeros(1, dtype=np.int32)
        try:
            lt.matmul_algo_get_heuristic(self._handle, self._desc, layout_a, layout_b, layout_c, layout_d,
                                         self._pref, requested, results.ptr, returned.ctypes.data)
        except lt.cuBLASLtError as exc:
            raise LtError(f"cublasLtMatmulAlgoGetHeuristic failed for {self.problem}: {exc}; this cuBLASLt does "
                          "not support the combination of types, shape and alignment") from exc
        # With nothing returned the result array is uninitialised and must not be used.
        count = int(returned[0])
        if count <= 0:
            raise LtError(f"cuBLASLt's heuristic returned no algorithm for {self.problem} with a "
                          f"{self.workspace_limit} B workspace limit; allow a larger workspace or align the sizes")
        pointers: list[int] = []
        candidates: list[Candidate] = []
        for index in range(count):
            entry = results[index]
            if int(entry.state) != 0:  # an entry is valid only when its own state is CUBLAS_STATUS_SUCCESS
                continue
            pointers.append(entry["algo"].ctypes.data)
            candidates.append(self._describe(len(candidates), entry))
        if not candidates:
            raise LtError(f"cuBLASLt's heuristic returned {count} results for {self.problem}, none valid")
        return results, tuple(pointers), tuple(candidates)

    def _config(self, algo_ptr: int, attribute: Any) -> int:
        lt = self._lt
        value = np.zeros(1, dtype=lt.get_matmul_algo_config_attribute_dtype(attribute))
        written = np.zeros(1, dtype=np.uint64)
        lt.matmul_algo_config_get_attribute(algo_ptr, attribute, value.ctypes.data, value.nbytes,
                                            written.ctypes.data)
        return int(value[0])

    def _describe(self, rank: int, entry: Any) -> Candidate:
        lt = self._lt
        attr = lt.MatmulAlgoConfigAttribute
        algo_ptr = entry["algo"].ctypes.data
        return Candidate(
            rank=rank,
            algo_id=self._config(algo_ptr, attr.ID),
            tile=_enum_name(lt.MatmulTile, self._config(algo_ptr, attr.TILE_ID), "TILE_"),
            stages=_enum_name(lt.MatmulStages, self._config(algo_ptr, attr.STAGES_ID), "STAGES_"),
            split_k=self._config(algo_ptr, attr.SPLITK_NUM),
            reduction_scheme=self._config(algo_ptr, attr.REDUCTION_SCHEME),
            cta_swizzling=self._config(algo_ptr, attr.CTA_SWIZZLING),
            custom_option=self._config(algo_ptr, attr.CUSTOM_OPTION),
            workspace_bytes=int(entry.workspace_size),
            waves=float(entry.waves_count),
        )

    def _check_operand(self, name: str, array: Any, shape: tuple[int, int], dtype: str, maker: str,
                       layout: str = "row-major, tightly packed") -> None:
        """An operand of the shape, dtype and layout this call was planned for, or a ``ValueError`` naming the
        operand and ``maker``, the function that makes one."""
        if tuple(array.shape) != shape or str(array.dtype) != dtype:
            raise ValueError(f"operand {name} is {tuple(array.shape)} {array.dtype}, expected {shape} {dtype} for "
                             f"{self!r}; make it with {maker}")
        if not array.flags.c_contiguous:
            raise ValueError(f"operand {name} must be C-contiguous ({layout}): pass "
                             f"cupy.ascontiguousarray({name.lower()})")

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < len(self.candidates):
            raise IndexError(f"candidate {rank} out of range: {self!r} has ranks 0..{len(self.candidates) - 1}")

    def run(self, rank: int, a: Any, b: Any, c: Any) -> None:
        """Enqueue ``C = A·B`` with candidate ``rank`` on CuPy's current stream (no synchronisation)."""
        self._check_rank(rank)
        for name, array, shape in (("A", a, (self.m, self.k)), ("B", b, (self.k, self.n)), ("C", c, (self.m, self.n))):
            self._check_operand(name, array, shape, self.path.dtype, "kernels.operands.random_operand")
        self._enqueue(rank, b.data.ptr, a.data.ptr, c.data.ptr, c.data.ptr)

    def _enqueue(self, rank: int, lt_a: int, lt_b: int, lt_c: int, lt_d: int) -> None:
        """``cublasLtMatmul`` with candidate ``rank`` on cuBLASLt's A, B, C and D (device pointers, in cuBLASLt's
        order: the swap trick's, so A is our B) on CuPy's current stream; its failure as an ``LtError``."""
        import cupy

        lt = self._lt
        layout_a, layout_b, layout_c, layout_d = self._layouts
        try:
            lt.matmul(self._handle, self._desc, self._alpha.ctypes.data, lt_a, layout_a, lt_b, layout_b,
                      self._beta.ctypes.data, lt_c, layout_c, lt_d, layout_d, self._algo_ptrs[rank],
                      self._workspace.data.ptr, self._workspace.nbytes, cupy.cuda.get_current_stream().ptr)
        except lt.cuBLASLtError as exc:
            raise LtError(f"cublasLtMatmul with candidate {self.candidates[rank].label} failed for "
                          f"{self.problem}: {exc}") from exc

    def close(self) -> None:
        """Destroy the cuBLASLt handle and descriptors (idempotent)."""
        self._finalizer()

    def __enter__(self: _Plan) -> _Plan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def gap(default_tflops: float, best_tflops: float) -> float:
    """How far the default candidate is below the best one, as a fraction of the best."""
    return (best_tflops - default_tflops) / best_tflops


def format_table(rows: list[tuple[Candidate, float | None]], title: str = "") -> str:
    """The candidate table: label, workspace, waves, TFLOPS and Δ vs the best (``None``: did not run)."""
    timed = [tflops for _, tflops in rows if tflops is not None]
    best = max(timed) if timed else None
    lines = [title] if title else []
    lines.append(f"{'candidate':<34} {'workspace':>10} {'waves':>6} {'TFLOPS':>8} {'Δ vs best':>10}")
    for candidate, tflops in rows:
        if tflops is None or best is None:
            measured, delta = "failed", ""
        else:
            measured, delta = f"{tflops:8.1f}", f"{100 * (tflops / best - 1):+9.1f} %"
        marks = " ← default" if candidate.rank == 0 else ""
        if tflops is not None and tflops == best:
            marks += " ← best"
        lines.append(f"{candidate.label:<34} {candidate.workspace_bytes:>10} {candidate.waves:>6.2f} "
                     f"{measured:>8} {delta:>10}{marks}")
    return "\n".join(lines)
