#!/usr/bin/env python3
"""Contention demo: a GEMM case measured while another process keeps the same GPU busy must come
out UNRELIABLE (or re-measured), never silently passed or failed.

    python ci/contention_demo.py                                   # one 4096³ SGEMM perf case, 150 s budget
    python ci/contention_demo.py -k "test_gemm_perf and fp16-nn-4096x4096x4096" --gpu 1 -- -v

1. start a separate Python process that runs a CuPy GEMM loop on the same GPU; it stops by itself after
   the budget (``--seconds`` + a margin) even if this script dies;
2. wait until its loop is running;
3. run ``pytest perf_tests -k <selection> -p no:cacheprovider`` in the foreground, under a timeout;
4. stop the busy process (SIGINT, then SIGKILL after a grace period) and print what it did;
5. print pytest's output and a verdict per case from its JUnit XML.

Exit code: 0 when every selected case was reported unreliable, 1 when one passed or failed as if nothing
were wrong (or nothing was selected), 2 when the demo itself could not run (no busy process, timeout).
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SELECTION = "test_gemm_perf and fp32-nn-4096x4096x4096"
#: Seconds the busy process outlives the pytest timeout, so the case never sees the contention end early.
BUSY_MARGIN_S = 30.0
#: Seconds to wait for the busy process to start its loop (CuPy import, context, first GEMM).
START_TIMEOUT_S = 60.0
#: Seconds between SIGINT and SIGKILL when stopping the busy process.
STOP_GRACE_S = 15.0

#: The competing process: a GEMM loop on one device until its deadline or SIGINT. It synchronises every few
#: launches, so it checks the deadline often and never queues more than a few hundred ms of work.
BUSY_LOOP = r"""
import sys, time
import cupy
seconds, device, n = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + seconds
cupy.cuda.Device(device).use()
a = cupy.random.rand(n, n, dtype=cupy.float32)
b = cupy.random.rand(n, n, dtype=cupy.float32)
c = cupy.empty((n, n), dtype=cupy.float32)
done, start = 0, time.monotonic()
try:
    cupy.matmul(a, b, out=c)
    cupy.cuda.Device(device).synchronize()
    print("busy: ready", flush=True)
    while time.monotonic() < deadline:
        for _ in range(4):
            cupy.matmul(a, b, out=c)
        cupy.cuda.Device(device).synchronize()
        done += 4
except KeyboardInterrupt:
    pass
elapsed = time.monotonic() - start
print(f"busy: {done} GEMMs of {n}x{n}x{n} fp32 in {elapsed:.1f} s ({2.0 * n**3 * done / elapsed / 1e12:.1f} TFLOPS)",
      flush=True)
"""


class DemoError(RuntimeError):
    """The demo could not set up its contention; the message names the cause."""


@dataclass(frozen=True)
class CaseResult:
    name: str
    outcome: str  # "passed" | "failed" | "skipped" | "error"
    message: str

    @property
    def unreliable(self) -> bool:
        return "unreliable" in self.message.lower()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", dest="selection", default=DEFAULT_SELECTION,
                        help=f"pytest -k expression of the GEMM case(s) to run (default: {DEFAULT_SELECTION!r})")
    parser.add_argument("--seconds", type=float, default=150.0,
                        help="timeout of the pytest run; the busy loop lasts this plus a margin (default 150)")
    parser.add_argument("--gpu", type=int, default=0, help="device index for both processes (default 0)")
    parser.add_argument("--size", type=int, default=8192, help="square size of the busy GEMM (default 8192)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.size < 1:
        parser.error("--seconds and --size must be positive")
    return args


def _pump(stream: object, lines: queue.Queue[str]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        lines.put(line)


def start_busy(seconds: float, gpu: int, size: int
               ) -> tuple[subprocess.Popen[str], queue.Queue[str], threading.Thread]:
    """Start the GEMM loop and return once it runs; raises ``DemoError`` when it does not start."""
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(seconds), str(gpu), str(size)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(busy.stdout, lines), daemon=True)
    reader.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if busy.poll() is not None:
                break
            continue
        seen.append(line)
        if line.startswith("busy: ready"):
            return busy, lines, reader
    code = busy.poll()
    stop_busy(busy)
    what = f"exited with code {code}" if code is not None else f"did not start within {START_TIMEOUT_S:.0f} s"
    raise DemoError(f"the busy GEMM process {what} (is CuPy installed and GPU {gpu} usable?); its output:\n"
                    + "".join(seen))


def stop_busy(busy: subprocess.Popen[str]) -> None:
    """SIGINT (the loop reports what it did), then SIGKILL if it does not exit within the grace period."""
    if busy.poll() is not None:
        return
    busy.send_signal(signal.SIGINT)
    try:
        busy.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        busy.kill()
        busy.wait(timeout=STOP_GRACE_S)


def run_pytest(args: argparse.Namespace, junit: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "perf_tests", "-k", args.selection, "-p", "no:cacheprovider",
               "-rA", "--gpu", str(args.gpu), f"--junitxml={junit}", *args.pytest_args]
    print("$", " ".join(command), flush=True)
    try:
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.seconds,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise DemoError(f"pytest did not finish within {args.seconds:.0f} s: raise --seconds or select fewer "
                        "cases") from exc


def case_results(junit: Path) -> list[CaseResult]:
    """Each test case's outcome and message from pytest's JUnit XML."""
    results = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = f"{element.get('message', '')} {element.text or ''}".strip()
                break
        results.append(CaseResult(name, outcome, message))
    return results


def verdict(results: list[CaseResult]) -> tuple[bool, list[str]]:
    if not results:
        return False, ["no case was selected: check the -k expression against `pytest perf_tests --co -q`"]
    lines, ok = [], True
    for result in results:
        if result.unreliable:
            lines.append(f"OK       {result.name}: {result.outcome}, marked unreliable — {result.message}")
        else:
            ok = False
            lines.append(f"PROBLEM  {result.name}: {result.outcome} under contention without being marked "
                         f"unreliable{(' — ' + result.message) if result.message else ''}")
    return ok, lines


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.chdir(ROOT)
    try:
        busy, busy_lines, reader = start_busy(args.seconds + BUSY_MARGIN_S, args.gpu, args.size)
    except DemoError as exc:
        print(f"contention_demo: {exc}", file=sys.stderr)
        return 2
    print(f"busy GEMM loop running as pid {busy.pid} on GPU {args.gpu}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        try:
            completed = run_pytest(args, junit)
        except DemoError as exc:
            print(f"contention_demo: {exc}", file=sys.stderr)
            return 2
        finally:
            stop_busy(busy)
            reader.join(timeout=STOP_GRACE_S)
            while not busy_lines.empty():
                print(busy_lines.get(), end="")
        print(completed.stdout, completed.stderr, sep="\n")
        if not junit.exists():
            print(f"contention_demo: pytest wrote no JUnit XML (exit code {completed.returncode})", file=sys.stderr)
            return 2
        ok, lines = verdict(case_results(junit))
    print("\n".join(["contention verdict:", *lines, f"pytest exit code: {completed.returncode} (non-zero in gate "
                                                    "mode: an unmeasured baselined case fails the run)"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
