"""Synthetic stand-ins shared by the CPU tests (imported as ``fakes``: pytest puts tests/ on sys.path)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuperf.measure.peaks import DevicePeaks, device_peaks


@dataclass(frozen=True)
class FakeH200:
    """The reference GPU's peak-relevant figures (SPEC): 132 SMs, 1980 MHz, 3201 MHz × 6016 bit."""

    cc: tuple[int, int] = (9, 0)
    sm_count: int = 132
    sm_clock_max_mhz: int = 1980
    mem_clock_mhz: int = 3201
    bus_width_bits: int = 6016


PEAKS: DevicePeaks = device_peaks(FakeH200())  # fp32 66.9 TFLOPS, memory 4814 GB/s
