"""The CUDA libraries the suite loads, which extra brings each as a wheel, and whether this environment has them.

A GPU host needs the driver and nothing more: CuPy's ``ctk`` extra, nvmath-python's ``cu13`` extra, cupti-python and
``cuda-toolkit[crt]`` bring the libraries and headers below as NVIDIA's wheels (``pyproject.toml``), and
cuda-pathfinder (which nvmath-python and cuda-bindings load them with) finds them in site-packages first. A library
found here is found in the files of an installed distribution: no system path (``LD_LIBRARY_PATH``, ``CUDA_PATH``,
``/usr/local/cuda``) is looked at, so a machine with a CUDA toolkit cannot hide a missing wheel.
``tests/test_wheel_libraries.py`` checks the test environment with it.

Pure: package metadata only, no CUDA.


PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


@dataclass(frozen=True)
class Library:
    """A library (``lib<name>.so.<major>``) or header (a path under ``include/``) the suite opens."""

    name: str  # as cuda-pathfinder names it (``load_nvidia_dynamic_lib``), or the header's path
    loaded_by: str  # which part of the suite opens it
    extra: str  # the gpuperf extra that brings it
    header: bool = False

    def pattern(self, cuda_major: int) -> re.Pattern[str]:
        """The installed file's name: ``libcublasLt.so.13`` (or ``.so.13.x``), a header by its path."""
        if self.header:
            return re.compile(rf"(^|/)include/{re.escape(self.name)}$")
        return re.compile(rf"(^|/)lib{re.escape(self.name)}\.so\.{cuda_major}(\.[\d.]+)?$")


#: Every library the default selection opens (grep ``kernels/`` and ``gpuperf/measure/`` for what loads one), by
#: the CUDA extra of the driver's major (``cuda13`` inside ``gpu``). CUPTI follows the runtime's major, the others
#: too; cuRAND and cuFFT's majors differ from CUDA's, so they are named by what CuPy needs only (none here).
LIBRARIES: tuple[Library, ...] = (
    Library("cudart", "CuPy (every device array and kernel)", "cuda"),
    Library("cublas", "CuPy's cuBLAS binding (kernels/cublas.py)", "cuda"),
    Library("cublasLt", "nvmath-python's cuBLASLt binding (kernels/cublaslt.py, kernels/cublaslt_fp8.py); cuBLAS",
            "cublaslt"),
    Library("nvrtc", "CuPy's RawModule and RawKernel (kernels/custom.py), its element-wise kernels", "cuda"),
    Library("cupti", "cupti-python, the kernel tracer (gpuperf/measure/cupti_trace.py)", "cuda"),
    Library("mma.h", "the WMMA kernels' NVRTC include (kernels/cuda_headers.py)", "cuda", header=True),
    Library("crt/mma.h", "the WMMA kernels' NVRTC include (kernels/cuda_headers.py)", "cuda", header=True),
    Library("cuda_fp16.h", "the FP16 kernels' NVRTC include (kernels/cuda_headers.py)", "cuda", header=True),
)

#: The CuPy distribution of each CUDA major: which one is installed says which libraries the suite will open.
CUPY_DISTRIBUTIONS = {13: "cupy-cuda13x", 12: "cupy-cuda12x"}


def installed_cuda_major(installed: Iterable[str] | None = None) -> int | None:
    """The CUDA major of the installed CuPy (``None``: none is installed, so no GPU extra is)."""
    names = set(installed) if installed is not None else {
        (dist.metadata["Name"] or "").lower() for dist in metadata.distributions()}
    return next((major for major, name in CUPY_DISTRIBUTIONS.items() if name in names), None)


def extra_of(library: Library, cuda_major: int) -> str:
    """The extra that brings ``library`` for that major (``gpu`` is ``cuda13`` + ``cublaslt``)."""
    if library.extra == "cuda":
        return f"cuda{cuda_major}"
    return library.extra


#: The distributions that ship CUDA's libraries and headers (NVIDIA's ``nvidia-*`` wheels; ``cuda-*``, CuPy's):
#: the others' files are not read.
CUDA_DISTRIBUTION = re.compile(r"^(nvidia-|cuda-|cupy|cupti)", re.IGNORECASE)


def wheel_files(distributions: Iterable[metadata.Distribution] | None = None) -> dict[str, Path]:
    """Every file the installed CUDA distributions list (their RECORD), by its path inside site-packages."""
    found: dict[str, Path] = {}
    for dist in distributions if distributions is not None else metadata.distributions():
        if not CUDA_DISTRIBUTION.match(dist.metadata["Name"] or ""):
            continue
        for file in dist.files or ():
            found[str(file).replace("\\", "/")] = Path(str(dist.locate_file(file)))
    return found


def missing(cuda_major: int, files: dict[str, Path]) -> list[str]:
    """One line per library no installed wheel holds: the library, what opens it, and the extra that brings it."""
    lines = []
    for library in LIBRARIES:
        pattern = library.pattern(cuda_major)
        if not any(pattern.search(path) and located.exists() for path, located in files.items()):
            what = "header" if library.header else f"lib{library.name}.so.{cuda_major}"
            lines.append(f"{what} ({library.name}, opened by {library.loaded_by}) is in no installed wheel: "
                         f"pip install -e '.[{extra_of(library, cuda_major)}]'")
    return lines
