"""``--dry-run``: the selected perf tests run on a CPU with no driver, as far as they go without a GPU.

A user's CPU CI runs them so that a mistake in a perf test fails there, with the message and exit code the GPU run
would give, and not first on the GPU runner: the case tables are loaded and parametrized, the test body runs, its
calls to ``measure``, ``perf.check``, ``perf.check_ratio`` and the work helpers are the real ones (the real
``Measurer`` and ``Perf``: a wrong keyword is the same ``TypeError``), each check looks its entry up in the
baseline (``gate.decide_dry``: a missing entry is ``NO_BASELINE``, a failure in gate mode), and the run's end does
the gate's accounting (a baselined case no test reached, a stale entry). What cannot run without a GPU does not:

- ``measure`` never calls ``fn`` (the user's kernel is not launched) and gives a stand-in ``Measurement`` with no
  figure; its record is ``DRY_RUN`` with the entry it would be judged against;
- operands are host arrays: the test imports ``cupy`` and gets ``host_cupy`` (NumPy behind CuPy's array
  functions, kernels that launch nothing), and PyTorch's CUDA tensors are made on its ``meta`` device;
- a test that does not measure (a correctness test launches the kernel itself) is skipped with the reason;
- nothing is written: no results files, no history, no baseline (``--update-baselines`` is refused).

The GPU it stands in for is the model of a baseline file of the project (``--gpu N``: the N-th, sorted by name),
so the lookups are the ones a run on that GPU makes; with no baseline file, every case is ``NO_BASELINE``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuperf.measure.measurement import Measurement, check_call
from gpuperf.measure.metrics import Work
from gpuperf.measure.peaks import DevicePeaks
from gpuperf.store.results import DRY_METHOD as DRY_METHOD
from gpuperf.vocabulary import Flush
from gpuperf.wiring.host_cupy import StandInStream

#: The slug of the stood-in GPU when the project has no baseline file yet.
NO_BASELINE_SLUG = "no-baseline-yet"
#: The run header's line: what a dry run is, so no reader takes its rows for measurements.
HEADER = ("gpuperf: DRY RUN (--dry-run): no GPU used, your kernels are not launched and no figure is measured; "
          "checked: case tables, the calls to measure/perf and the work helpers, baseline entries, the gate's "
          "accounting. Nothing is written.")
#: The skip reason of a test that launches kernels outside ``measure``.
NOT_A_PERF_TEST = ("dry run: this test does not measure (it launches its kernels itself, e.g. a correctness test); "
                   "it runs on the GPU")


class DryTimer:
    """``Timer.measure``'s signature and its checks of its arguments (``measurement.check_call``), nothing launched."""

    def measure(self, fn: Callable[..., Any], work: Work, operands: Sequence[Any] = (), flush: str = Flush.COLD,
                label: str = "", prefer_method: str = "", band: Any = None, repeat: bool = False) -> Measurement:
        check_call(fn, work, flush)
        tuple(operands)  # an operand list that is not a sequence fails here as it would on the GPU
        return Measurement(samples_s=(math.nan,), work=work, flush=flush, method=DRY_METHOD, label=label)


#: Draws of at least this many values are stood in for by one value repeated (a dry run needs their shape and
#: dtype, not their values: nothing computes with them), so a case's operands cost what allocating them costs.
STAND_IN_DRAW = 1 << 16


class StandInRng:
    """The ``rng`` fixture of a dry run: NumPy's generator, except that a large draw is one drawn value repeated
    (``STAND_IN_DRAW``): two 2048 × 2048 operands took 0.44 s to draw on this project's CPU machine."""

    def __init__(self, generator: Any) -> None:
        self._generator = generator

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._generator, name)
        if name not in ("uniform", "standard_normal", "normal", "random", "integers", "standard_exponential"):
            return method

        def drawn(*args: Any, size: Any = None, **kwargs: Any) -> Any:
            import numpy

            shape = size if size is not None else (args[-1] if name == "random" and args else None)
            if shape is None or int(numpy.prod(shape)) < STAND_IN_DRAW:
                return method(*args, size=size, **kwargs) if size is not None else method(*args, **kwargs)
            one = method(*(args[:-1] if size is None else args), size=1, **kwargs)
            return numpy.full(shape, one[0], dtype=one.dtype)

        return drawn


@dataclass(frozen=True)
class DryDevice:
    """What the fixtures read of a device: a baseline header's identity (``DeviceInfo``'s names)."""

    index: int
    name: str
    slug: str
    cc: tuple[int, int]
    driver: str
    cuda_runtime: str
    cublas: str
    cupy: str
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    l2_bytes: int = 0

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


class DryStream(StandInStream):
    """The ``stream`` fixture's stand-in: enters, synchronizes and gives its forms, all doing nothing."""

    cuda_core = numba = torch = None

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0)


@dataclass(frozen=True)
class DryContext:
    """``GpuContext``'s stand-in: ``with ctx.device:`` does nothing."""

    index: int
    info: DryDevice
    peaks: DevicePeaks | None
    device: Any = contextlib.nullcontext()
    nvml: Any = None


def _cc(text: Any) -> tuple[int, int]:
    major, _, minor = str(text or "0.0").partition(".")
    return (int(major), int(minor or 0)) if major.isdigit() and (minor or "0").isdigit() else (0, 0)


class DryPool:
    """The GPU pool of a dry run: one stand-in device per baseline file of the project (``--gpu`` numbering)."""

    def __init__(self, baseline_dir: Path) -> None:
        self.baseline_files = sorted(Path(baseline_dir).glob("*.yaml")) if Path(baseline_dir).is_dir() else []
        self.contexts: dict[int, DryContext] = {}

    def devices(self) -> list[tuple[int, str]]:
        slugs = [path.stem for path in self.baseline_files] or [NO_BASELINE_SLUG]
        return [(index, f"dry run of {slug}") for index, slug in enumerate(slugs)]

    def _header(self, index: int) -> dict[str, Any]:
        from gpuperf.store.baseline import load_baseline

        if not self.baseline_files:
            return {"gpu": f"no GPU ({NO_BASELINE_SLUG}: no baseline file)", "slug": NO_BASELINE_SLUG}
        loaded = load_baseline(self.baseline_files[index])
        return dict(loaded.header) if loaded is not None else {"slug": self.baseline_files[index].stem}

    def context(self, index: int) -> DryContext:
        if index not in self.contexts:
            header = self._header(index)
            clocks = header.get("clocks") or {}
            info = DryDevice(index=index, name=str(header.get("gpu") or header["slug"]), slug=str(header["slug"]),
                             cc=_cc(header.get("compute_capability")), driver=str(header.get("driver", "")),
                             cuda_runtime=str(header.get("cuda_runtime", "")), cublas=str(header.get("cublas", "")),
                             cupy=str(header.get("cupy", "")), sm_clock_max_mhz=clocks.get("sm_max_mhz"),
                             mem_clock_mhz=clocks.get("mem_mhz"))
            self.contexts[index] = DryContext(index=index, info=info, peaks=None)
            stand_in = sys.modules.get("cupy")
            if getattr(stand_in, "__gpuperf_dry_run__", False):  # cupy.cuda.Device().compute_capability, as CuPy's
                stand_in.cuda.Device.compute_capability = f"{info.cc[0]}{info.cc[1]}"  # type: ignore[union-attr]
        return self.contexts[index]

    def describe(self, index: int, isolated: bool = False) -> dict[str, Any]:
        """The run header's device: the baseline's own versions, so no version change is reported."""
        info = self.context(index).info
        header = self._header(index)
        return {"index": index, "name": info.name, "slug": info.slug, "cc": info.cc, "driver": info.driver,
                "cuda_runtime": info.cuda_runtime, "cublas": info.cublas, "cupy": info.cupy,
                "sm_clock_max_mhz": info.sm_clock_max_mhz, "mem_clock_mhz": info.mem_clock_mhz,
                "peaks": header.get("peaks"), "kernel_timer": "none: a dry run launches nothing"}

    def stream(self, ctx: DryContext) -> DryStream:
        return DryStream()

    @contextlib.contextmanager
    def current(self, stream: Any) -> Iterator[None]:
        """As ``GpuPool.current``: where the test imported PyTorch, its CUDA tensors are made on ``meta``."""
        from gpuperf.wiring.host_cupy import meta_torch

        meta_torch()
        yield

    def measurer(self, ctx: DryContext, stream: Any, options: Any, flush_mode: str, entry: Any = None,
                 round_band: float | None = None) -> Any:
        from gpuperf.wiring.fixtures import Measurer

        return Measurer(DryTimer(), flush_mode)

    def stand_in_rng(self, generator: Any) -> StandInRng:
        return StandInRng(generator)

    @contextlib.contextmanager
    def bound_cublas_handle(self, ctx: DryContext, stream: Any) -> Iterator[int]:
        yield 0  # a dry run calls no cuBLAS: a test that does is skipped (it does not measure) or calls the stand-in


def install_stand_ins() -> Callable[[], None]:
    """Make ``import cupy`` give the host stand-in (and PyTorch's CUDA tensors meta ones, where it is imported
    already), before the test modules are imported; returns what undoes it, at the session's end."""
    from gpuperf.wiring import host_cupy

    previous = sys.modules.get("cupy")
    sys.modules["cupy"] = host_cupy.module()
    host_cupy.meta_torch()

    def undo() -> None:
        host_cupy.leave_meta_torch()
        if previous is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = previous

    return undo


def configure(config: Any) -> None:
    """The plugin's ``pytest_configure`` of a dry run: the stand-ins installed (undone at the session's end),
    the dry pool in place of the GPU pool."""
    from gpuperf.wiring.stash import OPTIONS, POOL

    config.add_cleanup(install_stand_ins())
    config.stash[POOL] = DryPool(config.stash[OPTIONS].baseline_dir)


def skip_what_does_not_measure(items: Sequence[Any]) -> None:
    """Skip, with the reason, every GPU test that uses neither ``measure`` nor ``perf``."""
    import pytest

    from gpuperf.wiring.roles import uses_suite

    for item in items:
        if uses_suite(item) and {"measure", "perf"}.isdisjoint(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.skip(reason=NOT_A_PERF_TEST))
