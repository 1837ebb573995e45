"""NVML clock-event ("throttle") reasons: names, and which of them make a measurement unreliable.

Bit values from NVML's ``nvml.h`` (``nvmlClocksEventReason*``, formerly ``nvmlClocksThrottleReason*``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

#: bit → name, from nvml.h.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

#: Reasons that mean the chip was slowed by something outside the work under test. ``sw_power_cap`` is
#: *not* here: a large tensor-core GEMM on an H100/H200 runs at its power limit as its normal state, so
#: the clock it settles at is part of what is measured. It is still recorded and shown.
UNRELIABLE_REASONS: frozenset[str] = frozenset(
    {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)


def decode(mask: int) -> tuple[str, ...]:
    """The names of the reason bits set in ``mask``, in bit order; unknown bits as ``bit_0x…``."""
    names = [name for bit, name in sorted(CLOCK_EVENT_REASONS.items()) if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"bit_{bit:#x}")
            unknown &= ~bit
        bit <<= 1
    return tuple(names)


def unreliable(reasons: tuple[str, ...]) -> tuple[str, ...]:
    """The subset of ``reasons`` that makes a sample unreliable."""
    return tuple(reason for reason in reasons if reason in UNRELIABLE_REASONS)
