"""Theoretical peaks: FLOP per SM per clock for each architecture and unit, and a device's peaks.

``peak = SMs × FLOP/SM/clock × max SM clock``; ``memory peak = 2 × memory clock × bus width / 8`` (double
data rate). Rates are *dense* (no structured sparsity) and count a fused multiply-add as two FLOPs.

The trap this table avoids: Triton's old ``get_max_tensorcore_tflops`` (triton/testing.py, 2.x) derived
the tensor rate from a per-sub-core constant tuned on sm_80 and applied it to every capability ≥ 8.0, so
on Hopper it reports half the real FP16 rate (sm_90 doubles the dense FMA per tensor core per clock).
Each row here states its own rate and its source instead.

Peaks use the *maximum* SM clock, so they are upper bounds: no correct measurement exceeds them, which is
what the above-peak anomaly rule needs. NVIDIA's datasheets quote tensor rates at a lower boost clock
(H100/H200 SXM: 989 TFLOPS FP16 dense at 1830 MHz, ≈ 1070 at 1980 MHz).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gpuperf.vocabulary import Precision



@dataclass(frozen=True)
class ArchRates:
    """Dense FLOP per SM per clock. ``None``: the unit does not exist on that architecture."""

    arch: str
    fp32: int  # CUDA-core FP32 FMA lanes × 2
    fp64: int  # CUDA-core FP64 FMA lanes × 2
    fp16_tensor: int | None
    bf16_tensor: int | None
    tf32_tensor: int | None
    fp64_tensor: int | None
    source: str
    fp8_tensor: int | None = None  # dense, either FP8 format
    int8_tensor: int | None = None  # dense integer multiply-adds × 2


#: (major, minor) → rates. Datacenter parts where a family has both; GeForce parts of sm_86/89/120
#: accumulate FP16→FP32 on tensor cores at half the listed rate.
ARCH_RATES: dict[tuple[int, int], ArchRates] = {
    (7, 0): ArchRates("sm_70", 128, 64, 1024, None, None, None,
                      "NVIDIA Tesla V100 GPU Architecture whitepaper (2017): 64 FP32 + 32 FP64 cores and "
                      "8 tensor cores × 64 FP16 FMA/clk per SM; no FP8 or INT8 tensor path"),
    (7, 5): ArchRates("sm_75", 128, 4, 1024, None, None, None,
                      "NVIDIA Turing GPU Architecture whitepaper (2018): 64 FP32 + 2 FP64 cores and "
                      "8 tensor cores × 64 FP16 FMA/clk per SM (T4: 65 FP16 TFLOPS and 130 INT8 TOPS at 1590 MHz × "
                      "40 SMs)", int8_tensor=2048),
    (8, 0): ArchRates("sm_80", 128, 64, 2048, 2048, 1024, 128,
                      "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 64 FP32 + 32 FP64 cores, "
                      "4 tensor cores × 256 FP16 FMA/clk per SM; A100: 312 FP16/BF16, 156 TF32, 19.5 FP64 "
                      "tensor TFLOPS and 624 INT8 TOPS (dense) at 1410 MHz × 108 SMs; no FP8", int8_tensor=4096),
    (8, 6): ArchRates("sm_86", 256, 4, 1024, 1024, 512, None,
                      "NVIDIA Ampere GA102 GPU Architecture whitepaper (2021): 128 FP32 + 2 FP64 cores, "
                      "4 tensor cores × 128 dense FP16 FMA/clk per SM; A10: 125 FP16 TFLOPS and 250 INT8 TOPS at "
                      "1695 MHz × 72; no FP8", int8_tensor=2048),
    (8, 9): ArchRates("sm_89", 256, 4, 1024, 1024, 512, None,
                      "NVIDIA Ada GPU Architecture whitepaper (2022): 128 FP32 + 2 FP64 cores, 4 tensor "
                      "cores per SM; L40S: 362 FP16, 733 FP8 dense TFLOPS and 733 INT8 dense TOPS at 2520 MHz × 142 "
                      "SMs", fp8_tensor=2048, int8_tensor=2048),
    (9, 0): ArchRates("sm_90", 256, 128, 4096, 4096, 2048, 256,
                      "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 128 FP32 + 64 FP64 cores, "
                      "4 tensor cores × 512 dense FP16 FMA/clk per SM; H100/H200 SXM datasheet: 989 FP16/BF16, "
                      "494 TF32, 67 FP64 tensor, 67 FP32 TFLOPS, 1979 FP8 TFLOPS and 1979 INT8 TOPS (dense: FP8 twice "
                      "FP16) at 1830 MHz (tensor) × 132 SMs", fp8_tensor=8192, int8_tensor=8192),
    (10, 0): ArchRates("sm_100", 256, 128, 8192, 8192, 4096, 128,
                       "NVIDIA Blackwell architecture technical brief (2024) and B200 datasheet: 2.25 PFLOPS "
                       "FP16/BF16 dense, 1.1 PFLOPS TF32, 40 TFLOPS FP64 (vector and tensor), 4.5 PFLOPS FP8 and 4.5 "
                       "POPS INT8 dense × 148 SMs", fp8_tensor=16384, int8_tensor=16384),
    (12, 0): ArchRates("sm_120", 256, 4, 1024, 1024, 512, None,
                       "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025): 128 FP32 + 2 FP64 cores and "
                       "4 5th-generation tensor cores per SM (dense FP16 with FP16 accumulate; FP8 and INT8 dense at "
                       "twice that rate)", fp8_tensor=2048, int8_tensor=2048),
}


class DeviceLike(Protocol):
    @property
    def cc(self) -> tuple[int, int]: ...

    @property
    def sm_count(self) -> int: ...

    @property
    def sm_clock_max_mhz(self) -> int: ...

    @property
    def mem_clock_mhz(self) -> int: ...

    @property
    def bus_width_bits(self) -> int: ...


@dataclass(frozen=True)
class DevicePeaks:
    """A device's theoretical peaks: TFLOPS per precision (``None``: no such unit) and memory GB/s."""

    compute_tflops: dict[str, float | None]
    memory_gbps: float
    rates: ArchRates

    def compute(self, precision: str) -> float | None:
        try:
            return self.compute_tflops[Precision.of(precision)]
        except KeyError as exc:
            raise ValueError(f"unknown precision {precision!r}: use one of {Precision.ALL}") from exc

    def ridge(self, precision: str) -> float | None:
        """The roofline's ridge point for ``precision``: the arithmetic intensity (FLOP per byte) above which a
        call is bound by the SMs' throughput, and so by their clock, rather than by memory."""
        compute = self.compute(precision)
        return compute * 1e3 / self.memory_gbps if compute and self.memory_gbps > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {"memory_gbps": round(self.memory_gbps, 1),
                "compute_tflops": {p: (round(v, 1) if v is not None else None)
                                   for p, v in self.compute_tflops.items()}}


def arch_rates(cc: tuple[int, int]) -> ArchRates:
    """The table row for a compute capability; a later minor revision of a known major uses that major's
    closest earlier row (e.g. sm_87 → sm_86), anything else is an error naming the table to extend."""
    if cc in ARCH_RATES:
        return ARCH_RATES[cc]
    same_major = [key for key in ARCH_RATES if key[0] == cc[0] and key[1] < cc[1]]
    if same_major:
        return ARCH_RATES[max(same_major)]
    raise ValueError(f"no peak rates for compute capability {cc[0]}.{cc[1]}: add a row to "
                     "gpuperf.measure.peaks.ARCH_RATES with its source")


def memory_peak_gbps(mem_clock_mhz: float, bus_width_bits: int) -> float:
    return 2.0 * mem_clock_mhz * 1e6 * bus_width_bits / 8.0 / 1e9


def device_peaks(device: DeviceLike) -> DevicePeaks:
    rates = arch_rates(tuple(device.cc))  # type: ignore[arg-type]
    scale = device.sm_count * device.sm_clock_max_mhz * 1e6 / 1e12

    def tflops(per_sm_clock: int | None) -> float | None:
        return None if per_sm_clock is None else per_sm_clock * scale

    fp64 = max(rate for rate in (rates.fp64, rates.fp64_tensor) if rate is not None)
    return DevicePeaks(
        compute_tflops={
            Precision.FP32: tflops(rates.fp32),
            Precision.TF32: tflops(rates.tf32_tensor),
            Precision.FP16: tflops(rates.fp16_tensor),
            Precision.BF16: tflops(rates.bf16_tensor),
            Precision.FP64: tflops(fp64),
            Precision.FP8: tflops(rates.fp8_tensor),
            Precision.INT8: tflops(rates.int8_tensor),
        },
        memory_gbps=memory_peak_gbps(device.mem_clock_mhz, device.bus_width_bits),
        rates=rates,
    )
