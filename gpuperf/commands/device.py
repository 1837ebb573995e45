"""``python -m gpuperf device``: the GPU's identity, versions, clocks and theoretical peaks.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from gpuperf.commands.common import EXIT_OK, CliError
from gpuperf.wiring.argtypes import non_negative_int

if TYPE_CHECKING:  # CuPy and NVML load only when the command runs
    from gpuperf.measure.device import DeviceInfo
    from gpuperf.measure.peaks import DevicePeaks

#: ``device --gpu``: the CUDA device queried.
DEFAULT_DEVICE = 0


def cmd_device(args: argparse.Namespace) -> int:
    from gpuperf.measure.device import query_device
    from gpuperf.measure.peaks import device_peaks

    try:
        info, _ = query_device(args.gpu)
    except Exception as exc:  # NoGpuError (no CuPy, no GPU) and CUDA runtime errors name their cause
        raise CliError(f"cannot query GPU {args.gpu}: {exc}") from exc
    if args.slug:
        print(info.slug)
        return EXIT_OK
    try:
        peaks: DevicePeaks | None = device_peaks(info)
        peaks_error = ""
    except ValueError as exc:  # an architecture missing from the peaks table
        peaks, peaks_error = None, str(exc)
    if args.json:
        print(json.dumps({**info.to_dict(), "peaks": peaks.to_dict() if peaks else None}, indent=2, default=str))
        return EXIT_OK
    print(describe_device(info, peaks, peaks_error))
    return EXIT_OK


def describe_device(info: DeviceInfo, peaks: DevicePeaks | None, peaks_error: str = "") -> str:
    """The ``device`` command's text: identity, versions, clocks, peaks; fields NVML could not read are left out."""
    from gpuperf.output.table import peaks_line

    rows: list[tuple[str, str, object]] = [
        ("identity", "baseline file", f"baselines/{info.slug}.yaml"),
        ("identity", "SMs", info.sm_count),
        ("identity", "L2 cache", _mib(info.l2_bytes)),
        ("identity", "memory", f"{_mib(info.total_memory_bytes)}, {info.bus_width_bits}-bit bus"),
        ("identity", "PCI bus id", info.pci_bus_id),
        ("identity", "UUID", info.uuid),
        ("identity", "serial", info.serial),
        ("versions", "driver", info.driver),
        ("versions", "CUDA runtime", info.cuda_runtime),
        ("versions", "CUDA driver API", info.cuda_driver_api),
        ("versions", "cuBLAS", info.cublas),
        ("versions", "CuPy", info.cupy),
        ("clocks", "SM max", _mhz(info.sm_clock_max_mhz)),
        ("clocks", "SM now", _mhz(info.sm_clock_mhz)),
        ("clocks", "memory", _mhz(info.mem_clock_mhz)),
        ("clocks", "clock events", ", ".join(info.clock_events) or "none"),
        ("clocks", "temperature", None if info.temperature_c is None else f"{info.temperature_c} °C"),
        ("clocks", "power", None if info.power_w is None else f"{info.power_w:.1f} W"),
        ("peaks", "at max clock" if peaks else "unknown",
         peaks_line(peaks.to_dict()) if peaks else peaks_error or "no peak table for this GPU"),
    ]
    lines = [f"GPU {info.index}: {info.name} ({info.arch}, compute capability {info.compute_capability})"]
    section = ""
    for group, name, value in rows:
        if value in (None, ""):
            continue
        if group != section:
            lines.append(group)
            section = group
        lines.append(f"  {name:<16} {value}")
    lines += [f"note: {reason}" for reason in info.missing]
    return "\n".join(lines)


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes else "?"


def _mhz(value: int | None) -> str | None:
    return f"{value} MHz" if value else None


def add_device_command(commands: Any) -> None:
    device = commands.add_parser("device", help="GPU identity, versions, clocks and theoretical peaks")
    device.add_argument("--gpu", type=non_negative_int, default=DEFAULT_DEVICE,
                        help=f"CUDA device index (default {DEFAULT_DEVICE})")
    output = device.add_mutually_exclusive_group()
    output.add_argument("--slug", action="store_true", help="print only the baseline slug (e.g. nvidia-h200)")
    output.add_argument("--json", action="store_true", help="print everything as JSON")
    device.set_defaults(func=cmd_device)
