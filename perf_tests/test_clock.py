"""The per-call SM clock against a kernel of known cycle count.

Every traced figure carries the SM clock its calls ran at and their cycles (span × clock), measured from the
stamps the flush kernel writes before every call (``gpuperf/measure/sm_clock.py``). Here the measured call is a
kernel that spins on its SM's cycle counter for a set number of cycles on every SM: its cycles per call are
known whatever the clock, so the suite's figure must come back as that number. A clock derived wrongly (a
wrong unit, the flush's time in the interval, a timer read on another SM) shows as a cycle count off by the
same factor.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuperf.measure.metrics import gemm_work

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")

_SPIN_SOURCE = r"""
extern "C" __global__ void gpuperf_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""
#: Long enough that the blocks' start skew (a microsecond) is far below the tolerance, short enough for a
#: quick case: 1 ms at the H200's 1980 MHz.
SPIN_CYCLES = [400_000, 2_000_000]
#: The span adds the blocks' launch skew to the spin; measured on the H200 it is under 0.2 % at 0.2 ms.
TOLERANCE = 0.01


@pytest.mark.crosscheck
@pytest.mark.parametrize("cycles", SPIN_CYCLES, ids=lambda cycles: f"spin{cycles}")
def test_cycles_per_call_match_a_spin_of_known_length(cycles: int, gpu: Any, measure: Any) -> None:
    import numpy

    kernel = cupy.RawKernel(_SPIN_SOURCE, "gpuperf_spin")
    grid = (gpu.info.sm_count,)

    def spin() -> None:
        kernel(grid, (32,), (numpy.int64(cycles),))

    measured = measure(spin, gemm_work(1, 1, 1, "fp32"), label="spin")
    if measured.cycles_per_call is None:
        pytest.skip(f"no per-call clock in this run (method {measured.method}: kernel tracing unavailable?)")
    assert measured.call_clock_mhz is not None
    error = measured.cycles_per_call / cycles - 1
    print(f"spin {cycles} cycles: measured {measured.cycles_per_call:.0f} cycles per call "
          f"({100 * error:+.2f} %) at {measured.call_clock_mhz:.0f} MHz, span {1e6 * measured.median_s:.1f} µs")
    assert abs(error) < TOLERANCE, (f"a {cycles}-cycle spin measured {measured.cycles_per_call:.0f} cycles per "
                                    f"call at {measured.call_clock_mhz:.0f} MHz: the per-call clock is off")
