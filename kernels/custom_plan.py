"""Launch planning for the custom CUDA kernels (``kernels/cuda/*.cu``): pure, no CuPy, no NVRTC, no GPU.

A planner reads its operands' layout (``shape``, ``strides``, ``dtype`` and ``data.ptr`` of CuPy-like
arrays: row-major, the last axis contiguous, the row stride is the leading dimension), rejects what the
kernel cannot take (``KernelArgumentError``) and returns ``LaunchPlan``s: which kernel of which file,
the grid, the block, the dynamic shared memory and the argument tuple in the order of the kernel's
signature. ``kernels.custom`` compiles and launches them.

What the kernels require of a plan (the numbers below are the sources' ``#define``s):
- every kernel takes ``int M, N, K`` and ``int`` leading dimensions; the batched ones an ``int`` batch;
- the 2-D kernels map ``blockIdx.x`` to column tiles and ``blockIdx.y`` to row tiles of C; CUDA caps
  grid y and z at 65535, so the batched tiled kernel's grid z = batch is split into launches of at most
  65535 items through its ``batch_offset`` argument;
- the ``*_vec4`` / ``*_vec8`` kernels use 16-byte global accesses at column offsets that are multiples
  of 16 bytes from a row start, so they need every matrix start 16-byte aligned and every leading
  dimension (and batch stride) a multiple of 16 bytes; ``*_scalar`` twins take any layout;
- the pipelined kernels (optimised SGEMM, the batched tiled kernel, the ``mma.sync`` HGEMM) keep their
  stages in dynamic shared memory, and their geometry is a compile-time ``-D`` configuration: a plan
  carries both, from the ``SGEMM_CONFIGS`` / ``MMA_CONFIGS`` tables (whose entries a GPU run compares);
- the small batched kernel (``batched_sgemm.cu``, 256 threads) stages whole matrices in dynamic shared
  memory, which the plan sizes with the kernel's own layout and keeps within 48 KB; the register-tiled
  batched kernels stage whole matrices too (``K ≤ REG_MAX_K``), sized likewise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy

from kernels.build_catalogue import load_section

#: Largest grid y / z (CUDA's limit); batched launches above it are split.
GRID_Z_LIMIT = 65535
#: Largest grid x (CUDA's limit): 2**31 - 1.
GRID_X_LIMIT = 2**31 - 1
#: Largest value of the kernels' 32-bit ``int`` parameters (sizes, leading dimensions, batch).
INT32_MAX = 2**31 - 1
#: Dynamic shared memory a kernel may take without raising its attribute.
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024
#: Bytes of one vector access of the ``*_vec4`` (float4) and ``*_vec8`` (8 halves) kernels.
VECTOR_BYTES = 16
#: Tile sizes the shared-memory tiled kernel is built for (``-DTILE``; TILE² ≤ 1024 threads per block).
TILED_TILES: tuple[int, ...] = (8, 16, 32)

# Geometry of the .cu files (tests/test_custom_plan.py checks these against their #defines).
OPT_TILE = 128  # optimized_sgemm.cu OPT_BM / OPT_BN (also the large batched kernel)
OPT_THREADS = 256  # optimized_sgemm.cu OPT_THREADS: the 16x16 thread grid of its 8x8 register tiles
OPT_A_PAD = 4  # optimized_sgemm.cu OPT_APAD: floats of padding per row of the transposed A tile
WT_A_PAD = 4  # warp_sgemm.cu WT_APAD: likewise for the warp-tiled core
MMA_BK = 32  # mma_hgemm.cu MMA_BK: halves of K per stage (the default; a build may set 64)
WMMA_TILE = 128  # wmma_hgemm.cu WM_BM / WM_BN
WMMA_THREADS = 256  # wmma_hgemm.cu WM_THREADS: 8 warps in a 2x4 grid
NAIVE_BLOCK = 16  # naive_sgemm.cu: one thread per element, 16x16 blocks
SMALL_THREADS = 256  # batched_sgemm.cu BS_THREADS
#: The small batched kernel is used while every dimension is at most this and a matrix's staged A and B
#: take at most SMALL_MATRIX_SMEM bytes; above, the 128x128 tiled kernel with grid z = batch.
SMALL_MAX_DIM = 64
SMALL_MATRIX_SMEM = 24 * 1024
SMALL_BLOCK_SMEM = DEFAULT_DYNAMIC_SMEM_LIMIT
#: Outputs per thread strip of the small batched kernel (one float4 of a row of C).
SMALL_STRIP = 4
#: The register-tiled batched kernels: each thread an 8 x 4 block of C (batched_sgemm.cu BR_THREAD_ROWS,
#: BR_THREAD_COLS), A and B of a matrix staged whole, so K ≤ REG_MAX_K (BR_MAX_K).
REG_THREAD_ROWS = 8
REG_THREAD_COLS = 4
REG_MAX_K = 64
#: A register-tiled class is taken only when the matrix fills at least 1/REG_MIN_FILL of its tile: an 8 x 8
#: product would leave 15 of every 16 threads of the 32 x 32 tile idle, and the small kernel runs it better.
REG_MIN_FILL = 4


@dataclass(frozen=True)
class SgemmConfig:
    """A build of optimized_sgemm.cu's 128 x 128 core: K per stage and stages in the shared-memory ring."""

    bk: int  # OPT_BK: 8 or 16
    stages: int  # OPT_STAGES: ≥ 2

    #: The file and the 2-D kernels' name (``<kernel>_vec4`` / ``_scalar``), and the batched tiled kernels'.
    source = "optimized_sgemm.cu"
    kernel = "optimized_sgemm"
    batched_kernel = "batched_sgemm_tiled"

    @property
    def name(self) -> str:
        """``bk<bk>-s<stages>``: the build's name in the catalogue."""
        return f"bk{self.bk}-s{self.stages}"

    @property
    def defines(self) -> tuple[tuple[str, str], ...]:
        return (("OPT_BK", str(self.bk)), ("OPT_STAGES", str(self.stages)))

    @property
    def shared_bytes(self) -> int:
        """The ring: per stage a transposed, padded A tile (bk x (128 + 4)) and a B tile (bk x 128), floats."""
        return self.stages * self.bk * (OPT_TILE + OPT_A_PAD + OPT_TILE) * 4

    @property
    def tile(self) -> tuple[int, int]:
        """Rows x columns of C per block."""
        return OPT_TILE, OPT_TILE

    @property
    def threads(self) -> int:
        return OPT_THREADS

    @property
    def has_batched_kernel(self) -> bool:
        """Whether the build gives the batched tiled path a kernel of its own (every ``bk…`` build does)."""
        return True


@dataclass(frozen=True)
class WarpSgemmConfig:
    """A build of warp_sgemm.cu's warp-tiled core: block tile, K per stage, stages, warp grid, lanes along a warp
    tile's rows (4 or 8; 32 / lanes_m along its columns) and the blocks per SM its registers must allow; and its
    options, off by default and passed (and named) only when set: ``a_kmajor`` (``WT_A_KMAJOR``: A k-contiguous in
    shared memory, copied with cp.async like B), ``fast`` (``WT_FAST``: the K-tiles inside the matrices without edge
    guards), ``pipe`` (``WT_PIPE``: the barrier and the next K-tile's first fragment reads before the last step's
    FFMAs) and ``swizzle`` (``WT_SWIZZLE``: blocks walk groups of that many tile-rows column by column; the 2-D
    kernels only)."""

    bm: int
    bn: int
    bk: int
    stages: int
    warps_m: int
    warps_n: int
    lanes_m: int
    min_blocks: int
    a_kmajor: bool = False
    fast: bool = False
    pipe: bool = False
    swizzle: int = 0

    source = "warp_sgemm.cu"
    kernel = "warp_sgemm"
    batched_kernel = "batched_sgemm_wtiled"

    @property
    def defines(self) -> tuple[tuple[str, str], ...]:
        options = ((("WT_A_KMAJOR", "1"),) if self.a_kmajor else ()) + ((("WT_FAST", "1"),) if self.fast else ()) + (
            (("WT_PIPE", "1"),) if self.pipe else ()) + ((("WT_SWIZZLE", str(self.swizzle)),) if self.swizzle else ())
        return (("WT_BM", str(self.bm)), ("WT_BN", str(self.bn)), ("WT_BK", str(self.bk)),
                ("WT_STAGES", str(self.stages)), ("WT_WARPS_M", str(self.warps_m)), ("WT_WARPS_N", str(self.warps_n)),
                ("WT_LANES_M", str(self.lanes_m)), ("WT_MIN_BLOCKS", str(self.min_blocks)), *options)

    @property
    def shared_bytes(self) -> int:
        """The ring: per stage an A tile, transposed and padded (bk x (bm + 4)) or with ``a_kmajor`` k-contiguous and
        padded (bm x (bk + 4)), and a B tile (bk x bn), floats."""
        a_tile = self.bm * (self.bk + WT_A_PAD) if self.a_kmajor else self.bk * (self.bm + WT_A_PAD)
        return self.stages * (a_tile + self.bk * self.bn) * 4

    @property
    def tile(self) -> tuple[int, int]:
        return self.bm, self.bn

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def has_batched_kernel(self) -> bool:
        """The swizzle orders the 2-D grid only: a swizzled build's batched kernel is its unswizzled twin's."""
        return not self.swizzle

    @property
    def thread_tile(self) -> tuple[int, int]:
        """Rows x columns of C per thread."""
        return self.bm // self.warps_m // self.lanes_m, self.bn // self.warps_n // (32 // self.lanes_m)

    @property
    def name(self) -> str:
        """``wt<bm>x<bn>-t<rows>x<cols>-bk<bk>-s<stages>[-ak][-fast][-pipe][-sw<G>]``: the build's name in the
        catalogue, its geometry and the options it sets."""
        rows, cols = self.thread_tile
        options = ("-ak" if self.a_kmajor else "") + ("-fast" if self.fast else "") + ("-pipe" if self.pipe else "") + (
            f"-sw{self.swizzle}" if self.swizzle else "")
        return f"wt{self.bm}x{self.bn}-t{rows}x{cols}-bk{self.bk}-s{self.stages}{options}"


@dataclass(frozen=True)
class MmaConfig:
    """A build of mma_hgemm.cu: block tile, warp grid, pipeline depth, and the blocks per SM its registers
    must allow (``__launch_bounds__``); K per stage (``MMA_BK``), the fragment-pipelined loop (``MMA_PIPE``) and the
    guard-free interior loop (``MMA_FAST``: interior blocks' K-tiles inside K without edge guards; not with ``pipe``)
    are passed only when they differ from the source's defaults (32, off, off)."""

    bm: int
    bn: int
    warps_m: int
    warps_n: int
    stages: int
    min_blocks: int
    bk: int = MMA_BK
    pipe: bool = False
    fast: bool = False

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def defines(self) -> tuple[tuple[str, str], ...]:
        extra = ((("MMA_BK", str(self.bk)),) if self.bk != MMA_BK else ()) + (
            (("MMA_PIPE", "1"),) if self.pipe else ()) + ((("MMA_FAST", "1"),) if self.fast else ())
        return (("MMA_BM", str(self.bm)), ("MMA_BN", str(self.bn)), ("MMA_WARPS_M", str(self.warps_m)),
                ("MMA_WARPS_N", str(self.warps_n)), ("MMA_STAGES", str(self.stages)),
                ("MMA_MIN_BLOCKS", str(self.min_blocks)), *extra)

    @property
    def shared_bytes(self) -> int:
        """The ring: per stage an A tile (bm x bk halves) and a B tile (bk x bn halves), swizzled, unpadded."""
        return self.stages * (self.bm * self.bk + self.bk * self.bn) * 2


@dataclass(frozen=True)
class RegisterTileClass:
    """One register-tiled batched kernel (``batched_sgemm_<name>_*``): matrices up to ``tile`` x ``tile``,
    ``mats`` of them per block (the ``<NAME>_MATS`` define), one 8 x 4 block of C per thread."""

    name: str  # kernel infix and define prefix: reg32 -> batched_sgemm_reg32_*, BR32_MATS
    tile: int
    mats: int

    @property
    def threads(self) -> int:
        return self.mats * (self.tile // REG_THREAD_ROWS) * (self.tile // REG_THREAD_COLS)

    @property
    def defines(self) -> tuple[tuple[str, str], ...]:
        return ((f"BR{self.tile}_MATS", str(self.mats)),)

    def shared_bytes(self, k: int) -> int:
        """Per matrix A as tile x KP floats and B as KP x tile (KP = k rounded up to 4), as the kernel lays it."""
        return self.mats * 2 * self.tile * ceil_div(k, 4) * 4 * 4

    def takes(self, m: int, n: int, k: int) -> bool:
        """The kernel can run the shape, and the shape fills enough of its tile to be worth it."""
        return max(m, n) <= self.tile and k <= REG_MAX_K and REG_MIN_FILL * m * n >= self.tile**2


_SGEMM = load_section("sgemm", {"optimized": SgemmConfig, "warp": WarpSgemmConfig}, ("gemm", "batched_tiled"))
_MMA = load_section("mma", {"mma": MmaConfig}, ("gemm",), default_kind="mma")
#: Builds of the optimised SGEMM core (also the batched tiled kernel's), from ``kernels/custom_builds.yaml``: the
#: plain ``bk…`` builds run optimized_sgemm.cu's 128 x 128 core, the ``wt…`` builds warp_sgemm.cu's warp-tiled one
#: (``WarpSgemmConfig``). ``SGEMM_DEFAULT`` and ``BATCHED_TILED_DEFAULT`` are what the suite runs; the others are
#: there to be timed against them (``config=``; the builds selection, ``-m builds``).
SGEMM_CONFIGS: dict[str, SgemmConfig | WarpSgemmConfig] = _SGEMM.builds
SGEMM_DEFAULT = _SGEMM.defaults["gemm"]
BATCHED_TILED_DEFAULT = _SGEMM.defaults["batched_tiled"]
#: Builds of the mma.sync HGEMM (``MmaConfig``), likewise; ``MMA_DEFAULT`` is what the suite runs.
MMA_CONFIGS: dict[str, MmaConfig] = _MMA.builds
MMA_DEFAULT = _MMA.defaults["gemm"]
#: The register-tiled batched classes, smallest first: the first that ``takes`` a shape runs it.
REG_CLASSES: tuple[RegisterTileClass, ...] = (RegisterTileClass("reg32", 32, 4), RegisterTileClass("reg64", 64, 1))
#: The batched kernels ``plan_batched(path=...)`` can be forced to, to time one against another.
BATCHED_PATHS: tuple[str, ...] = (*(c.name for c in REG_CLASSES), "small", "tiled")

_FP32 = numpy.dtype(numpy.float32)
_FP16 = numpy.dtype(numpy.float16)
_NULL = numpy.uint64(0)


class KernelArgumentError(ValueError):
    """Operands a custom kernel cannot take (wrong dtype, shape, layout or size)."""


@dataclass(frozen=True)
class Matrix:
    """A row-major matrix, or a stack of them, as a kernel addresses it (sizes in elements)."""

    name: str
    ptr: int
    batch: int
    rows: int
    cols: int
    ld: int  # elements between consecutive rows
    stride: int  # elements between consecutive matrices of a stack (0: one matrix shared by all)
    itemsize: int

    def aligned(self, nbytes: int) -> bool:
        """Every row of every matrix starts on an ``nbytes`` boundary."""
        return (self.ptr % nbytes == 0 and (self.ld * self.itemsize) % nbytes == 0
                and (self.stride * self.itemsize) % nbytes == 0)


@dataclass(frozen=True)
class LaunchPlan:
    """One kernel launch: everything ``launch`` needs, decided without touching the GPU."""

    source: str  # file in kernels/cuda
    kernel: str  # extern "C" name
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Any, ...]
    shared_mem: int = 0  # dynamic shared memory, bytes
    defines: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PointerBatch:
    """The pointer-array form of a batch: ``pointers`` (a device ``uint64`` array) addresses ``batch``
    matrices of one shape and leading dimension. ``arrays`` keeps them alive."""

    pointers: Any
    batch: int
    rows: int
    cols: int
    ld: int
    dtype: numpy.dtype
    aligned16: bool  # every matrix 16-byte aligned and ld*itemsize a multiple of 16
    arrays: tuple[Any, ...] = ()
    addresses: tuple[int, ...] = ()  # the matrices' device addresses, in batch order


def ceil_div(a: int, b: int) -> int:
    """``⌈a / b⌉`` for ``a ≥ 0``, ``b > 0``."""
    return -(-a // b)


def check_grid(grid: tuple[int, int, int], what: str) -> None:
    """``grid`` is launchable: x < 2**31, y and z ≤ 65535 (CUDA's limits)."""
    if grid[0] > GRID_X_LIMIT or grid[1] > GRID_Z_LIMIT or grid[2] > GRID_Z_LIMIT:
        raise KernelArgumentError(f"{what}: grid {grid} exceeds CUDA's limits (y, z ≤ {GRID_Z_LIMIT})")


def tile_grid(rows: int, cols: int, tile: int, tile_cols: int | None = None) -> tuple[int, int, int]:
    """The 2-D kernels' grid: one block per ``tile`` x ``tile_cols`` (default ``tile``) tile of a ``rows`` x
    ``cols`` C, x along columns (``col = blockIdx.x * tile + …`` in every .cu file), y along rows."""
    return ceil_div(cols, tile if tile_cols is None else tile_cols), ceil_div(rows, tile), 1


def describe(x: Any, name: str, dtype: numpy.dtype, ndim: int) -> Matrix:
    """Read a CuPy-like array's layout (``shape``, ``strides``, ``dtype``, ``data.ptr``) as a ``Matrix``."""
    if numpy.dtype(x.dtype) != dtype:
        raise KernelArgumentError(f"{name}: dtype {numpy.dtype(x.dtype)} but this kernel takes {dtype}")
    if len(x.shape) != ndim:
        raise KernelArgumentError(f"{name}: shape {tuple(x.shape)} is not {ndim}-D")
    if min(x.shape) < 1:
        raise KernelArgumentError(f"{name}: shape {tuple(x.shape)} has an empty dimension")
    item = dtype.itemsize
    *outer, rows, cols = (int(s) for s in x.shape)
    *outer_strides, row_stride, col_stride = (int(s) for s in x.strides)
    if cols > 1 and col_stride != item:
        raise KernelArgumentError(f"{name}: the last axis must be contiguous (row-major); strides {tuple(x.strides)}")
    if rows == 1:
        ld = cols  # the only row: its stride is never used
    elif row_stride % item or row_stride < cols * item:
        raise KernelArgumentError(
            f"{name}: row stride {row_stride} B is not a leading dimension of at least {cols} x {item} B")
    else:
        ld = row_stride // item
    batch, stride = 1, 0
    if outer:
        batch = outer[0]
        if batch > 1:
            if outer_strides[0] % item or outer_strides[0] < 0:
                raise KernelArgumentError(
                    f"{name}: batch stride {outer_strides[0]} B is not a non-negative multiple of {item} B")
            stride = outer_strides[0] // item
    if ld > INT32_MAX:
        raise KernelArgumentError(f"{name}: leading dimension {ld} does not fit the kernels' 32-bit int")
    return Matrix(name, int(x.data.ptr), batch, rows, cols, ld, stride, item)


def vector_path(*matrices: Matrix) -> bool:
    """Whether the 16-byte ``*_vec4`` / ``*_vec8`` kernel may run: its vector loads and stores sit at
    multiples of 16 bytes from a row start, so every operand must be ``aligned(16)``."""
    return all(m.aligned(VECTOR_BYTES) for m in matrices)


def _gemm_operands(a: Any, b: Any, c: Any, dtype: numpy.dtype) -> tuple[Matrix, Matrix, Matrix]:
    ma, mb, mc = describe(a, "A", dtype, 2), describe(b, "B", dtype, 2), describe(c, "C", dtype, 2)
    if ma.cols != mb.rows or mc.rows != ma.rows or mc.cols != mb.cols:
        raise KernelArgumentError(
            f"shapes A {ma.rows}x{ma.cols}, B {mb.rows}x{mb.cols}, C {mc.rows}x{mc.cols} do not form C = A·B")
    return ma, mb, mc


def _gemm_args(ma: Matrix, mb: Matrix, mc: Matrix, a: Any, b: Any, c: Any, alpha: float, beta: float
               ) -> tuple[Any, ...]:
    """``(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)``: the signature of every 2-D kernel."""
    i32, f32 = numpy.int32, numpy.float32
    return (i32(mc.rows), i32(mc.cols), i32(ma.cols), f32(alpha), a, i32(ma.ld), b, i32(mb.ld),
            f32(beta), c, i32(mc.ld))


def _plan_2d(kernel: str, a: Any, b: Any, c: Any, alpha: float, beta: float, dtype: numpy.dtype, tile: int,
             tile_cols: int | None = None
             ) -> tuple[tuple[Matrix, Matrix, Matrix], tuple[int, int, int], tuple[Any, ...]]:
    """Operands, grid and arguments shared by the 2-D planners. M, N and K need no check of their own
    against the kernels' ``int``: N ≤ ldc and K ≤ lda are checked by ``describe``, M by the grid's y."""
    ma, mb, mc = _gemm_operands(a, b, c, dtype)
    grid = tile_grid(mc.rows, mc.cols, tile, tile_cols)
    check_grid(grid, kernel)
    return (ma, mb, mc), grid, _gemm_args(ma, mb, mc, a, b, c, alpha, beta)


def plan_naive(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> LaunchPlan:
    """One thread per element of C, 16x16 blocks."""
    _, grid, args = _plan_2d("naive_sgemm", a, b, c, alpha, beta, _FP32, NAIVE_BLOCK)
    return LaunchPlan("naive_sgemm.cu", "naive_sgemm", grid, (NAIVE_BLOCK, NAIVE_BLOCK, 1), args)


def plan_tiled(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0, tile: int = 16) -> LaunchPlan:
    """The textbook shared-memory tiled kernel, built for ``tile`` x ``tile`` tiles (16 by default): its
    ``__shared__`` tiles are indexed by ``threadIdx``, so the block is exactly ``tile`` x ``tile``."""
    if tile not in TILED_TILES:
        raise KernelArgumentError(f"tiled_sgemm: tile {tile} is not one of {TILED_TILES}")
    _, grid, args = _plan_2d("tiled_sgemm", a, b, c, alpha, beta, _FP32, tile)
    return LaunchPlan("tiled_sgemm.cu", "tiled_sgemm", grid, (tile, tile, 1), args, defines=(("TILE", str(tile)),))


def _config(table: dict[str, Any], name: str, what: str) -> Any:
    try:
        return table[name]
    except KeyError as exc:
        raise KernelArgumentError(f"{what}: unknown config {name!r}; known: {sorted(table)}") from exc


def plan_optimized(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0,
                   config: str = SGEMM_DEFAULT) -> LaunchPlan:
    """The ``config`` build (``SGEMM_CONFIGS``; by default ``SGEMM_DEFAULT``, warp_sgemm.cu's warp-tiled kernel with
    its block tile and threads; the plain ``bk…`` builds run optimized_sgemm.cu's 128x128 tiles, 8x8 per thread): a
    ring of K-tiles in dynamic shared memory; float4 and 16-byte cp.async when every operand is 16-byte aligned,
    else scalar."""
    build = _config(SGEMM_CONFIGS, config, "optimized_sgemm")
    tile_m, tile_n = build.tile
    operands, grid, args = _plan_2d(build.kernel, a, b, c, alpha, beta, _FP32, tile_m, tile_n)
    kernel = f"{build.kernel}_vec4" if vector_path(*operands) else f"{build.kernel}_scalar"
    return LaunchPlan(build.source, kernel, grid, (build.threads, 1, 1), args, shared_mem=build.shared_bytes,
                      defines=build.defines)


def plan_wmma(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> LaunchPlan:
    """FP16 A, B, C; FP32 accumulate and epilogue. 8-half (16-byte) loads when aligned, else scalar."""
    operands, grid, args = _plan_2d("wmma_hgemm", a, b, c, alpha, beta, _FP16, WMMA_TILE)
    kernel = "wmma_hgemm_vec8" if vector_path(*operands) else "wmma_hgemm_scalar"
    return LaunchPlan("wmma_hgemm.cu", kernel, grid, (WMMA_THREADS, 1, 1), args)


def plan_mma(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0, config: str = MMA_DEFAULT) -> LaunchPlan:
    """FP16 A, B, C on mma.sync m16n8k16 (FP32 accumulate and epilogue), a ``config`` (``MMA_CONFIGS``)
    block tile and pipeline; 16-byte cp.async when every operand is 16-byte aligned, else scalar copies."""
    build = _config(MMA_CONFIGS, config, "mma_hgemm")
    operands, grid, args = _plan_2d("mma_hgemm", a, b, c, alpha, beta, _FP16, build.bm, build.bn)
    kernel = "mma_hgemm_vec8" if vector_path(*operands) else "mma_hgemm_scalar"
    return LaunchPlan("mma_hgemm.cu", kernel, grid, (build.threads, 1, 1), args, shared_mem=build.shared_bytes,
                      defines=build.defines)


def build_pointer_batch(arrays: Sequence[Any], upload: Callable[[numpy.ndarray], Any]) -> PointerBatch:
    """The ``PointerBatch`` of ``arrays`` (2-D row-major arrays of one shape, dtype and leading
    dimension); ``upload`` turns the host ``uint64`` address array into the device array the kernel reads."""
    if not arrays:
        raise KernelArgumentError("pointer_batch: no matrices")
    dtype = numpy.dtype(arrays[0].dtype)
    mats = [describe(x, f"matrix {i}", dtype, 2) for i, x in enumerate(arrays)]
    first = mats[0]
    for m in mats:
        if (m.rows, m.cols, m.ld) != (first.rows, first.cols, first.ld):
            raise KernelArgumentError(
                f"pointer_batch: {m.name} is {m.rows}x{m.cols} (ld {m.ld}), "
                f"{first.name} is {first.rows}x{first.cols} (ld {first.ld}): one shape and ld per batch")
    addresses = tuple(m.ptr for m in mats)
    pointers = upload(numpy.array(addresses, dtype=numpy.uint64))
    return PointerBatch(pointers, len(mats), first.rows, first.cols, first.ld, dtype, vector_path(*mats),
                        tuple(arrays), addresses)


def build_stack_pointer_batch(stack: Any, order: Sequence[int], upload: Callable[[numpy.ndarray], Any]
                              ) -> PointerBatch:
    """The ``PointerBatch`` of a 3-D stack's items in ``order`` (position i addresses item ``order[i]``): the batch
    ``build_pointer_batch([stack[i] for i in order])`` makes, with the addresses computed from the stack's layout
    instead of one view per item (a batch of 66,000 took seconds of host time that way)."""
    dtype = numpy.dtype(stack.dtype)
    whole = describe(stack, "stack", dtype, 3)
    items = numpy.asarray(order, dtype=numpy.int64)
    if items.ndim != 1 or not items.size:
        raise KernelArgumentError("pointer_batch: no matrices")
    if items.min() < 0 or items.max() >= whole.batch:
        raise KernelArgumentError(f"pointer_batch: an item of order lies outside the stack's {whole.batch} matrices")
    addresses = (whole.ptr + items * (whole.stride * whole.itemsize)).astype(numpy.uint64)
    return PointerBatch(upload(addresses), int(items.size), whole.rows, whole.cols, whole.ld, dtype,
                        vector_path(whole), (stack,), tuple(int(a) for a in addresses.tolist()))


@dataclass(frozen=True)
class _BatchSide:
    """One operand of a batched call: a strided stack or a pointer array."""

    base: Any  # the stack (strided form) or _NULL
    array: Any  # the device pointer array (pointer form) or _NULL
    batch: int
    rows: int
    cols: int
    ld: int
    stride: int
    aligned16: bool
    addresses: tuple[int, ...] | None  # pointer form: every matrix's address; strided form: None


def _side(x: Any, name: str) -> _BatchSide:
    if isinstance(x, PointerBatch):
        if x.dtype != _FP32:
            raise KernelArgumentError(f"{name}: dtype {x.dtype} but batched_sgemm takes float32")
        return _BatchSide(_NULL, x.pointers, x.batch, x.rows, x.cols, x.ld, 0, x.aligned16, x.addresses)
    m = describe(x, name, _FP32, 3)
    return _BatchSide(x, _NULL, m.batch, m.rows, m.cols, m.ld, m.stride, vector_path(m), None)


def _check_outputs_disjoint(c: _BatchSide) -> None:
    """No two products write the same element of C (each one's C spans ``(rows-1)·ld + cols`` elements);
    the kernels run the products in parallel, so overlapping outputs would race."""
    span = (c.rows - 1) * c.ld + c.cols
    if c.addresses is None:
        if c.batch > 1 and c.stride < span:
            raise KernelArgumentError(f"C: batch stride {c.stride} makes the outputs of different products overlap")
        return
    starts = sorted(c.addresses)
    span_bytes = span * _FP32.itemsize
    for lower, upper in zip(starts, starts[1:]):
        if upper - lower < span_bytes:
            raise KernelArgumentError(
                f"C: matrices at {lower:#x} and {upper:#x} overlap (each spans {span_bytes} B): "
                "the outputs of different products must be distinct")


def small_batched_smem(m: int, n: int, k: int, group: int) -> int:
    """Dynamic shared memory of the small batched kernel for ``group`` matrices, in bytes, exactly as
    batched_sgemm.cu lays it out: A with an odd row pitch ``K | 1``, rounded up to whole float4s, then B
    with rows padded to whole float4s."""
    a_floats = ceil_div(group * m * (k | 1), 4) * 4
    b_floats = group * k * ceil_div(n, 4) * 4
    return 4 * (a_floats + b_floats)


def small_batched_group(m: int, n: int, k: int, batch: int) -> int | None:
    """Matrices per block for the small batched kernel, or ``None`` when it cannot take the shape.

    The small kernel is taken while every dimension is at most ``SMALL_MAX_DIM`` and one matrix's staged
    A and B fit ``SMALL_MATRIX_SMEM``. A block of ``SMALL_THREADS`` threads then takes the most whole
    matrices (never more than ``batch``) that leave every thread at most one strip of four outputs of C,
    as far as ``SMALL_BLOCK_SMEM`` of dynamic shared memory allows; at least one.
    """
    if max(m, n, k) > SMALL_MAX_DIM or small_batched_smem(m, n, k, 1) > SMALL_MATRIX_SMEM:
        return None
    strips = m * ceil_div(n, SMALL_STRIP)
    group = max(1, min(batch, SMALL_THREADS // strips))
    while group > 1 and small_batched_smem(m, n, k, group) > SMALL_BLOCK_SMEM:
        group -= 1
    return group


def batch_chunks(batch: int) -> list[tuple[int, int]]:
    """``(offset, count)`` of each launch of the batched tiled kernel: grid z = count ≤ 65535, the
    kernel's product index is ``batch_offset + blockIdx.z``."""
    return [(offset, min(GRID_Z_LIMIT, batch - offset)) for offset in range(0, batch, GRID_Z_LIMIT)]


def batched_path(m: int, n: int, k: int, batch: int) -> str:
    """The batched kernel for a shape (one of ``BATCHED_PATHS``): the first register-tiled class that
    ``takes`` it, else the small kernel where a group fits, else the 128x128 tiled kernel."""
    for cls in REG_CLASSES:
        if cls.takes(m, n, k):
            return cls.name
    return "tiled" if small_batched_group(m, n, k, batch) is None else "small"


def _register_classes(path: str, mats: int | None) -> tuple[RegisterTileClass, ...]:
    """``REG_CLASSES`` with ``path``'s matrices per block set to ``mats`` (when given)."""
    if mats is None:
        return REG_CLASSES
    cls = next(c for c in REG_CLASSES if c.name == path)
    changed = RegisterTileClass(cls.name, cls.tile, mats)
    if mats < 1 or changed.threads > 1024:
        raise KernelArgumentError(f"batched_sgemm {path}: {mats} matrices per block do not make a block of "
                                  "1 to 1024 threads")
    return tuple(changed if c is cls else c for c in REG_CLASSES)


def _batched_defines(classes: tuple[RegisterTileClass, ...], build: SgemmConfig | WarpSgemmConfig
                     ) -> tuple[tuple[str, str], ...]:
    """One ``-D`` set for every kernel of batched_sgemm.cu: the file compiles as a whole, so with the same
    set the small, register-tiled and tiled paths share one module (one NVRTC compile, not one per path). A
    "wt..." build's WT_* defines also compile the batched_sgemm_wtiled_* kernels, which its tiled path runs."""
    return (*(d for c in classes for d in c.defines), *build.defines)


def plan_batched(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0, path: str | None = None,
                 config: str = BATCHED_TILED_DEFAULT, mats: int | None = None) -> list[LaunchPlan]:
    """``C[i] = alpha·A[i]·B[i] + beta·C[i]`` for a strided stack (3-D arrays; a batch stride of 0 shares
    one matrix) or pointer arrays (``PointerBatch``); the forms can be mixed per operand.

    The kernel is ``batched_path``'s unless ``path`` names one (``BATCHED_PATHS``; a forced register or
    small path must be able to take the shape); ``config`` is the tiled kernel's ``SGEMM_CONFIGS`` build,
    ``mats`` overrides a register-tiled class's matrices per block. Both are for comparing builds; a "wt..."
    config runs the tiled path on warp_sgemm.cu's core (``batched_sgemm_wtiled_*``)."""
    sa, sb, sc = _side(a, "A"), _side(b, "B"), _side(c, "C")
    m, n, k, batch = sc.rows, sc.cols, sa.cols, sc.batch
    if sb.rows != k or sa.rows != m or sb.cols != n:
        raise KernelArgumentError(
            f"shapes A {sa.rows}x{sa.cols}, B {sb.rows}x{sb.cols}, C {sc.rows}x{sc.cols} do not form C = A·B")
    if not sa.batch == sb.batch == batch:
        raise KernelArgumentError(f"batch sizes differ: A {sa.batch}, B {sb.batch}, C {sc.batch}")
    if batch > INT32_MAX:
        raise KernelArgumentError(f"batched_sgemm: batch {batch} does not fit the kernel's 32-bit int")
    _check_outputs_disjoint(sc)
    if path is None:
        path = batched_path(m, n, k, batch)
    elif path not in BATCHED_PATHS:
        raise KernelArgumentError(f"batched_sgemm: unknown path {path!r}; known: {list(BATCHED_PATHS)}")
    build = _config(SGEMM_CONFIGS, config, "batched_sgemm")
    register_path = path in (c.name for c in REG_CLASSES)
    if mats is not None and not register_path:
        raise KernelArgumentError(f"batched_sgemm {path}: matrices per block are a register-tiled path's setting")
    classes = _register_classes(path, mats) if register_path else REG_CLASSES
    defines = _batched_defines(classes, build)
    i32, i64, f32 = numpy.int32, numpy.int64, numpy.float32
    common = (i32(m), i32(n), i32(k), f32(alpha),
              sa.base, sa.array, i32(sa.ld), i64(sa.stride),
              sb.base, sb.array, i32(sb.ld), i64(sb.stride),
              f32(beta), sc.base, sc.array, i32(sc.ld), i64(sc.stride))
    suffix = "vec4" if sa.aligned16 and sb.aligned16 and sc.aligned16 else "scalar"
    if path == "small":
        group = small_batched_group(m, n, k, batch)
        if group is None:
            raise KernelArgumentError(f"batched_sgemm small: cannot take {m}x{n}x{k}")
        return [LaunchPlan("batched_sgemm.cu", f"batched_sgemm_small_{suffix}", (ceil_div(batch, group), 1, 1),
                           (SMALL_THREADS, 1, 1), (*common, i32(batch), i32(group)),
                           shared_mem=small_batched_smem(m, n, k, group), defines=defines)]
    if path != "tiled":
        cls = next(c for c in classes if c.name == path)
        if max(m, n) > cls.tile or k > REG_MAX_K:
            raise KernelArgumentError(f"batched_sgemm {path}: cannot take {m}x{n}x{k} (M, N ≤ {cls.tile}, "
                                      f"K ≤ {REG_MAX_K})")
        grid = (ceil_div(batch, cls.mats), 1, 1)
        check_grid(grid, "batched_sgemm")
        return [LaunchPlan("batched_sgemm.cu", f"batched_sgemm_{path}_{suffix}", grid, (cls.threads, 1, 1),
                           (*common, i32(batch)), shared_mem=cls.shared_bytes(k), defines=defines)]
    plans = []
    tile_m, tile_n = build.tile
    for offset, count in batch_chunks(batch):
        grid = (ceil_div(n, tile_n), ceil_div(m, tile_m), count)
        check_grid(grid, "batched_sgemm")
        plans.append(LaunchPlan("batched_sgemm.cu", f"{build.batched_kernel}_{suffix}", grid, (build.threads, 1, 1),
                                (*common, i32(offset)), shared_mem=build.shared_bytes, defines=defines))
    return plans


#: The GEMM planners by the kernel names the tests use.
GEMM_PLANNERS: dict[str, Callable[..., LaunchPlan]] = {
    "naive": plan_naive,
    "tiled": plan_tiled,
    "optimized": plan_optimized,
    "wmma": plan_wmma,
    "mma": plan_mma,
}


def planner_for(kind: str) -> Callable[..., LaunchPlan | list[LaunchPlan]]:
    """The planner of ``"batched"`` or of one of ``GEMM_PLANNERS``."""
    if kind == "batched":
        return plan_batched
    try:
        return GEMM_PLANNERS[kind]
    except KeyError as exc:
        raise KernelArgumentError(f"unknown custom kernel {kind!r}: use 'batched' or one of "
                                  f"{sorted(GEMM_PLANNERS)}") from exc
