"""Offline NVRTC build of one kernels/cuda file as kernels.custom builds it (local includes expanded, -D defines).

Offline (no GPU) set-up, once: python3 -m venv /tmp/nvrtc && /tmp/nvrtc/bin/pip install nvidia-cuda-nvrtc \
    nvidia-cuda-crt nvidia-cuda-runtime cuda-bindings
Usage: /tmp/nvrtc/bin/python tools/generators/nvrtc_check.py FILE.cu [-DNAME=VALUE ...] [--sass OUT.sass]
Prints ptxas -v (registers, smem, spills) per kernel; exit 1 on a compile error or any spill."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from cuda.bindings import nvrtc  # noqa: E402
import nvidia  # noqa: E402

from kernels.custom import load_source
import kernels.custom as kc
if os.environ.get("CUDA_SRC_DIR"): kc.CUDA_DIR = __import__("pathlib").Path(os.environ["CUDA_SRC_DIR"])  # noqa: E402

args = sys.argv[1:]
name = os.path.basename(args[0])
defines = [a for a in args[1:] if a.startswith("-D")]
sass = args[args.index("--sass") + 1] if "--sass" in args else None
inc = os.path.join(list(nvidia.__path__)[0], "cu13", "include")
src = load_source(name).encode()
err, prog = nvrtc.nvrtcCreateProgram(src, name.encode(), 0, [], [])
opts = [b"-arch=sm_90", b"-std=c++17", b"--ptxas-options=-v", f"-I{inc}".encode(), *(d.encode() for d in defines)]
res, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[:1]
_, size = nvrtc.nvrtcGetProgramLogSize(prog)
log = b" " * size
nvrtc.nvrtcGetProgramLog(prog, log)
text = log.decode(errors="replace")
if res != nvrtc.nvrtcResult.NVRTC_SUCCESS:
    print(text)
    print("COMPILE FAILED", res)
    sys.exit(1)
spills = False
for block in re.split(r"(?=ptxas info    : Compiling entry function)", text):
    m = re.search(r"entry function '(\w+)'", block)
    if not m:
        continue
    regs = re.search(r"Used (\d+) registers", block)
    smem = re.search(r"(\d+) bytes smem", block)
    stack = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block)
    st = tuple(int(x) for x in stack.groups()) if stack else (0, 0, 0)
    spills |= any(st)
    print(f"{m[1]:40s} regs={regs[1] if regs else '?':>4} smem={smem[1] if smem else 0:>6} "
          f"stack={st[0]} spill_st={st[1]} spill_ld={st[2]}  {' '.join(defines)}")
if sass:
    _, csize = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * csize
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    with open(sass + ".cubin", "wb") as f:
        f.write(cubin)
    tool = os.path.join(list(nvidia.__path__)[0], "cu13", "bin", "cuobjdump")
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
    with open(sass, "w") as f:
        subprocess.run([tool, "-sass", sass + ".cubin"], stdout=f, check=True, env=env)
sys.exit(1 if spills else 0)
