"""CPU tests of ``kernels.custom_plan``: the launch plans of the custom CUDA kernels, held to the kernels'
own sources.

The kernels' requirements are read from ``kernels/cuda/*.cu`` rather than restated here: the tile and
thread counts from their ``#define``s, the parameter names and types from their ``extern "C"``
signatures. A plan is then checked by what the kernel would do with it: every block's output region
(the kernel's tile at ``blockIdx``, clipped by the kernel's own bounds checks) is counted on a NumPy
array, so a grid that misses an element, writes one twice, launches an idle block or runs past the
batch fails. Operands are layout-only stand-ins (``shape``, ``strides``, ``dtype``, ``data.ptr``): no
CuPy, no memory behind them.
"""

from __future__ import annotations

import functools
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuperf.suite.cases import load_cases
from kernels import custom_plan
from kernels.custom_plan import (
    BATCHED_PATHS,
    GEMM_PLANNERS,
    MMA_CONFIGS,
    MMA_DEFAULT,
    REG_CLASSES,
    SGEMM_CONFIGS,
    SGEMM_DEFAULT,
    BATCHED_TILED_DEFAULT,
    KernelArgumentError,
    LaunchPlan,
    PointerBatch,
    WarpSgemmConfig,
    batch_chunks,
    batched_path,
    build_pointer_batch,
    build_stack_pointer_batch,
    ceil_div,
    plan_batched,
    plan_mma,
    plan_naive,
    plan_optimized,
    plan_tiled,
    plan_wmma,
    planner_for,
    small_batched_group,
    small_batched_smem,
    tile_grid,
)

CUDA_DIR = Path(custom_plan.__file__).resolve().parent / "cuda"
BASE = 0x7F00_0000_0000  # a 256-byte aligned device address
SMEM_LIMIT = 48 * 1024  # dynamic shared memory a kernel gets without raising its attribute
GRID_YZ_LIMIT = 65535


# --- the kernels' sources --------------------------------------------------------------------------------

def _text(source: str) -> str:
    """A .cu file with its local includes prepended and its line continuations joined."""
    text = (CUDA_DIR / source).read_text()
    included = "".join(_text(name) for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M))
    return included + text.replace("\\\n", " ")


@functools.cache
def _defines(source: str) -> dict[str, str]:
    """``#define NAME value`` of a .cu file and its includes (comments dropped)."""
    found = re.findall(r"^\s*#\s*define\s+(\w+)[ \t]+(.+?)\s*(?://.*)?$", _text(source), re.M)
    return {name: value for name, value in found}

#: The mma build that mma_hgemm.cu compiles to without any -D (the first default).
PLAIN_MMA = "128x128-s4"
#: The kernel the 2-D SGEMM default runs (``warp_sgemm`` or ``optimized_sgemm``), and the tiled batched path's.
DEFAULT_SGEMM_KERNEL = SGEMM_CONFIGS[SGEMM_DEFAULT].kernel


def _batched_kernel(path: str) -> str:
    """The kernel-name stem a default batched plan of ``path`` launches."""
    return SGEMM_CONFIGS[BATCHED_TILED_DEFAULT].batched_kernel if path == "tiled" else f"batched_sgemm_{path}"


def _define(source: str, name: str, overrides: tuple[tuple[str, str], ...] = ()) -> int:
    """The integer value of ``name`` in a .cu file, its macros expanded, with a plan's ``-D`` ``overrides``."""
    text = _expand(name, {**_defines(source), **dict(overrides)})
    assert re.fullmatch(r"[\d\s*+/()-]+", text), f"{name} = {text}: not an arithmetic expression of literals"
    value = eval(text)  # an arithmetic expression of literals, checked just above
    assert value == int(value), f"{name} = {text} is not an integer"
    return int(value)


def _expand(text: str, defines: dict[str, str]) -> str:
    for _ in range(4):
        text = re.sub(r"\b\w+\b", lambda m: defines.get(m[0], m[0]), text)
    return text


@dataclass(frozen=True)
class Signature:
    """One ``extern "C"`` kernel: its parameters as (name, kind) and its ``__launch_bounds__`` text."""

    params: tuple[tuple[str, str], ...]
    launch_bounds: str | None


def _param(text: str) -> tuple[str, str]:
    name = re.findall(r"\w+", text)[-1]
    if "*" in text:
        return name, "pointer"
    for kind in ("long long", "int", "float"):
        if re.match(rf"(const\s+)?{kind}\b", text.strip()):
            return name, kind
    raise AssertionError(f"unknown parameter type: {text!r}")


@functools.cache
def _signature(source: str, kernel: str) -> Signature:
    pattern = (rf'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\(([^)]*)\)\s+)?{kernel}\s*'
               r"\(([^)]*)\)")
    match = re.search(pattern, _text(source))
    assert match, f"no extern \"C\" kernel {kernel} in {source}"
    params = _expand(match[2], _defines(source))
    return Signature(tuple(_param(p) for p in params.split(",")), match[1])


def _kind(arg: Any) -> str:
    if isinstance(arg, np.int32):
        return "int"
    if isinstance(arg, np.int64):
        return "long long"
    if isinstance(arg, np.float32):
        return "float"
    return "pointer"  # an operand, a device pointer array or the null uint64


def _bind(plan: LaunchPlan) -> dict[str, Any]:
    """The plan's arguments by the kernel's parameter names, after checking count and types."""
    params = _signature(plan.source, plan.kernel).params
    assert len(plan.args) == len(params), f"{plan.kernel} takes {len(params)} arguments, the plan has {len(plan.args)}"
    for (name, kind), arg in zip(params, plan.args):
        assert _kind(arg) == kind, f"{plan.kernel}: parameter {name} is {kind}, the plan passes {arg!r}"
    return {name: arg for (name, _), arg in zip(params, plan.args)}


def _launch_bound(plan: LaunchPlan) -> int | None:
    """The kernel's ``__launch_bounds__`` threads, with the plan's ``-D`` defines applied."""
    bounds = _signature(plan.source, plan.kernel).launch_bounds
    if bounds is None:
        return None
    return _define(plan.source, bounds.split(",")[0].strip(), plan.defines)


def _block_tile(plan: LaunchPlan) -> tuple[int, int]:
    """Rows x columns of C one block of the plan's kernel computes (from the kernel's source)."""
    if plan.kernel == "naive_sgemm":  # row = blockIdx.y * blockDim.y + threadIdx.y, col likewise in x
        return plan.block[1], plan.block[0]
    if plan.kernel == "tiled_sgemm":
        tile = int(dict(plan.defines).get("TILE", _defines(plan.source)["TILE"]))
        return tile, tile
    if plan.kernel.startswith("wmma_hgemm"):
        return _define(plan.source, "WM_BM"), _define(plan.source, "WM_BN")
    if plan.kernel.startswith("mma_hgemm"):
        return _define(plan.source, "MMA_BM", plan.defines), _define(plan.source, "MMA_BN", plan.defines)
    if plan.kernel.startswith(("warp_sgemm", "batched_sgemm_wtiled")):
        return _define(plan.source, "WT_BM", plan.defines), _define(plan.source, "WT_BN", plan.defines)
    return _define(plan.source, "OPT_BM"), _define(plan.source, "OPT_BN")  # optimized and batched tiled


def _register_tile(plan: LaunchPlan) -> tuple[int, int]:
    """(TILE, MATS) of a batched_sgemm_regNN_* kernel, from its source and the plan's defines."""
    tile = int(re.fullmatch(r"batched_sgemm_reg(\d+)_\w+", plan.kernel)[1])  # type: ignore[index]
    return _define(plan.source, f"BR{tile}_TILE"), _define(plan.source, f"BR{tile}_MATS", plan.defines)


def kernel_shared_bytes(plan: LaunchPlan, k: int) -> int:
    """Dynamic shared memory the plan's kernel addresses, from its source's layout and the plan's defines."""
    src, d = plan.source, plan.defines
    if plan.kernel.startswith(("optimized_sgemm", "batched_sgemm_tiled")):  # As[STAGES][BK][BM + APAD], Bs[..][BK][BN]
        return 4 * _define(src, "OPT_STAGES", d) * _define(src, "OPT_BK", d) * (
            _define(src, "OPT_BM") + _define(src, "OPT_APAD") + _define(src, "OPT_BN"))
    if plan.kernel.startswith(("warp_sgemm", "batched_sgemm_wtiled")):  # STAGES x (A tile + B tile), the source's sizes
        return 4 * _define(src, "WT_STAGES", d) * (_define(src, "WT_A_STAGE", d) + _define(src, "WT_B_STAGE", d))
    if plan.kernel.startswith("mma_hgemm"):  # halves: STAGES x (A_STAGE + B_STAGE)
        return 2 * _define(src, "MMA_STAGES", d) * (_define(src, "MMA_A_STAGE", d) + _define(src, "MMA_B_STAGE", d))
    if plan.kernel.startswith("batched_sgemm_reg"):  # per matrix: A TILE x KP, B KP x TILE floats
        tile, mats = _register_tile(plan)
        return 4 * mats * 2 * tile * ((k + 3) & ~3)
    if plan.kernel.startswith("batched_sgemm_small"):
        m, n = int(_bind(plan)["M"]), int(_bind(plan)["N"])
        return kernel_smem(m, n, k, int(_bind(plan)["group"]))
    return 0  # static __shared__ arrays only


# --- layout-only operands --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Data:
    ptr: int


@dataclass(frozen=True)
class FakeArray:
    """What the planners read of a CuPy array; no memory behind it."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    data: _Data


def matrix(rows: int, cols: int, *, ld: int | None = None, offset: int = 0, dtype: str = "float32",
           base: int = BASE) -> FakeArray:
    """A row-major matrix with leading dimension ``ld`` (elements), ``offset`` bytes past ``base``."""
    item = np.dtype(dtype).itemsize
    ld = cols if ld is None else ld
    return FakeArray((rows, cols), (ld * item, item), np.dtype(dtype), _Data(base + offset))


def stack(batch: int, rows: int, cols: int, *, ld: int | None = None, stride: int | None = None, offset: int = 0,
          base: int = BASE) -> FakeArray:
    """A float32 stack of matrices ``stride`` elements apart (default: packed)."""
    ld = cols if ld is None else ld
    stride = rows * ld if stride is None else stride
    return FakeArray((batch, rows, cols), (stride * 4, ld * 4, 4), np.dtype(np.float32), _Data(base + offset))


def gemm_operands(m: int, n: int, k: int, dtype: str = "float32") -> tuple[FakeArray, FakeArray, FakeArray]:
    return (matrix(m, k, dtype=dtype, base=BASE), matrix(k, n, dtype=dtype, base=2 * BASE),
            matrix(m, n, dtype=dtype, base=3 * BASE))


def batched_operands(batch: int, m: int, n: int, k: int) -> tuple[FakeArray, FakeArray, FakeArray]:
    return stack(batch, m, k, base=BASE), stack(batch, k, n, base=2 * BASE), stack(batch, m, n, base=3 * BASE)


class Uploaded:
    """Stands for the device array ``build_pointer_batch`` uploads; keeps the host addresses."""

    def __init__(self, host: np.ndarray) -> None:
        self.host = host


def pointers(mats: list[FakeArray]) -> PointerBatch:
    return build_pointer_batch(mats, Uploaded)


# --- what a launch writes ---------------------------------------------------------------------------------

def _block_outputs(plan: LaunchPlan) -> Iterator[tuple[slice, slice, slice]]:
    """(items, rows, columns) of C each block of ``plan`` writes, as its kernel's source defines them."""
    args = _bind(plan)
    m, n = int(args["M"]), int(args["N"])
    gx, gy, gz = plan.grid
    if plan.kernel.startswith(("batched_sgemm_small", "batched_sgemm_reg")):
        # block x: matrices first .. first + min(group, batch - first); a register-tiled block holds MATS
        batch = int(args["batch"])
        group = int(args["group"]) if "group" in args else _register_tile(plan)[1]
        for bx in range(gx):
            first = bx * group
            yield slice(first, min(first + group, batch)), slice(0, m), slice(0, n)
        return
    tile_m, tile_n = _block_tile(plan)
    offset = int(args.get("batch_offset", 0))  # the batched tiled kernel: product batch_offset + blockIdx.z
    group = _define(plan.source, "WT_SWIZZLE", plan.defines) if plan.kernel.startswith("warp_sgemm") else 0
    for by in range(gy):
        for bx in range(gx):  # rows and columns past M, N are skipped by the kernels' bounds checks
            ty, tx = swizzled_tile(bx, by, gx, gy, group)
            yield (slice(offset, offset + gz), slice(ty * tile_m, min((ty + 1) * tile_m, m)),
                   slice(tx * tile_n, min((tx + 1) * tile_n, n)))


def swizzled_tile(bx: int, by: int, gx: int, gy: int, group: int) -> tuple[int, int]:
    """(row tile, column tile) block (bx, by) of a gx x gy grid computes: warp_sgemm.cu's wt_tile_origin. With
    WT_SWIZZLE = group > 1 the linear id by * gx + bx walks ``group`` tile-rows down a column, then the next column;
    the last group of rows may be shorter."""
    if group <= 1:
        return by, bx
    first = by // group * group
    rows = min(group, gy - first)
    local = (by - first) * gx + bx
    return first + local % rows, local // rows


def assert_writes_each_output_once(plans: list[LaunchPlan], batch: int, m: int, n: int) -> None:
    """Every element of every product is written by exactly one block, and no block is idle."""
    counts = np.zeros((batch, m, n), dtype=np.int64)
    for plan in plans:
        assert plan.grid[1] <= GRID_YZ_LIMIT and plan.grid[2] <= GRID_YZ_LIMIT, f"{plan.grid} past CUDA's limits"
        for items, rows, cols in _block_outputs(plan):
            assert items.stop <= batch, f"{plan.kernel}: a block works on product {items.stop - 1} of {batch}"
            assert items.start < items.stop and rows.start < rows.stop and cols.start < cols.stop, \
                f"{plan.kernel} grid {plan.grid}: a block with nothing to write"
            counts[items, rows, cols] += 1
    missed, twice = int((counts == 0).sum()), int((counts > 1).sum())
    assert missed == 0 and twice == 0, f"{missed} outputs never written, {twice} written more than once"


def assert_block_fits_kernel(plan: LaunchPlan) -> None:
    """The block is the one the kernel's thread mapping assumes (its ``__launch_bounds__``), ≤ 1024."""
    threads = math.prod(plan.block)
    assert threads <= 1024
    bound = _launch_bound(plan)
    if bound is not None:
        assert threads == bound, f"{plan.kernel} is written for {bound} threads, the plan launches {plan.block}"
    if plan.kernel == "tiled_sgemm":
        tile = int(dict(plan.defines)["TILE"])
        assert plan.block == (tile, tile, 1), "tiled_sgemm indexes its TILE x TILE shared tiles by threadIdx"


def kernel_smem(m: int, n: int, k: int, group: int) -> int:
    """Bytes of shared memory batched_sgemm_small_* addresses for ``group`` matrices: As = group·M·(K|1)
    floats rounded up to a multiple of 4, then Bs = group·K·NP floats with NP = N rounded up to 4."""
    a_floats = (group * m * (k | 1) + 3) & ~3
    return 4 * (a_floats + group * k * ((n + 3) & ~3))


# --- the module stays pure ------------------------------------------------------------------------------

def test_planning_imports_nothing_gpu() -> None:
    """In a fresh interpreter: neither CuPy, the CUDA bindings, NVML nor the launching module."""
    code = ("import sys, kernels.custom_plan; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'cupy', 'cupy_backends', 'cuda', 'nvmath', 'pynvml'} or m == 'kernels.custom'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(custom_plan.__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


def test_geometry_matches_the_kernel_sources() -> None:
    assert custom_plan.OPT_TILE == _define("optimized_sgemm.cu", "OPT_BM") == _define("optimized_sgemm.cu", "OPT_BN")
    assert custom_plan.OPT_THREADS == _define("optimized_sgemm.cu", "OPT_THREADS")
    assert custom_plan.OPT_A_PAD == _define("optimized_sgemm.cu", "OPT_APAD")
    assert custom_plan.WT_A_PAD == _define("warp_sgemm.cu", "WT_APAD")
    plain_build = SGEMM_CONFIGS["bk16-s3"]  # what optimized_sgemm.cu compiles to without -D
    assert (plain_build.bk, plain_build.stages) == (_define("optimized_sgemm.cu", "OPT_BK"),
                                                    _define("optimized_sgemm.cu", "OPT_STAGES"))
    assert custom_plan.MMA_BK == _define("mma_hgemm.cu", "MMA_BK")
    plain_mma = MMA_CONFIGS[PLAIN_MMA]
    assert plain_mma.defines == tuple((name, str(_define("mma_hgemm.cu", name))) for name, _ in plain_mma.defines)
    assert custom_plan.REG_THREAD_ROWS == _define("batched_sgemm.cu", "BR_THREAD_ROWS")
    assert custom_plan.REG_THREAD_COLS == _define("batched_sgemm.cu", "BR_THREAD_COLS")
    assert custom_plan.REG_MAX_K == _define("batched_sgemm.cu", "BR_MAX_K")
    for cls in REG_CLASSES:
        assert cls.tile == _define("batched_sgemm.cu", f"BR{cls.tile}_TILE")
        assert cls.defines == ((f"BR{cls.tile}_MATS", str(_define("batched_sgemm.cu", f"BR{cls.tile}_MATS"))),)
        assert cls.threads == _define("batched_sgemm.cu", f"BR{cls.tile}_THREADS")
    assert custom_plan.WMMA_TILE == _define("wmma_hgemm.cu", "WM_BM") == _define("wmma_hgemm.cu", "WM_BN")
    assert custom_plan.WMMA_THREADS == _define("wmma_hgemm.cu", "WM_THREADS")
    assert custom_plan.SMALL_THREADS == _define("batched_sgemm.cu", "BS_THREADS")
    assert custom_plan.SMALL_BLOCK_SMEM <= SMEM_LIMIT
    assert all(tile * tile <= 1024 for tile in custom_plan.TILED_TILES)
    assert _define("tiled_sgemm.cu", "TILE") == 16 in custom_plan.TILED_TILES


# --- grids -----------------------------------------------------------------------------------------------

def test_ceil_div() -> None:
    for b in (1, 4, 16, 128, 65535):
        for a in (0, 1, b - 1, b, b + 1, 3 * b, 3 * b + 1):
            assert ceil_div(a, b) == math.ceil(a / b), (a, b)


def test_tile_grid_walks_columns_in_x() -> None:
    assert tile_grid(129, 127, 16) == (8, 9, 1)
    assert tile_grid(128, 256, 128) == (2, 1, 1)
    assert tile_grid(1, 1, 128) == (1, 1, 1)


GEMM_SHAPES = [(1, 1, 1), (7, 5, 3), (1, 300, 1), (300, 1, 2), (33, 17, 65), (127, 129, 31), (129, 127, 257),
               (200, 136, 72), (16, 16, 16), (128, 256, 8), (256, 128, 1), (512, 384, 5)]
GEMM_KINDS = [("naive", {}), ("tiled", {"tile": 8}), ("tiled", {"tile": 16}), ("tiled", {"tile": 32}),
              ("optimized", {}), ("wmma", {}), ("mma", {}),
              *(("optimized", {"config": name}) for name in SGEMM_CONFIGS),
              *(("mma", {"config": name}) for name in MMA_CONFIGS)]
FP16_KINDS = {"wmma", "mma"}


@pytest.mark.parametrize(("kind", "options"), GEMM_KINDS, ids=lambda x: str(x) if x else "")
def test_gemm_plan_writes_each_output_once(kind: str, options: dict[str, int]) -> None:
    """Every shape of ``GEMM_SHAPES`` in one test per kernel (a failure names its shape)."""
    for m, n, k in GEMM_SHAPES:
        a, b, c = gemm_operands(m, n, k, "float16" if kind in FP16_KINDS else "float32")
        plan = GEMM_PLANNERS[kind](a, b, c, alpha=-1.5, beta=0.75, **options)
        shape = f"{m}x{n}x{k}"
        assert_block_fits_kernel(plan)
        assert_writes_each_output_once([plan], 1, m, n)
        args = _bind(plan)
        assert (args["M"], args["N"], args["K"]) == (m, n, k), shape
        assert (args["lda"], args["ldb"], args["ldc"]) == (k, n, n), shape
        assert args["A"] is a and args["B"] is b and args["C"] is c, shape
        assert (args["alpha"], args["beta"]) == (np.float32(-1.5), np.float32(0.75)), shape
        assert plan.shared_mem == kernel_shared_bytes(plan, k), shape


@pytest.mark.parametrize(("planner", "table", "default"), [(plan_optimized, SGEMM_CONFIGS, SGEMM_DEFAULT),
                                                           (plan_mma, MMA_CONFIGS, MMA_DEFAULT)])
def test_pipelined_plans_build_the_config_they_launch(planner: Any, table: dict[str, Any], default: str) -> None:
    """A config's defines reach the compiler, its ring fits an SM (227 KB of shared memory per block on
    sm_90, the opt-in launch raises it to), and the default is the sources' own build."""
    dtype = "float16" if planner is plan_mma else "float32"
    for name, build in table.items():
        plan = planner(*gemm_operands(300, 200, 100, dtype), config=name)
        assert plan.defines == build.defines
        assert 0 < plan.shared_mem == kernel_shared_bytes(plan, 100) <= 227 * 1024
    assert planner(*gemm_operands(3, 2, 1, dtype)).defines == table[default].defines


def test_tiled_plan_builds_the_tile_it_launches() -> None:
    for tile in (8, 16, 32):
        plan = plan_tiled(*gemm_operands(40, 50, 60), tile=tile)
        assert plan.defines == (("TILE", str(tile)),)
        assert plan.block == (tile, tile, 1)
    assert plan_tiled(*gemm_operands(4, 4, 4)).defines == (("TILE", "16"),)


BATCHED_SHAPES = [(1, 1, 1, 1), (1, 7, 5, 3), (3, 7, 5, 3), (37, 8, 8, 8), (9, 32, 32, 32), (300, 2, 3, 4),
                  (1, 32, 32, 32), (7, 17, 29, 64), (6, 64, 64, 64), (3, 33, 64, 1), (2, 1, 64, 64), (66000, 16, 16, 2),
                  (66000, 2, 3, 4), (66000, 1, 1, 1), (1000, 1, 1, 64), (3, 64, 64, 47), (3, 64, 64, 48),
                  (5, 33, 17, 65), (4, 127, 129, 31), (2, 129, 127, 257), (65535, 2, 3, 65), (65536, 2, 3, 65),
                  (66000, 2, 3, 65)]


@pytest.mark.parametrize("shape", BATCHED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_batched_plan_writes_each_output_once(shape: tuple[int, int, int, int]) -> None:
    batch, m, n, k = shape
    a, b, c = batched_operands(batch, m, n, k)
    plans = plan_batched(a, b, c, alpha=0.5, beta=-2.0)
    for plan in plans:
        assert_block_fits_kernel(plan)
        args = _bind(plan)
        assert (args["M"], args["N"], args["K"]) == (m, n, k)
        assert (args["lda"], args["ldb"], args["ldc"]) == (k, n, n)
        assert (args["strideA"], args["strideB"], args["strideC"]) == ((m * k, k * n, m * n) if batch > 1 else (0, 0, 0))
        assert args["A"] is a and args["B"] is b and args["C"] is c
        assert args["Aarray"] == args["Barray"] == args["Carray"] == 0
    assert_writes_each_output_once(plans, batch, m, n)


@pytest.mark.parametrize("shape", BATCHED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_batched_plan_runs_the_kernel_of_its_path(shape: tuple[int, int, int, int]) -> None:
    batch, m, n, k = shape
    plans = plan_batched(*batched_operands(batch, m, n, k))
    path = batched_path(m, n, k, batch)
    for plan in plans:
        assert plan.kernel.startswith(f"{_batched_kernel(path)}_")
        assert plan.shared_mem == kernel_shared_bytes(plan, k)
        assert plan.shared_mem <= (SMEM_LIMIT if path == "small" else 227 * 1024)
    if path == "tiled":
        assert [(int(_bind(p)["batch_offset"]), p.grid[2]) for p in plans] == batch_chunks(batch)
    elif path == "small":
        [plan] = plans
        assert int(_bind(plan)["group"]) == small_batched_group(m, n, k, batch) and int(_bind(plan)["batch"]) == batch
    else:
        [plan] = plans
        assert int(_bind(plan)["batch"]) == batch
    default_defines = (*(d for c in REG_CLASSES for d in c.defines), *SGEMM_CONFIGS[BATCHED_TILED_DEFAULT].defines)
    assert all(p.defines == default_defines for p in plans), "every default path shares one module"


def test_batched_path_contract() -> None:
    """The first register-tiled class whose tile holds M x N (K ≤ 64) and is at least a quarter full; else
    the small kernel where a group fits; else the 128 x 128 tiled kernel."""
    for m in SIZES:
        for n in SIZES:
            for k in SIZES:
                path = batched_path(m, n, k, 300)
                fits = [tile for tile in (32, 64) if max(m, n) <= tile and k <= 64 and 4 * m * n >= tile * tile]
                if fits:
                    assert path == f"reg{fits[0]}", (m, n, k, path)
                else:
                    assert path == ("small" if small_batched_group(m, n, k, 300) is not None else "tiled"), (m, n, k)


@pytest.mark.parametrize(("shape", "path"), [
    ((32, 32, 32), "reg32"), ((64, 64, 64), "reg64"), ((8, 8, 8), "small"), ((16, 16, 16), "reg32"),
    ((15, 16, 16), "small"),  # below a quarter of the 32 x 32 tile
    ((33, 32, 32), "reg64"), ((32, 31, 64), "reg32"), ((32, 32, 65), "tiled"), ((24, 30, 65), "tiled"),
    ((128, 128, 128), "tiled"), ((256, 256, 256), "tiled"), ((65, 8, 8), "tiled"),
])
def test_batched_path_examples(shape: tuple[int, int, int], path: str) -> None:
    assert batched_path(*shape, 1000) == path


@pytest.mark.parametrize("path", BATCHED_PATHS)
@pytest.mark.parametrize("shape", [(5, 32, 32, 32), (9, 7, 5, 3), (3, 64, 64, 64), (2, 64, 1, 64)],
                         ids=lambda s: "x".join(map(str, s)))
def test_batched_plan_forced_path(path: str, shape: tuple[int, int, int, int]) -> None:
    """Every path that can take a shape runs it correctly when forced (the probe compares them); one that
    cannot says so."""
    batch, m, n, k = shape
    operands = batched_operands(batch, m, n, k)
    tile = {"reg32": 32, "reg64": 64}.get(path)
    cannot = (tile is not None and (max(m, n) > tile or k > 64)) or (
        path == "small" and small_batched_group(m, n, k, batch) is None)
    if cannot:
        with pytest.raises(KernelArgumentError, match=rf"batched_sgemm {path}: cannot take {m}x{n}x{k}"):
            plan_batched(*operands, path=path)
        return
    plans = plan_batched(*operands, path=path)
    for plan in plans:
        assert plan.kernel.startswith(f"{_batched_kernel(path)}_")
        assert_block_fits_kernel(plan)
        assert plan.shared_mem == kernel_shared_bytes(plan, k)
    assert_writes_each_output_once(plans, batch, m, n)


@pytest.mark.parametrize(("path", "mats"), [("reg32", 1), ("reg32", 8), ("reg64", 2), ("reg64", 8)])
def test_batched_plan_matrices_per_block(path: str, mats: int) -> None:
    batch, m, n, k = 19, 30, 31, 33
    plans = plan_batched(*batched_operands(batch, m, n, k), path=path, mats=mats)
    [plan] = plans
    tile = int(path[3:])
    assert dict(plan.defines)[f"BR{tile}_MATS"] == str(mats)
    assert plan.grid == (ceil_div(batch, mats), 1, 1)
    assert_block_fits_kernel(plan)
    assert plan.shared_mem == kernel_shared_bytes(plan, k)
    assert_writes_each_output_once(plans, batch, m, n)


def test_batched_tiled_plan_builds_the_sgemm_config() -> None:
    for name, build in SGEMM_CONFIGS.items():
        plans = plan_batched(*batched_operands(3, 129, 127, 257), config=name)
        for plan in plans:
            assert set(build.defines) <= set(plan.defines)
            assert plan.shared_mem == kernel_shared_bytes(plan, 257)
            assert plan.kernel.startswith(f"{build.batched_kernel}_")
            assert_block_fits_kernel(plan)
        assert_writes_each_output_once(plans, 3, 129, 127)


#: WarpSgemmConfig's options and the warp_sgemm.cu defines they set.
WT_OPTIONS = {"a_kmajor": "WT_A_KMAJOR", "fast": "WT_FAST", "pipe": "WT_PIPE", "swizzle": "WT_SWIZZLE"}


@pytest.mark.parametrize("name", [n for n, b in SGEMM_CONFIGS.items() if isinstance(b, WarpSgemmConfig)])
def test_warp_sgemm_builds_satisfy_the_kernels_layout(name: str) -> None:
    """What warp_sgemm.cu's static_asserts demand of a build (whole float4 quads per thread, loaders that cover
    each tile once with a fixed column per thread), the layout the docs state, and room for its blocks per SM
    (228 KB of shared memory with 1 KB per block, 64 K registers: at most 255 per thread, 8-register granules)."""
    build = SGEMM_CONFIGS[name]
    assert isinstance(build, WarpSgemmConfig)
    d = build.defines
    assert build.tile == (_define("warp_sgemm.cu", "WT_BM", d), _define("warp_sgemm.cu", "WT_BN", d))
    assert build.threads == _define("warp_sgemm.cu", "WT_THREADS", d) <= 1024
    geometry, options = d[:8], dict(d[8:])
    assert set(options) <= set(WT_OPTIONS.values()) and len(options) == len(d) - 8
    rebuilt = WarpSgemmConfig(*(int(v) for _, v in geometry), a_kmajor=options.get("WT_A_KMAJOR") == "1",
                              fast=options.get("WT_FAST") == "1", pipe=options.get("WT_PIPE") == "1",
                              swizzle=int(options.get("WT_SWIZZLE", 0)))
    assert (rebuilt.name, rebuilt) == (name, build)
    lanes_n = 32 // build.lanes_m
    rows, cols = build.thread_tile
    assert build.lanes_m in (4, 8) and rows % 4 == 0 and cols % 4 == 0
    assert rows * build.lanes_m * build.warps_m == build.bm and cols * lanes_n * build.warps_n == build.bn
    warps, kb = build.warps_m * build.warps_n, build.bk // 8
    assert build.bk % 8 == 0 and build.bm % 32 == 0 and build.stages >= 2
    if build.a_kmajor:  # one 16-byte k chunk per copy, CH = bk / 4 threads per row
        chunks = build.bk // 4
        assert build.threads % chunks == 0 and (build.bm * chunks) % build.threads == 0 and not build.pipe
        fragments = 2 * 4 * cols + 4  # B of two 4-k chunks, one row of A
    else:  # 16 rows x 8 k per warp and load
        a_loads, a_row_step = build.bm * build.bk // (4 * build.threads), 16 * warps // kb
        assert warps % kb == 0 and a_loads >= 1 and a_loads * a_row_step == build.bm
        fragments = 2 * (rows + cols)  # two fragment sets
    assert 0 <= build.swizzle <= 64 and build.swizzle != 1
    b_chunks = build.bn // 4
    assert build.threads % b_chunks == 0 and (build.bk * b_chunks // build.threads) * (build.threads // b_chunks) == build.bk
    assert build.min_blocks * (build.shared_bytes + 1024) <= 228 * 1024
    registers = rows * cols + fragments  # accumulators and fragments, before addresses
    assert registers < min(255, 65536 // (build.min_blocks * build.threads))


def test_warp_sgemm_options_are_off_by_default() -> None:
    """A build without options passes none of their defines and its name has no option suffix, and the source's
    defaults for them are off: a build without options compiles as the source alone would."""
    for define in WT_OPTIONS.values():
        assert _define("warp_sgemm.cu", define) == 0
    build = WarpSgemmConfig(128, 256, 16, 3, 2, 4, 4, 1)
    assert build.name == "wt128x256-t16x8-bk16-s3" and SGEMM_CONFIGS[build.name] == build
    assert [key for key, _ in build.defines] == ["WT_BM", "WT_BN", "WT_BK", "WT_STAGES", "WT_WARPS_M", "WT_WARPS_N",
                                                  "WT_LANES_M", "WT_MIN_BLOCKS"]
    assert build.shared_bytes == 3 * 16 * (128 + 4 + 256) * 4


@pytest.mark.parametrize(("options", "suffix", "extra"), [
    ({"a_kmajor": True}, "-ak", (("WT_A_KMAJOR", "1"),)),
    ({"fast": True}, "-fast", (("WT_FAST", "1"),)),
    ({"fast": True, "pipe": True}, "-fast-pipe", (("WT_FAST", "1"), ("WT_PIPE", "1"))),
    ({"swizzle": 16}, "-sw16", (("WT_SWIZZLE", "16"),)),
    ({"a_kmajor": True, "fast": True, "swizzle": 8}, "-ak-fast-sw8",
     (("WT_A_KMAJOR", "1"), ("WT_FAST", "1"), ("WT_SWIZZLE", "8"))),
])
def test_warp_sgemm_options_name_defines_and_shared_bytes(options: dict[str, Any], suffix: str,
                                                           extra: tuple[tuple[str, str], ...]) -> None:
    """An option appears in the name and the defines only when set; the ring is the source's layout (A k-major:
    bm x (bk + 4) floats per stage instead of bk x (bm + 4))."""
    build = WarpSgemmConfig(128, 256, 8, 3, 2, 4, 4, 1, **options)
    plain = WarpSgemmConfig(128, 256, 8, 3, 2, 4, 4, 1)
    assert build.name == plain.name + suffix and build.defines == plain.defines + extra
    a_tile = 128 * (8 + 4) if options.get("a_kmajor") else 8 * (128 + 4)
    assert build.shared_bytes == 3 * (a_tile + 8 * 256) * 4
    plan = LaunchPlan("warp_sgemm.cu", "warp_sgemm_vec4", (1, 1, 1), (256, 1, 1), (), build.shared_bytes, build.defines)
    assert kernel_shared_bytes(plan, 100) == build.shared_bytes


@pytest.mark.parametrize("group", [2, 3, 8, 16, 64])
def test_swizzle_walks_every_tile_once_in_groups_of_rows(group: int) -> None:
    """wt_tile_origin's order, block id by block id (x fastest): groups of ``group`` tile-rows (the last may be
    shorter), each walked column by column, every row of the group within a column: a bijection of the grid."""
    for gx, gy in ((1, 1), (16, 32), (3, 18), (5, 7), (7, 65), (1, 100), (40, 2)):
        seen = [swizzled_tile(i % gx, i // gx, gx, gy, group) for i in range(gx * gy)]
        expected = [(first + r, c) for first in range(0, gy, group) for c in range(gx)
                    for r in range(min(group, gy - first))]
        assert seen == expected
        assert sorted(seen) == [(y, x) for y in range(gy) for x in range(gx)]


def test_swizzled_builds_write_each_output_once() -> None:
    for name, build in SGEMM_CONFIGS.items():
        if not (isinstance(build, WarpSgemmConfig) and build.swizzle):
            continue
        for m, n, k in ((1, 1, 1), (4096, 4096, 64), (2181, 520, 24), (130, 3000, 7)):
            plan = plan_optimized(*gemm_operands(m, n, k), config=name)
            assert ("WT_SWIZZLE", str(build.swizzle)) in plan.defines
            assert_writes_each_output_once([plan], 1, m, n)


def _mma_name(build: custom_plan.MmaConfig) -> str:
    """The MMA_CONFIGS naming convention: ``<bm>x<bn>[w<warps>][-k64]-s<stages>[-pipe][-fast]`` (``w`` only when the
    warp tile is not 64 x 64)."""
    warps = build.warps_m * build.warps_n
    tile64 = build.bm // build.warps_m == 64 and build.bn // build.warps_n == 64
    return (f"{build.bm}x{build.bn}" + ("" if tile64 else f"w{warps}") + (f"-k{build.bk}" if build.bk != 32 else "")
            + f"-s{build.stages}" + ("-pipe" if build.pipe else "") + ("-fast" if build.fast else ""))


@pytest.mark.parametrize("name", list(MMA_CONFIGS))
def test_mma_builds_satisfy_the_kernels_layout(name: str) -> None:
    """mma_hgemm.cu's static_asserts, the blocks per SM a build promises, the table's naming convention, and that
    MMA_BK / MMA_PIPE / MMA_FAST are passed only when they differ from the source's defaults (so the default
    build's defines never change)."""
    build = MMA_CONFIGS[name]
    assert name == _mma_name(build)
    assert not (build.fast and build.pipe)  # MMA_FAST is the plain loop's (a static_assert)
    assert build.bk in (32, 64) and build.stages >= 2
    threads, a_chunks, b_chunks = build.threads, build.bk // 8, build.bn // 8
    assert (build.bm * a_chunks) % threads == 0 and (build.bk * b_chunks) % threads == 0
    assert threads % b_chunks == 0 and threads % a_chunks == 0 and (threads // a_chunks) % 8 == 0
    assert (build.bm // build.warps_m) % 16 == 0 and (build.bn // build.warps_n) % 16 == 0 and build.bn % 64 == 0
    assert build.min_blocks * (build.shared_bytes + 1024) <= 228 * 1024
    names = [key for key, _ in build.defines]
    assert ("MMA_BK" in names) == (build.bk != _define("mma_hgemm.cu", "MMA_BK"))
    assert ("MMA_PIPE" in names) == (build.pipe != bool(_define("mma_hgemm.cu", "MMA_PIPE")))
    assert ("MMA_FAST" in names) == (build.fast != bool(_define("mma_hgemm.cu", "MMA_FAST")))


def test_mma_fast_option_is_off_by_default_and_named() -> None:
    """MMA_FAST is 0 in the source and off in MmaConfig: a build without it (the plain 128x128-s4 among them) passes no
    MMA_FAST, and its defines are those it had before the option; ``fast`` adds ("MMA_FAST", "1") last, keeps the
    kernel, threads and shared memory, and names the build ``...-fast``."""
    assert _define("mma_hgemm.cu", "MMA_FAST") == 0
    assert custom_plan.MmaConfig(128, 128, 2, 2, 4, 2).fast is False
    default = MMA_CONFIGS[PLAIN_MMA]
    assert not default.fast and default.defines == (
        ("MMA_BM", "128"), ("MMA_BN", "128"), ("MMA_WARPS_M", "2"), ("MMA_WARPS_N", "2"), ("MMA_STAGES", "4"),
        ("MMA_MIN_BLOCKS", "2"))
    fast = MMA_CONFIGS["128x128-s4-fast"]
    assert fast == custom_plan.MmaConfig(128, 128, 2, 2, 4, 2, fast=True)
    assert fast.defines == (*default.defines, ("MMA_FAST", "1"))
    assert (fast.threads, fast.shared_bytes) == (default.threads, default.shared_bytes)
    k64 = custom_plan.MmaConfig(128, 128, 2, 2, 3, 2, bk=64, fast=True)
    assert k64.defines[-2:] == (("MMA_BK", "64"), ("MMA_FAST", "1")) and _mma_name(k64) == "128x128-k64-s3-fast"
    assert {n for n, b in MMA_CONFIGS.items() if b.fast} >= {"128x128-s4-fast"}
    for name, build in MMA_CONFIGS.items():
        assert name.endswith("-fast") == build.fast
    for shape in ((1, 1, 1), (4096, 4096, 4096), (130, 260, 36)):
        for misaligned in (False, True):
            a, b, c = gemm_operands(*shape, "float16")
            if misaligned:
                a = matrix(shape[0], shape[2], dtype="float16", ld=shape[2] + 1)
            plain, quick = (plan_mma(a, b, c, config=n) for n in (PLAIN_MMA, "128x128-s4-fast"))
            assert (quick.kernel, quick.grid, quick.block, quick.shared_mem, quick.args) == (
                plain.kernel, plain.grid, plain.block, plain.shared_mem, plain.args)
            assert quick.defines == (*plain.defines, ("MMA_FAST", "1"))
            assert not misaligned or quick.kernel == "mma_hgemm_scalar"


def test_batch_chunks_split_at_the_grid_z_limit() -> None:
    assert batch_chunks(1) == [(0, 1)]
    assert batch_chunks(65535) == [(0, 65535)]
    assert batch_chunks(65536) == [(0, 65535), (65535, 1)]
    assert batch_chunks(66000) == [(0, 65535), (65535, 465)]
    assert batch_chunks(3 * 65535 + 2) == [(0, 65535), (65535, 65535), (131070, 65535), (196605, 2)]


# --- the small batched kernel's group -------------------------------------------------------------------

SIZES = (1, 2, 3, 4, 5, 8, 17, 32, 33, 47, 48, 63, 64, 65)
BATCHES = (1, 2, 7, 16, 17, 300, 66000)


def test_small_batched_smem_is_the_kernels_layout() -> None:
    for m in SIZES:
        for n in SIZES:
            for k in SIZES:
                for group in (1, 2, 3, 7, 256):
                    assert small_batched_smem(m, n, k, group) == kernel_smem(m, n, k, group), (m, n, k, group)


def test_small_batched_group_contract() -> None:
    """Small kernel iff every dimension ≤ 64 and one matrix's A and B stage in ≤ 24 KB; the group is the
    most matrices (≤ batch) that leave each of the 256 threads at most one 4-wide strip of C and fit
    48 KB of dynamic shared memory; at least one."""
    threads = _define("batched_sgemm.cu", "BS_THREADS")
    for m in SIZES:
        for n in SIZES:
            for k in SIZES:
                small = max(m, n, k) <= 64 and kernel_smem(m, n, k, 1) <= 24 * 1024
                strips = m * ceil_div(n, 4)
                for batch in BATCHES:
                    group = small_batched_group(m, n, k, batch)
                    where = (m, n, k, batch, group)
                    assert (group is not None) == small, where
                    if group is None:
                        continue
                    assert 1 <= group <= batch, where
                    assert group == 1 or group * strips <= threads, where
                    assert kernel_smem(m, n, k, group) <= SMEM_LIMIT, where
                    assert (group == batch or (group + 1) * strips > threads
                            or kernel_smem(m, n, k, group + 1) > SMEM_LIMIT), f"{where}: a larger group fits"


@pytest.mark.parametrize(("shape", "batch", "group"), [
    ((8, 8, 8), 100000, 16),  # 16 strips per matrix: 16 matrices give 256 threads one strip each
    ((8, 8, 8), 5, 5),  # never more than the batch
    ((32, 32, 32), 10000, 1),  # 256 strips: a block per matrix
    ((2, 3, 4), 66000, 128),
    ((1, 1, 1), 66000, 256),
    ((1, 1, 64), 1000, 38),  # shared memory binds: 38 matrices take 48 800 B, 39 would take 50 080 B
    ((64, 64, 47), 3, 1),  # more strips than threads: still one whole matrix per block
])
def test_small_batched_group_examples(shape: tuple[int, int, int], batch: int, group: int) -> None:
    assert small_batched_group(*shape, batch) == group


@pytest.mark.parametrize("shape", [(65, 1, 1), (1, 65, 1), (1, 1, 65), (64, 64, 48), (64, 64, 64)])
def test_small_batched_group_leaves_larger_matrices_to_the_tiled_kernel(shape: tuple[int, int, int]) -> None:
    assert small_batched_group(*shape, 10) is None


def test_small_batched_group_boundaries() -> None:
    assert small_batched_group(64, 1, 1, 10) is not None
    assert small_batched_group(64, 64, 47, 10) is not None  # 24 064 B staged ≤ 24 KB
    assert kernel_smem(64, 64, 48, 1) == 24832  # > 24 KB: tiled
    exact = [(m, n, k) for m in range(1, 65) for n in (32, 48, 64) for k in range(1, 65)
             if kernel_smem(m, n, k, 1) == 24 * 1024]
    assert exact, "no shape stages exactly 24 KB"
    assert all(small_batched_group(*shape, 1) == 1 for shape in exact)


# --- vector kernels only where their 16-byte accesses are aligned ---------------------------------------

def _gemm_layouts(dtype: str, lane: int) -> dict[str, tuple[int, int]]:
    """(ld pad in elements, byte offset) variants of one operand; ``lane``: elements per 16 bytes."""
    item = np.dtype(dtype).itemsize
    return {
        "aligned": (lane, 0),  # ld > cols, still a multiple of 16 bytes
        "odd-ld": (1, 0),
        "half-vector-ld": (lane // 2, 0),  # rows 8 bytes apart: aligned for a narrower vector only
        "misaligned-start": (0, item),
        "half-vector-start": (0, 8),
    }


def _aligned_gemm(m: int, n: int, k: int, dtype: str, lane: int, operand: str, layout: tuple[int, int]
                  ) -> tuple[FakeArray, FakeArray, FakeArray]:
    """A (m x k), B (k x n), C (m x n) with aligned leading dimensions; ``operand`` gets ``layout``."""
    shapes = {"A": (m, k), "B": (k, n), "C": (m, n)}
    out = []
    for i, (name, (rows, cols)) in enumerate(shapes.items()):
        ld = ceil_div(cols, lane) * lane
        pad, offset = layout if name == operand else (0, 0)
        out.append(matrix(rows, cols, ld=ld + pad, offset=offset, dtype=dtype, base=(i + 1) * BASE))
    return out[0], out[1], out[2]


@pytest.mark.parametrize("operand", ["A", "B", "C"])
@pytest.mark.parametrize("layout", list(_gemm_layouts("float32", 4)))
@pytest.mark.parametrize(("planner", "dtype", "lane", "vector", "scalar"), [
    (plan_optimized, "float32", 4, f"{DEFAULT_SGEMM_KERNEL}_vec4", f"{DEFAULT_SGEMM_KERNEL}_scalar"),
    (plan_wmma, "float16", 8, "wmma_hgemm_vec8", "wmma_hgemm_scalar"),
    (plan_mma, "float16", 8, "mma_hgemm_vec8", "mma_hgemm_scalar"),
])
def test_vector_kernel_only_when_every_row_is_16_byte_aligned(planner: Any, dtype: str, lane: int, vector: str,
                                                             scalar: str, layout: str, operand: str) -> None:
    pad_offset = _gemm_layouts(dtype, lane)[layout]
    a, b, c = _aligned_gemm(33, 17, 65, dtype, lane, operand, pad_offset)
    plan = planner(a, b, c)
    assert plan.kernel == (vector if layout == "aligned" else scalar)
    twin = planner(*_aligned_gemm(33, 17, 65, dtype, lane, operand, (1, 0)))
    assert twin.kernel == scalar
    assert (plan.grid, plan.block, plan.source) == (twin.grid, twin.block, twin.source)


BATCHED_PATH_SHAPES = [(9, 8, 8, 8), (4, 127, 129, 31), (5, 32, 32, 32), (3, 64, 64, 64)]  # small, tiled, reg32, reg64


@pytest.mark.parametrize("shape", BATCHED_PATH_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize(("operand", "ld_pad", "stride_pad", "offset", "vector"), [
    ("A", 0, 0, 0, True),
    ("A", 1, 0, 0, False),
    ("B", 2, 0, 0, False),
    ("C", 0, 1, 0, False),  # every row aligned in the first matrix only
    ("C", 0, 2, 0, False),
    ("B", 0, 4, 0, True),  # a padded batch stride that keeps 16 bytes
    ("A", 0, 0, 4, False),
    ("C", 0, 0, 8, False),
])
def test_batched_vector_kernel_only_when_every_matrix_is_aligned(shape: tuple[int, int, int, int], operand: str,
                                                                ld_pad: int, stride_pad: int, offset: int,
                                                                vector: bool) -> None:
    batch, m, n, k = shape
    dims = {"A": (m, k), "B": (k, n), "C": (m, n)}
    ops = []
    for i, (name, (rows, cols)) in enumerate(dims.items()):
        ld = ceil_div(cols, 4) * 4 + (ld_pad if name == operand else 0)
        stride = rows * ld + (stride_pad if name == operand else 0)
        ops.append(stack(batch, rows, cols, ld=ld, stride=stride, offset=offset if name == operand else 0,
                         base=(i + 1) * BASE))
    a, b, c = ops
    plans = plan_batched(a, b, c)
    assert all(p.kernel.endswith("_vec4" if vector else "_scalar") for p in plans), [p.kernel for p in plans]


def test_batched_vector_kernel_with_a_shared_operand() -> None:
    shared_a = stack(6, 8, 8, stride=0)
    assert plan_batched(shared_a, stack(6, 8, 8, base=2 * BASE), stack(6, 8, 8, base=3 * BASE))[0].kernel \
        == "batched_sgemm_small_vec4"
    shared_odd = stack(6, 8, 8, stride=0, offset=4)
    assert plan_batched(shared_odd, stack(6, 8, 8, base=2 * BASE), stack(6, 8, 8, base=3 * BASE))[0].kernel \
        == "batched_sgemm_small_scalar"


@pytest.mark.parametrize("shape", BATCHED_PATH_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_pointer_batches_take_the_vector_kernel_only_when_every_matrix_is_aligned(
        shape: tuple[int, int, int, int]) -> None:
    batch, m, n, k = shape

    def batch_of(rows: int, cols: int, base: int, misaligned: int | None = None) -> PointerBatch:
        ld = ceil_div(cols, 4) * 4
        return pointers([matrix(rows, cols, ld=ld, base=base, offset=i * 2**20 + (4 if i == misaligned else 0))
                         for i in range(batch)])

    a, b, c = batch_of(m, k, BASE), batch_of(k, n, 2 * BASE), batch_of(m, n, 3 * BASE)
    plans = plan_batched(a, b, c)
    assert all(p.kernel.endswith("_vec4") for p in plans)
    args = _bind(plans[0])
    assert args["A"] == args["B"] == args["C"] == 0
    assert (args["Aarray"], args["Barray"], args["Carray"]) == (a.pointers, b.pointers, c.pointers)
    assert_writes_each_output_once(plans, batch, m, n)
    for operand in "ABC":
        odd = {"A": a, "B": b, "C": c, operand: batch_of(*(
            {"A": (m, k), "B": (k, n), "C": (m, n)}[operand]), base=BASE * 5, misaligned=batch - 1)}
        assert all(p.kernel.endswith("_scalar") for p in plan_batched(odd["A"], odd["B"], odd["C"])), operand


def test_the_gpu_suite_runs_both_paths() -> None:
    """custom.yaml's correctness variants reach the vector kernels (ld-aligned) and the scalar ones (ld-odd)."""
    variants = load_cases("custom")["correctness"]["variants"]

    def ld(cols: int, pad: object) -> int:
        return ceil_div(cols, 8) * 8 + 8 if pad == "aligned" else cols + int(str(pad))

    kernels = set()
    for variant in variants.values():
        for planner, dtype in ((plan_optimized, "float32"), (plan_wmma, "float16"), (plan_mma, "float16")):
            m, n, k = 33, 17, 65
            a = matrix(m, k, ld=ld(k, variant["pad"]), dtype=dtype)
            b = matrix(k, n, ld=ld(n, variant["pad"]), dtype=dtype, base=2 * BASE)
            c = matrix(m, n, ld=ld(n, variant["pad"]), dtype=dtype, base=3 * BASE)
            kernels.add(planner(a, b, c).kernel)
    assert kernels == {f"{DEFAULT_SGEMM_KERNEL}_vec4", f"{DEFAULT_SGEMM_KERNEL}_scalar", "wmma_hgemm_vec8", "wmma_hgemm_scalar",
                       "mma_hgemm_vec8", "mma_hgemm_scalar"}


# --- pointer batches -------------------------------------------------------------------------------------

def test_build_pointer_batch_uploads_the_addresses_in_order() -> None:
    mats = [matrix(3, 5, ld=8, base=BASE + i * 256) for i in (2, 0, 1)]
    batch = pointers(mats)
    assert isinstance(batch.pointers, Uploaded)
    assert batch.pointers.host.dtype == np.uint64
    assert batch.pointers.host.tolist() == [BASE + 512, BASE, BASE + 256]
    assert batch.addresses == (BASE + 512, BASE, BASE + 256)
    assert (batch.batch, batch.rows, batch.cols, batch.ld, batch.dtype) == (3, 3, 5, 8, np.dtype(np.float32))
    assert batch.aligned16 and batch.arrays == tuple(mats)


@pytest.mark.parametrize(("ld", "stride", "offset"), [(None, None, 0), (7, 40, 0), (8, 64, 0), (8, 64, 4)])
def test_a_stack_pointer_batch_is_the_batch_of_its_items_views(ld: int | None, stride: int | None,
                                                               offset: int) -> None:
    rows, cols = 5, 7
    whole = stack(6, rows, cols, ld=ld, stride=stride, offset=offset)
    order = [3, 0, 5, 1]
    item_stride = whole.strides[0]
    views = [matrix(rows, cols, ld=ld, offset=offset + i * item_stride) for i in order]
    expected, got = pointers(views), build_stack_pointer_batch(whole, order, Uploaded)
    assert got.pointers.host.tolist() == expected.pointers.host.tolist()
    assert (got.batch, got.rows, got.cols, got.ld, got.dtype, got.aligned16, got.addresses) == \
        (expected.batch, expected.rows, expected.cols, expected.ld, expected.dtype, expected.aligned16,
         expected.addresses)
    assert got.arrays == (whole,)


@pytest.mark.parametrize(("order", "message"), [([], r"no matrices"), ([0, 6], r"outside the stack's 6 matrices"),
                                                ([-1], r"outside the stack's 6 matrices")])
def test_a_stack_pointer_batch_refuses_an_order_off_the_stack(order: list[int], message: str) -> None:
    with pytest.raises(KernelArgumentError, match=message):
        build_stack_pointer_batch(stack(6, 2, 3), order, Uploaded)


@pytest.mark.parametrize(("mats", "message"), [
    ([], r"no matrices"),
    ([matrix(4, 3), matrix(4, 5)], r"one shape and ld per batch"),
    ([matrix(4, 3, ld=4), matrix(4, 3, ld=5)], r"one shape and ld per batch"),
    ([matrix(4, 3), matrix(4, 3, dtype="float16")], r"matrix 1: dtype float16 but this kernel takes float32"),
])
def test_build_pointer_batch_rejects(mats: list[FakeArray], message: str) -> None:
    with pytest.raises(KernelArgumentError, match=message):
        pointers(mats)


# --- invalid arguments -----------------------------------------------------------------------------------

def _gemm_error_cases() -> list[Any]:
    fp32 = gemm_operands(4, 2, 3)
    a, b, c = fp32
    non_contiguous = FakeArray((4, 3), (24, 8), np.dtype(np.float32), _Data(BASE))
    return [
        pytest.param(plan_naive, (matrix(4, 3, dtype="float16"), b, c), {}, r"A: dtype float16 but this kernel takes float32", id="dtype"),
        pytest.param(plan_wmma, fp32, {}, r"A: dtype float32 but this kernel takes float16", id="wmma-dtype"),
        pytest.param(plan_naive, (stack(2, 4, 3), b, c), {}, r"A: shape \(2, 4, 3\) is not 2-D", id="ndim"),
        pytest.param(plan_naive, (a, b, matrix(0, 2)), {}, r"C: shape \(0, 2\) has an empty dimension", id="empty"),
        pytest.param(plan_naive, (non_contiguous, b, c), {}, r"A: the last axis must be contiguous", id="columns"),
        pytest.param(plan_naive, (matrix(4, 3, ld=2), b, c), {}, r"A: row stride 8 B is not a leading dimension",
                     id="ld<cols"),
        pytest.param(plan_naive, (FakeArray((4, 3), (14, 4), np.dtype(np.float32), _Data(BASE)), b, c), {},
                     r"row stride 14 B", id="ld-bytes"),
        pytest.param(plan_naive, (a, matrix(2, 2), c), {}, r"shapes A 4x3, B 2x2, C 4x2 do not form C = A·B",
                     id="inner"),
        pytest.param(plan_naive, (a, b, matrix(4, 3)), {}, r"do not form C = A·B", id="output"),
        pytest.param(plan_tiled, fp32, {"tile": 64}, r"tiled_sgemm: tile 64 is not one of \(8, 16, 32\)", id="tile"),
        pytest.param(plan_naive, (matrix(2, 2**31), matrix(2**31, 1), matrix(2, 1)), {},
                     r"A: leading dimension 2147483648 does not fit", id="ld-int32"),
        pytest.param(plan_naive, (matrix(65535 * 16 + 1, 1), matrix(1, 1), matrix(65535 * 16 + 1, 1)), {},
                     r"naive_sgemm: grid \(1, 65536, 1\) exceeds CUDA's limits", id="grid-y"),
        pytest.param(plan_optimized, (matrix(65535 * 128 + 1, 1), matrix(1, 1), matrix(65535 * 128 + 1, 1)), {},
                     rf"{DEFAULT_SGEMM_KERNEL}: grid \(1, 65536, 1\) exceeds", id="grid-y-128"),
        pytest.param(plan_mma, fp32, {}, r"A: dtype float32 but this kernel takes float16", id="mma-dtype"),
        pytest.param(plan_mma, (matrix(65535 * 128 + 1, 1, dtype="float16"), matrix(1, 1, dtype="float16"),
                                matrix(65535 * 128 + 1, 1, dtype="float16")), {},
                     r"mma_hgemm: grid \(1, 65536, 1\) exceeds", id="mma-grid-y"),
        pytest.param(plan_mma, gemm_operands(4, 2, 3, "float16"), {"config": "64x64"},
                     r"mma_hgemm: unknown config '64x64'; known: \[.*'128x128-s4'", id="mma-config"),
        pytest.param(plan_optimized, fp32, {"config": "bk32"}, r"optimized_sgemm: unknown config 'bk32'",
                     id="sgemm-config"),
    ]


@pytest.mark.parametrize(("planner", "operands", "options", "message"), _gemm_error_cases())
def test_gemm_planners_reject(planner: Any, operands: tuple[FakeArray, ...], options: dict[str, int],
                              message: str) -> None:
    with pytest.raises(KernelArgumentError, match=message):
        planner(*operands, **options)


def test_planners_accept_a_single_row_with_any_row_stride() -> None:
    odd_row = FakeArray((1, 3), (4, 4), np.dtype(np.float32), _Data(BASE))  # stride of a row never read
    plan = plan_naive(odd_row, matrix(3, 2), matrix(1, 2))
    assert int(_bind(plan)["lda"]) == 3


def _batched_error_cases() -> list[Any]:
    a, b, c = batched_operands(3, 4, 2, 3)
    span = 3 * 5 + 2  # C 4x2 with ld 5
    return [
        pytest.param((stack(3, 4, 3), stack(2, 3, 2), c), r"batch sizes differ: A 3, B 2, C 3", id="batch"),
        pytest.param((a, stack(3, 4, 2), c), r"shapes A 4x3, B 4x2, C 4x2 do not form C = A·B", id="shape"),
        pytest.param((a, b, stack(3, 4, 2, stride=0)), r"C: batch stride 0 makes the outputs of different "
                     r"products overlap", id="shared-c"),
        pytest.param((a, b, stack(3, 4, 2, ld=5, stride=span - 1)), r"batch stride 16 makes the outputs",
                     id="overlap-c"),
        pytest.param((FakeArray((3, 4, 3), (-48, 12, 4), np.dtype(np.float32), _Data(BASE)), b, c),
                     r"A: batch stride -48 B is not a non-negative multiple of 4 B", id="negative-stride"),
        pytest.param((FakeArray((3, 4, 3), (50, 12, 4), np.dtype(np.float32), _Data(BASE)), b, c),
                     r"A: batch stride 50 B", id="stride-bytes"),
        pytest.param((matrix(4, 3), b, c), r"A: shape \(4, 3\) is not 3-D", id="ndim"),
        pytest.param((stack(2**31, 1, 1, stride=0), stack(2**31, 1, 1, stride=0), stack(2**31, 1, 1)),
                     r"batched_sgemm: batch 2147483648 does not fit the kernel's 32-bit int", id="batch-int32"),
        pytest.param((pointers([matrix(4, 3, dtype="float16")] * 3), b, c),
                     r"A: dtype float16 but batched_sgemm takes float32", id="pointer-dtype"),
        pytest.param((a, b, pointers([matrix(4, 2, base=BASE + i * 32) for i in (0, 1, 1)])),
                     r"C: matrices at .* overlap \(each spans 32 B\)", id="pointer-c-twice"),
        pytest.param((a, b, pointers([matrix(4, 2, base=BASE + i * 28) for i in (2, 0, 1)])),
                     r"C: matrices at .* overlap", id="pointer-c-overlap"),
        pytest.param((a, b, c, 1.0, 0.0, "reg16"), r"batched_sgemm: unknown path 'reg16'; known: \['reg32', "
                     r"'reg64', 'small', 'tiled'\]", id="path"),
        pytest.param((a, b, c, 1.0, 0.0, "tiled", "bk4"), r"batched_sgemm: unknown config 'bk4'", id="config"),
        pytest.param((a, b, c, 1.0, 0.0, "reg32", SGEMM_DEFAULT, 0), r"batched_sgemm reg32: 0 matrices per block",
                     id="mats-0"),
        pytest.param((a, b, c, 1.0, 0.0, "reg64", SGEMM_DEFAULT, 9), r"batched_sgemm reg64: 9 matrices per block "
                     r"do not make a block of 1 to 1024 threads", id="mats-1152-threads"),
        pytest.param((a, b, c, 1.0, 0.0, "small", SGEMM_DEFAULT, 2), r"batched_sgemm small: matrices per block are "
                     r"a register-tiled path's setting", id="mats-small"),
    ]


@pytest.mark.parametrize(("operands", "message"), _batched_error_cases())
def test_plan_batched_rejects(operands: tuple[Any, ...], message: str) -> None:
    with pytest.raises(KernelArgumentError, match=message):
        plan_batched(*operands)


def test_plan_batched_accepts_outputs_that_just_touch() -> None:
    a, b, _ = batched_operands(3, 4, 2, 3)
    span = 3 * 5 + 2
    assert plan_batched(a, b, stack(3, 4, 2, ld=5, stride=span))
    assert plan_batched(a, b, pointers([matrix(4, 2, base=BASE + i * 32) for i in (2, 0, 1)]))
    shared_pointers = pointers([matrix(4, 3, base=BASE)] * 3)  # one A for every product is fine
    assert plan_batched(shared_pointers, b, stack(3, 4, 2, base=3 * BASE))


def test_planner_for() -> None:
    assert planner_for("batched") is plan_batched
    for kind, planner in GEMM_PLANNERS.items():
        assert planner_for(kind) is planner
    assert set(GEMM_PLANNERS) == {"naive", "tiled", "optimized", "wmma", "mma"}
    with pytest.raises(KernelArgumentError, match=r"unknown custom kernel 'cublas': use 'batched' or one of "
                                                  r"\['mma', 'naive', 'optimized', 'tiled', 'wmma'\]"):
        planner_for("cublas")
