"""``gpuperf.measure.clocks``: NVML clock-event reason bits and which of them make a measurement unreliable."""

from __future__ import annotations

import inspect

import pytest

from gpuperf.measure import clocks
from gpuperf.measure.clocks import CLOCK_EVENT_REASONS, UNRELIABLE_REASONS, decode, unreliable


def test_bits_match_nvml_h() -> None:
    """nvmlClocksEventReason* values from nvml.h."""
    assert CLOCK_EVENT_REASONS == {
        0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
        0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
        0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
    }


def test_decode_nothing() -> None:
    assert decode(0) == ()


@pytest.mark.parametrize(("mask", "names"), [
    (0x4, ("sw_power_cap",)),
    (0x40, ("hw_thermal_slowdown",)),
    (0x4 | 0x20 | 0x1, ("gpu_idle", "sw_power_cap", "sw_thermal_slowdown")),  # bit order, not mask order
    (0x1FF, tuple(CLOCK_EVENT_REASONS[bit] for bit in sorted(CLOCK_EVENT_REASONS))),
])
def test_decode_known_bits(mask: int, names: tuple[str, ...]) -> None:
    assert decode(mask) == names


def test_decode_unknown_bits_by_value() -> None:
    assert decode(0x200) == ("bit_0x200",)
    assert decode(0x8 | 0x400 | 0x10000) == ("hw_slowdown", "bit_0x400", "bit_0x10000")
    assert decode(1 << 40) == ("bit_0x10000000000",)


def test_unreliable_subset() -> None:
    seen = decode(0x4 | 0x8 | 0x10 | 0x40 | 0x80 | 0x200)
    assert unreliable(seen) == ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
    assert unreliable(("sw_thermal_slowdown",)) == ("sw_thermal_slowdown",)
    assert unreliable(()) == ()


def test_unreliable_reasons_are_all_known_names() -> None:
    assert UNRELIABLE_REASONS <= set(CLOCK_EVENT_REASONS.values())


@pytest.mark.parametrize("benign", ["sw_power_cap", "gpu_idle", "applications_clocks_setting", "sync_boost",
                                    "display_clock_setting"])
def test_benign_reasons_do_not_make_a_measurement_unreliable(benign: str) -> None:
    assert unreliable((benign,)) == ()


def test_why_sw_power_cap_is_not_unreliable_is_documented() -> None:
    """A tensor-core GEMM on an H100/H200 runs at its power limit as its normal state; calling that
    unreliable would flag every large case. The reason must stay written beside the set."""
    assert "sw_power_cap" not in UNRELIABLE_REASONS
    lines = inspect.getsource(clocks).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("UNRELIABLE_REASONS"))
    comment: list[str] = []
    for line in reversed(lines[:at]):  # the "#:" doc-comment block right above the set
        if not line.startswith("#"):
            break
        comment.insert(0, line.lstrip("#: "))
    text = " ".join(comment)
    assert "sw_power_cap" in text
    assert "power limit" in text
