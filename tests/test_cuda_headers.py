"""CPU tests of ``kernels.cuda_headers``: where the WMMA headers are looked for, and what counts as found.

Every search runs over temporary directories only: ``HeaderSearch`` takes the environment, the ``which``
lookup, the system roots, the parent of versioned toolkits and the site-packages directories as values,
so nothing on this machine's real toolkits can change a result.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernels.cuda_headers import (
    MISSING_HEADERS_HINT,
    REQUIRED_HEADERS,
    HeaderSearch,
    find_cuda_include,
    has_mma_headers,
    missing_headers_reason,
)


def _toolkit(root: Path, *, complete: bool = True) -> Path:
    """A fake toolkit root whose include/ holds the WMMA headers (all, or all but crt/mma.h)."""
    include = root / "include"
    for name in REQUIRED_HEADERS:
        if complete or name != "crt/mma.h":
            (include / name).parent.mkdir(parents=True, exist_ok=True)
            (include / name).write_text("// fake\n")
    return include


def _search(tmp_path: Path, environ: dict[str, str] | None = None, nvcc: Path | None = None,
            site_dirs: tuple[Path, ...] = ()) -> HeaderSearch:
    empty = tmp_path / "nothing"
    return HeaderSearch(environ=environ or {}, which=lambda _: None if nvcc is None else str(nvcc),
                        system_roots=(tmp_path / "usr-local-cuda",), versioned_parent=tmp_path / "usr-local",
                        site_dirs=site_dirs or (empty,))


def test_nothing_found_gives_none_and_a_reason_naming_the_fix(tmp_path: Path) -> None:
    search = _search(tmp_path)
    assert search.find() is None
    assert find_cuda_include(search) is None
    reason = missing_headers_reason(search)
    assert reason is not None
    assert MISSING_HEADERS_HINT in reason
    assert "CUDA_PATH" in reason and "mma.h" in reason


def test_cuda_path_wins_and_is_returned_as_an_include_option(tmp_path: Path) -> None:
    env_inc = _toolkit(tmp_path / "env-cuda")
    _toolkit(tmp_path / "usr-local-cuda")
    search = _search(tmp_path, environ={"CUDA_PATH": str(tmp_path / "env-cuda")})
    assert search.find() == env_inc
    assert find_cuda_include(search) == f"-I{env_inc}"
    assert missing_headers_reason(search) is None


def test_cuda_home_is_used_when_cuda_path_is_unset(tmp_path: Path) -> None:
    home_inc = _toolkit(tmp_path / "home-cuda")
    assert _search(tmp_path, environ={"CUDA_HOME": str(tmp_path / "home-cuda")}).find() == home_inc


def test_cuda_path_before_cuda_home(tmp_path: Path) -> None:
    path_inc = _toolkit(tmp_path / "a")
    _toolkit(tmp_path / "b")
    search = _search(tmp_path, environ={"CUDA_PATH": str(tmp_path / "a"), "CUDA_HOME": str(tmp_path / "b")})
    assert search.find() == path_inc


def test_a_runtime_only_include_dir_does_not_count(tmp_path: Path) -> None:
    """mma.h without crt/mma.h (the pip nvidia-cuda-runtime wheel alone) fails inside NVRTC: skip it."""
    partial = _toolkit(tmp_path / "env-cuda", complete=False)
    assert not has_mma_headers(partial)
    full = _toolkit(tmp_path / "usr-local-cuda")
    assert _search(tmp_path, environ={"CUDA_PATH": str(tmp_path / "env-cuda")}).find() == full


def test_nvcc_on_path_finds_its_toolkit_through_a_symlink(tmp_path: Path) -> None:
    include = _toolkit(tmp_path / "opt" / "cuda-13.0")
    real_nvcc = tmp_path / "opt" / "cuda-13.0" / "bin" / "nvcc"
    real_nvcc.parent.mkdir(parents=True)
    real_nvcc.write_text("#!/bin/sh\n")
    link = tmp_path / "bin" / "nvcc"
    link.parent.mkdir()
    os.symlink(real_nvcc, link)
    assert _search(tmp_path, nvcc=link).find() == include


def test_nvcc_comes_before_the_system_roots(tmp_path: Path) -> None:
    nvcc_inc = _toolkit(tmp_path / "tk")
    nvcc = tmp_path / "tk" / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("")
    _toolkit(tmp_path / "usr-local-cuda")
    assert _search(tmp_path, nvcc=nvcc).find() == nvcc_inc


def test_targets_layout_of_a_toolkit_is_searched(tmp_path: Path) -> None:
    include = _toolkit(tmp_path / "usr-local-cuda" / "targets" / "x86_64-linux")
    assert _search(tmp_path).find() == include


def test_versioned_toolkits_newest_first(tmp_path: Path) -> None:
    parent = tmp_path / "usr-local"
    _toolkit(parent / "cuda-12.9")
    newest = _toolkit(parent / "cuda-12.10")
    _toolkit(parent / "cuda-11.8")
    (parent / "cuda-13.0").mkdir(parents=True)  # a newer version without headers is passed over
    assert _search(tmp_path).find() == newest


def test_pip_wheel_layouts_in_site_packages(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    unified = site / "nvidia" / "cu13" / "include"
    _toolkit(unified.parent)
    assert _search(tmp_path, site_dirs=(site,)).find() == unified


def test_system_toolkit_before_pip_wheels(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    _toolkit(site / "nvidia" / "cu13")
    system = _toolkit(tmp_path / "usr-local-cuda")
    assert _search(tmp_path, site_dirs=(site,)).find() == system


def test_candidates_have_no_duplicates(tmp_path: Path) -> None:
    root = tmp_path / "usr-local-cuda"
    search = _search(tmp_path, environ={"CUDA_PATH": str(root), "CUDA_HOME": str(root)})
    candidates = search.candidates()
    assert len(candidates) == len(set(candidates))
    assert candidates[0] == root / "include"


@pytest.mark.parametrize("missing", REQUIRED_HEADERS)
def test_every_required_header_is_needed(tmp_path: Path, missing: str) -> None:
    include = _toolkit(tmp_path / "tk")
    (include / missing).unlink()
    assert not has_mma_headers(include)
