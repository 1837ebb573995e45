"""The worst time of ``short_name`` and ``spelled_name`` over adversarial symbol families at 1 KB, 100 KB and 1 MB
(the hostile-input target: 50 ms for any string up to 1 MB): the process's CPU time, the least of five readings (on a
machine shared with other work, wall time measures the others)::

    python3 tools/generators/bench_kernel_names.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpuperf.measure.kernel_names import clear_caches, short_name, spelled_name


def _repeat(head: str, unit: str, tail: str) -> Callable[[int], str]:
    return lambda size: head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


FAMILIES: dict[str, Callable[[int], str]] = {
    "references (libstdc++'s exponential case)": _repeat("_Z1fI", "R", "iEvv"),
    "nested template arguments": _repeat("_ZN1a1bI", "N1cI", "iEvv"),
    "substitutions": _repeat("_ZN1a1bIN1cE", "S0_", "EEvv"),
    "a digit run": _repeat("_Z", "1", ""),
    "template parameters": _repeat("_Z1fI", "T_", "EEv"),
    "expressions": _repeat("_Z1fIX", "plLi1E", "EEvv"),
    "a lone surrogate": _repeat("_Z", "\ud800", ""),
    "const runs, not at the end": _repeat("void f(int)", " const", "x"),
    "& runs, not at the end": _repeat("void f(int)", "&", "x"),
    "nested brackets, demangled": _repeat("void f", "<a", "(int)"),
    "unclosed parentheses": _repeat("void f", "(", ""),
    "operator names": _repeat("void a::", "operator<", "(int)"),
    "a long extern C name": _repeat("", "a", ""),
    "spaces": _repeat("void", " a", "(int)"),
    "scopes": _repeat("void", " a::", "f(int)"),
    "a relocatable-device-code static prefix": _repeat("__nv_static_9999_", "_", "_Z1fv"),
    "scopes, mangled": _repeat("_ZN", "1a", "E"),
    "operator scopes, mangled": _repeat("_ZN", "cl", "E"),
    "constructor scopes, mangled": _repeat("_ZN1a", "C1", "E"),
    "destructor scopes, mangled": _repeat("_ZN1a", "D2", "E"),
    "parentheses closing unclosed brackets": _repeat("void )", "a<))))", ""),
}


def worst_seconds(symbol: str, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        clear_caches()
        start = time.process_time()
        short_name(symbol)
        spelled_name(symbol)
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    print(f"{'family':45} {'1 KB':>9} {'100 KB':>9} {'1 MB':>9}")
    worst = 0.0
    for family, make in FAMILIES.items():
        times = [worst_seconds(make(size)) for size in (1000, 100_000, 1_000_000)]
        worst = max(worst, *times)
        print(f"{family:45} " + " ".join(f"{t * 1e3:7.2f}ms" for t in times))
    print(f"worst: {worst * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
