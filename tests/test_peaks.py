"""``gpuperf.measure.peaks``: the per-architecture rate table and the peaks it gives a device.

Expected figures are the vendor's published numbers (H100/H200 SXM and A100 datasheets) or SPEC's
reference H200, recomputed by hand: peak = SMs × FLOP/SM/clock × clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpuperf.measure import peaks
from gpuperf.measure.peaks import ARCH_RATES, arch_rates, device_peaks, memory_peak_gbps
from gpuperf.vocabulary import Precision


@dataclass(frozen=True)
class FakeDevice:
    cc: tuple[int, int]
    sm_count: int
    sm_clock_max_mhz: int
    mem_clock_mhz: int
    bus_width_bits: int


H200 = FakeDevice(cc=(9, 0), sm_count=132, sm_clock_max_mhz=1980, mem_clock_mhz=3201, bus_width_bits=6016)
A100 = FakeDevice(cc=(8, 0), sm_count=108, sm_clock_max_mhz=1410, mem_clock_mhz=1215, bus_width_bits=5120)


def test_h200_compute_peaks_at_max_sm_clock() -> None:
    p = device_peaks(H200)
    assert p.compute("fp32") == pytest.approx(66.9, abs=0.05)
    assert p.compute("fp16") == pytest.approx(1070.5, abs=0.05)
    assert p.compute("bf16") == pytest.approx(1070.5, abs=0.05)
    assert p.compute("tf32") == pytest.approx(535.3, abs=0.05)
    assert p.compute("fp64") == pytest.approx(66.9, abs=0.05)  # the FP64 tensor rate, not 33.5 (vector)


def test_h200_fp16_at_datasheet_tensor_clock_is_989() -> None:
    p = device_peaks(FakeDevice((9, 0), 132, 1830, 3201, 6016))
    assert p.compute("fp16") == pytest.approx(989.4, abs=0.1)
    assert p.compute("tf32") == pytest.approx(494.7, abs=0.1)  # datasheet: 494 (dense)


def test_h200_memory_peak() -> None:
    p = device_peaks(H200)
    assert p.memory_gbps == pytest.approx(4814.3, abs=0.1)  # ≈ 4.815 TB/s
    assert memory_peak_gbps(3201, 6016) == p.memory_gbps


def test_fp64_uses_the_faster_of_vector_and_tensor_units() -> None:
    rates = ARCH_RATES[(9, 0)]
    assert rates.fp64_tensor is not None and rates.fp64_tensor > rates.fp64
    scale = 132 * 1980e6 / 1e12
    assert device_peaks(H200).compute("fp64") == pytest.approx(rates.fp64_tensor * scale)
    # sm_86 has no FP64 tensor unit: its vector rate is the peak
    ga102 = device_peaks(FakeDevice((8, 6), 84, 1860, 9751, 384))
    assert ga102.compute("fp64") == pytest.approx(ARCH_RATES[(8, 6)].fp64 * 84 * 1860e6 / 1e12)


def test_a100_published_figures() -> None:
    p = device_peaks(A100)
    assert p.compute("fp16") == pytest.approx(312, abs=0.5)
    assert p.compute("bf16") == pytest.approx(312, abs=0.5)
    assert p.compute("tf32") == pytest.approx(156, abs=0.5)
    assert p.compute("fp64") == pytest.approx(19.5, abs=0.05)
    assert p.compute("fp32") == pytest.approx(19.5, abs=0.05)
    assert p.memory_gbps == pytest.approx(1555.2, abs=0.1)  # A100 40 GB: 1555 GB/s


def test_absent_unit_has_no_peak() -> None:
    volta = device_peaks(FakeDevice((7, 0), 80, 1530, 877, 4096))
    assert volta.compute("bf16") is None
    assert volta.compute("tf32") is None
    assert volta.compute("fp16") == pytest.approx(125.3, abs=0.1)  # V100 SXM2: 125 TFLOPS


def test_unknown_precision_raises_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="fp4") as info:
        device_peaks(H200).compute("fp4")
    assert "fp32" in str(info.value) and "fp8" in str(info.value)


def test_fp8_and_int8_dense_are_twice_fp16_dense_on_hopper() -> None:
    """H100/H200 SXM datasheet: 1979 FP8 TFLOPS and 1979 INT8 TOPS dense at 1830 MHz, twice FP16's 989."""
    peaks = device_peaks(H200)
    assert peaks.compute("fp8") == pytest.approx(2 * peaks.compute("fp16"))
    assert peaks.compute("int8") == pytest.approx(2 * peaks.compute("fp16"))
    assert peaks.compute("fp8_e4m3") == peaks.compute("fp8_e5m2") == peaks.compute("fp8")
    assert peaks.compute("fp8") * 1830 / 1980 == pytest.approx(1979, rel=0.002)


def test_architectures_without_fp8_have_no_fp8_peak() -> None:
    from dataclasses import replace
    ampere = replace(H200, cc=(8, 0), sm_count=108, sm_clock_max_mhz=1410)
    assert device_peaks(ampere).compute("fp8") is None
    assert device_peaks(ampere).compute("int8") == pytest.approx(624, rel=0.01)


def test_every_row_has_a_source_and_a_consistent_arch_name() -> None:
    assert {(7, 0), (8, 0), (9, 0), (12, 0)} <= set(ARCH_RATES)
    for cc, rates in ARCH_RATES.items():
        assert rates.source.strip(), f"{rates.arch} cites no source"
        assert rates.arch == f"sm_{cc[0]}{cc[1]}"
        assert rates.fp32 > 0 and rates.fp64 > 0


def test_later_minor_revision_falls_back_to_the_closest_earlier_row() -> None:
    assert arch_rates((8, 7)) is ARCH_RATES[(8, 6)]
    assert arch_rates((9, 0)) is ARCH_RATES[(9, 0)]
    orin = device_peaks(FakeDevice((8, 7), 16, 1300, 3200, 256))
    assert orin.rates.arch == "sm_86"


@pytest.mark.parametrize("cc", [(5, 0), (6, 1), (11, 0), (8, -1)])
def test_unknown_compute_capability_raises_naming_the_table(cc: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="ARCH_RATES") as info:
        arch_rates(cc)
    assert f"{cc[0]}.{cc[1]}" in str(info.value)


def test_triton_trap_hopper_fp16_is_twice_ampere_per_sm_per_clock() -> None:
    """Triton's old formula used the sm_80 per-clock constant for every cc ≥ 8.0: half the Hopper value."""
    hopper, ampere = ARCH_RATES[(9, 0)], ARCH_RATES[(8, 0)]
    assert hopper.fp16_tensor is not None and ampere.fp16_tensor is not None
    assert hopper.fp16_tensor == 2 * ampere.fp16_tensor
    assert hopper.bf16_tensor is not None and ampere.bf16_tensor is not None
    assert hopper.bf16_tensor == 2 * ampere.bf16_tensor
    assert "Triton" in (peaks.__doc__ or "")
    assert "half" in (peaks.__doc__ or "")


def test_to_dict_rounds_and_keeps_absent_units() -> None:
    data = device_peaks(FakeDevice((7, 0), 80, 1530, 877, 4096)).to_dict()
    assert data["memory_gbps"] == 898.0
    compute = data["compute_tflops"]
    assert isinstance(compute, dict)
    assert set(compute) == set(Precision.ALL)
    assert compute["bf16"] is None
    assert compute["fp32"] == 15.7
