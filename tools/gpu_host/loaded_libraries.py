"""A pytest plugin for a GPU host's driver-only check: at the end of the session, every CUDA library the process
has mapped (``/proc/self/maps``) and the folder it came from, written to ``$GPUPERF_LOADED_LIBRARIES`` as
``library<TAB>path<TAB>source`` lines, where source is ``wheel`` (a site-packages folder), ``driver`` (the driver's
own libcuda/libnvidia-*, which a host always provides) or ``toolkit`` (anything else: a CUDA toolkit install).

    GPUPERF_LOADED_LIBRARIES=$OUT/libraries.tsv pytest perf_tests -p tools.gpu_host.loaded_libraries
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

#: The libraries of CUDA the suite loads (and the driver's, reported apart).
CUDA_LIBRARY = re.compile(r"/(lib(?:cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|cupti|nvJitLink|cuda|nvidia-[\w-]+|"
                          r"cufft|curand|cusparse|cusolver|nvToolsExt)[\w.-]*\.so[\w.]*)$")
DRIVER = re.compile(r"^lib(?:cuda|nvidia-[\w-]+)\.so")


def source_of(path: str) -> str:
    name = Path(path).name
    if "site-packages" in path or "dist-packages" in path:
        return "wheel"
    if DRIVER.match(name):
        return "driver"
    return "toolkit"


def mapped_cuda_libraries(maps: str) -> dict[str, str]:
    """Library file name -> the path it was mapped from, for every CUDA library in a ``/proc/<pid>/maps`` text."""
    found: dict[str, str] = {}
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if len(line.split(maxsplit=5)) == 6 else ""
        match = CUDA_LIBRARY.search(path)
        if match:
            found.setdefault(match.group(1), os.path.realpath(path))
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get("GPUPERF_LOADED_LIBRARIES")
    if not target:
        return
    libraries = mapped_cuda_libraries(Path("/proc/self/maps").read_text())
    lines = [f"{name}\t{path}\t{source_of(path)}" for name, path in sorted(libraries.items())]
    Path(target).write_text("\n".join(lines) + "\n")
