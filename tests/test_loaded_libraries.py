"""tools/gpu_host/loaded_libraries.py: the CUDA libraries a process mapped, each told as a wheel's, the driver's or a
toolkit's, from a ``/proc/<pid>/maps`` text."""

from __future__ import annotations

from tools.gpu_host.loaded_libraries import mapped_cuda_libraries, source_of

SITE = "/usr/lib/python3/site-packages/nvidia/cu13/lib"
MAPS = f"""\
7f0000000000-7f0000100000 r-xp 00000000 08:01 123 {SITE}/libcublasLt.so.13
7f0000100000-7f0000200000 r--p 00100000 08:01 123 {SITE}/libcublasLt.so.13
7f0000300000-7f0000400000 r-xp 00000000 08:01 124 /usr/local/cuda-13.0/lib64/libnvrtc.so.13.0.48
7f0000500000-7f0000600000 r-xp 00000000 08:01 125 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
7f0000700000-7f0000800000 r-xp 00000000 08:01 126 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000900000-7f0000a00000 rw-p 00000000 00:00 0
7f0000b00000-7f0000c00000 r-xp 00000000 08:01 127 {SITE}/libcupti.so.13
"""


def test_each_cuda_library_is_named_once_with_the_folder_it_came_from() -> None:
    found = mapped_cuda_libraries(MAPS)
    assert set(found) == {"libcublasLt.so.13", "libnvrtc.so.13.0.48", "libcuda.so.580.159.04", "libcupti.so.13"}
    assert {name: source_of(path) for name, path in found.items()} == {
        "libcublasLt.so.13": "wheel", "libcupti.so.13": "wheel", "libnvrtc.so.13.0.48": "toolkit",
        "libcuda.so.580.159.04": "driver"}
