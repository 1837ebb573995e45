"""A GPU host with only a driver: every CUDA library the suite opens comes from an installed wheel (``gpu`` extra).

Checked in the environment the tests run in, installing nothing: where the ``gpu`` extra (or ``cuda12``) is
installed, every library and header of ``wheel_libraries.LIBRARIES`` must be a file of an installed wheel, whatever
CUDA toolkit the machine also has; where it is not, the check skips with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf.install.wheel_libraries import LIBRARIES, installed_cuda_major, missing, wheel_files


def _major_or_skip() -> int:
    major = installed_cuda_major()
    if major is None:
        pytest.skip("the gpu extra is not installed here (no cupy-cuda13x or cupy-cuda12x): nothing to check; "
                    "pip install -e '.[gpu,test]' to check it")
    return major


def test_every_library_the_suite_opens_is_in_an_installed_wheel() -> None:
    major = _major_or_skip()
    assert missing(major, wheel_files()) == []


def test_a_library_no_wheel_holds_is_named_with_the_extra_that_brings_it(tmp_path: Path) -> None:
    present = {f"nvidia/cu13/lib/lib{name}.so.13": tmp_path / name for name in ("cudart", "cublas", "nvrtc", "cupti")}
    present.update({f"nvidia/cu13/include/{name}": tmp_path / name.replace("/", "_")
                    for name in ("mma.h", "crt/mma.h", "cuda_fp16.h")})
    for path in present.values():
        path.touch()
    assert missing(13, present) == [
        "libcublasLt.so.13 (cublasLt, opened by nvmath-python's cuBLASLt binding (kernels/cublaslt.py, "
        "kernels/cublaslt_fp8.py); cuBLAS) is in no installed wheel: pip install -e '.[cublaslt]'"]
    del present["nvidia/cu13/include/crt/mma.h"]
    assert any(line.startswith("header (crt/mma.h,") and line.endswith("'.[cuda13]'")
               for line in missing(13, present))
    assert missing(12, present)[0].startswith("libcudart.so.12 ")  # a CUDA 13 wheel is no CUDA 12 library


def test_the_cupy_installed_names_the_cuda_major() -> None:
    assert installed_cuda_major(["numpy", "cupy-cuda13x"]) == 13
    assert installed_cuda_major(["cupy-cuda12x"]) == 12
    assert installed_cuda_major(["numpy"]) is None


@pytest.mark.long
def test_cuda_pathfinder_loads_each_library_from_site_packages_with_system_paths_hidden() -> None:
    """How nvmath-python and cuda-bindings find them: cuda-pathfinder, in a process whose environment names no CUDA
    path, must load each from site-packages (a system toolkit would be ``found_via`` something else)."""
    _major_or_skip()
    pytest.importorskip("cuda.pathfinder", reason="cuda-pathfinder is not installed (the cublaslt extra brings it)")
    names = [library.name for library in LIBRARIES if not library.header]
    probe = ("import json, sys, cuda.pathfinder as p\n"
             "print(json.dumps({n: p.load_nvidia_dynamic_lib(n).found_via for n in sys.argv[1:]}))")
    env = {key: value for key, value in os.environ.items()
           if key not in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH")}
    out = subprocess.run([sys.executable, "-c", probe, *names], capture_output=True, text=True, env=env,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == {name: "site-packages" for name in names}


class _NoDriverLt:
    """nvmath-python's cuBLASLt binding on a machine without a driver: its loader refuses, as nvmath does."""

    @staticmethod
    def get_version() -> int:
        raise RuntimeError("CUDA driver is not found (libcuda.so.1: cannot open shared object file)")


@pytest.mark.parametrize(("driver", "cause", "fix"), [
    (False, "no NVIDIA driver is installed", "runs on an NVIDIA GPU with its driver"),
    (True, "cuBLASLt is not usable", "pip install -e '.[cublaslt]'"),
])
def test_the_cublaslt_skip_reason_names_the_real_cause(monkeypatch: pytest.MonkeyPatch, driver: bool, cause: str,
                                                       fix: str) -> None:
    from kernels import cublaslt

    monkeypatch.setattr(cublaslt, "_bindings", lambda: (object(), _NoDriverLt, object()))
    monkeypatch.setattr(cublaslt, "driver_installed", lambda: driver)
    cublaslt.available.cache_clear()
    try:
        reason = cublaslt.available()
    finally:
        cublaslt.available.cache_clear()
    assert reason is not None and reason.startswith(("no NVIDIA driver", "nvmath-python is installed")) \
        and cause in reason and fix in reason
    assert ("nvmath-python[cu13]" in reason) is driver  # a package is named only where one would fix it
