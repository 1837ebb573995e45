"""Find a CUDA toolkit include directory that can compile ``#include <mma.h>`` under NVRTC.

NVRTC searches no include directory of its own for the WMMA header: ``<mma.h>`` needs ``-I`` pointing at
a toolkit's ``include/``. ``mma.h`` itself is only a stub that includes ``crt/mma.h`` (and
``cuda_fp16.h``), and those come from different packages: in the pip layout ``mma.h`` and
``cuda_fp16.h`` ship in ``nvidia-cuda-runtime`` but ``crt/mma.h`` in ``nvidia-cuda-crt`` (or with
``nvcc``). A directory qualifies only when it holds all three, so a runtime-only pip install is
reported as missing instead of failing inside NVRTC.

Pure Python (no CuPy): ``tests/test_cuda_headers.py`` checks the search on temporary directories.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: What a directory must hold, relative to itself, to compile WMMA code.
REQUIRED_HEADERS: tuple[str, ...] = ("mma.h", "crt/mma.h", "cuda_fp16.h")

#: The fix, for skip reasons and errors.
MISSING_HEADERS_HINT = (
    "install the CUDA toolkit headers (cuda-toolkit / nvidia-cuda-runtime dev headers) or set CUDA_PATH"
)

#: Where pip wheels put the headers, relative to a site-packages directory (CUDA 13 unified layout
#: first, then CUDA 12's one-package-per-component layout).
PIP_INCLUDE_DIRS: tuple[str, ...] = (
    "nvidia/cu13/include",
    "nvidia/cu12/include",
    "nvidia/cuda_runtime/include",
    "nvidia/cuda_nvcc/include",
)

#: Roots of system toolkits, searched after the environment and ``nvcc``.
SYSTEM_ROOTS: tuple[str, ...] = ("/usr/local/cuda", "/opt/cuda")


def has_mma_headers(directory: Path) -> bool:
    """Whether ``directory`` holds every header in ``REQUIRED_HEADERS``."""
    return all((directory / name).is_file() for name in REQUIRED_HEADERS)


def _version_key(path: Path) -> tuple[int, ...]:
    """``/usr/local/cuda-12.10`` sorts after ``/usr/local/cuda-12.9``; non-numeric suffixes sort first."""
    return tuple(int(part) for part in re.findall(r"\d+", path.name))


def _toolkit_includes(root: Path) -> list[Path]:
    """A toolkit root's include directories: ``include/`` and the ``targets/<arch>/include`` of newer layouts."""
    found = [root / "include"]
    targets = root / "targets"
    if targets.is_dir():
        found.extend(sorted(p / "include" for p in targets.iterdir() if p.is_dir()))
    return found


def default_site_dirs() -> list[Path]:
    """site-packages directories of this interpreter (system, user, and ``sys.path`` entries)."""
    dirs: list[str] = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # some virtualenv builds lack it
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs.extend(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return [Path(d) for d in dict.fromkeys(dirs)]


@dataclass(frozen=True)
class HeaderSearch:
    """Where to look; every field defaults to this machine, and tests replace them with temporary paths.

    Order of preference (``candidates``):
    1. ``$CUDA_PATH`` then ``$CUDA_HOME`` (``include/`` and ``targets/*/include``);
    2. the toolkit of the ``nvcc`` on ``PATH`` (``<bin>/../include``; symlinks are followed, so
       ``/usr/bin/nvcc -> /usr/local/cuda-13.0/bin/nvcc`` finds that toolkit);
    3. ``/usr/local/cuda``, ``/opt/cuda``, then ``/usr/local/cuda-*``, newest version first;
    4. the pip wheels' include directories in each site-packages directory.
    """

    environ: Mapping[str, str] | None = None
    which: Callable[[str], str | None] = shutil.which
    system_roots: tuple[Path, ...] = tuple(Path(p) for p in SYSTEM_ROOTS)
    versioned_parent: Path = Path("/usr/local")
    site_dirs: tuple[Path, ...] | None = None

    def candidates(self) -> list[Path]:
        """Every directory worth looking at, most preferred first, without duplicates."""
        env = os.environ if self.environ is None else self.environ
        out: list[Path] = []
        for var in ("CUDA_PATH", "CUDA_HOME"):
            value = env.get(var)
            if value:
                out.extend(_toolkit_includes(Path(value)))
        nvcc = self.which("nvcc")
        if nvcc:
            out.extend(_toolkit_includes(Path(os.path.realpath(nvcc)).parent.parent))
        for root in self.system_roots:
            out.extend(_toolkit_includes(root))
        if self.versioned_parent.is_dir():
            for root in sorted(self.versioned_parent.glob("cuda-*"), key=_version_key, reverse=True):
                out.extend(_toolkit_includes(root))
        for site_dir in default_site_dirs() if self.site_dirs is None else self.site_dirs:
            out.extend(site_dir / rel for rel in PIP_INCLUDE_DIRS)
        return list(dict.fromkeys(out))

    def find(self) -> Path | None:
        """The first candidate that holds every header in ``REQUIRED_HEADERS``, or ``None``."""
        return next((d for d in self.candidates() if has_mma_headers(d)), None)


def find_cuda_include(search: HeaderSearch | None = None) -> str | None:
    """The NVRTC option ``-I<dir>`` for the first directory that can compile ``<mma.h>``, or ``None``."""
    directory = (search or HeaderSearch()).find()
    return None if directory is None else f"-I{directory}"


def missing_headers_reason(search: HeaderSearch | None = None) -> str | None:
    """``None`` when WMMA code can be compiled, else a skip reason that names the fix."""
    if (search or HeaderSearch()).find() is not None:
        return None
    return f"no CUDA include directory with {', '.join(REQUIRED_HEADERS)} for NVRTC: {MISSING_HEADERS_HINT}"
