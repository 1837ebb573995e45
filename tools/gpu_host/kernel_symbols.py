"""Gather real kernel symbols from the CUDA libraries a GPU machine has (PyTorch's, cuBLAS's, cuDNN's): the names
CUPTI reports for their kernels, as data for the short-name tests (``tests/data/kernel-symbols.tsv``).

``cuobjdump -symbols -arch sm_90`` lists each embedded cubin's symbol table; a kernel is an ``STT_FUNC`` marked
``STO_ENTRY``. Every library is read in a process of its own, in parallel, each cut off after ``--timeout`` seconds;
from each, up to ``--per-library`` symbols are kept, spread evenly over its sorted list, so every library and every
kind of name is represented.

    python3 tools/gpu_host/kernel_symbols.py --out kernel-symbols.tsv      # on the GPU machine: library<TAB>symbol lines
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
import shutil
import subprocess
import sys
from pathlib import Path

_ENTRY = re.compile(r"^STT_FUNC\b.*\bSTO_ENTRY\b\s+(\S+)\s*$")


def libraries() -> list[Path]:
    """PyTorch's CUDA libraries and the NVIDIA wheels' cuBLAS and cuDNN, where this Python has them."""
    found: list[Path] = []
    try:
        import torch

        found += sorted(Path(torch.__file__).parent.joinpath("lib").glob("lib*cuda*.so*"))
    except ImportError:
        pass
    try:
        import nvidia

        for root in (Path(p) for p in nvidia.__path__):  # nvidia/<lib>/lib/ (CUDA 12 wheels), nvidia/cu13/lib/
            for pattern in ("*/lib/libcublas*.so*", "*/lib/libcudnn*.so*", "*/lib/libcusparse*.so*",
                            "*/lib/libcufft.so*"):
                found += sorted(root.glob(pattern))
    except ImportError:
        pass
    return [path for path in dict.fromkeys(found) if path.is_file()]


def symbols(library: Path, timeout_s: float) -> tuple[Path, list[str], str]:
    try:
        out = subprocess.run(["cuobjdump", "-symbols", "-arch", "sm_90", str(library)], capture_output=True,
                             text=True, errors="replace", timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        note = f"cut off after {timeout_s:.0f} s"
    else:
        text, note = out.stdout, f"exit {out.returncode}"
    names = sorted({match.group(1) for line in text.splitlines() if (match := _ENTRY.match(line.strip()))})
    return library, names, note


def spread(names: list[str], count: int) -> list[str]:
    if len(names) <= count:
        return names
    step = len(names) / count
    return [names[int(i * step)] for i in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-library", type=int, default=600)
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--match", default="", help="only the libraries whose file name holds this (e.g. cublas)")
    args = parser.parse_args()
    if shutil.which("cuobjdump") is None:
        print("kernel_symbols.py: cuobjdump is not on PATH", file=sys.stderr)
        return 1
    rows: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for library, names, note in pool.map(lambda lib: symbols(lib, args.timeout),
                                               [lib for lib in libraries() if args.match in lib.name]):
            kept = spread(names, args.per_library)
            print(f"{library.name}: {len(names)} kernels ({note}), {len(kept)} kept", flush=True)
            rows += [f"{library.name}\t{name}" for name in kept]
    args.out.write_text("\n".join(rows) + "\n")
    print(f"{len(rows)} symbols written to {args.out}")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
