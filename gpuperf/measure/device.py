"""The GPU's identity and state: CuPy for the CUDA view, NVML for clocks, throttling and processes.

NVML's handle is found by the device's PCI bus id, never by index: CUDA and NVML may order devices
differently (``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``). Without NVML everything still works; the
fields it would fill are ``None`` and ``DeviceInfo.missing`` says why.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuperf.measure.clocks import decode

#: A file of process ids, one a line, that take turns with this process on the GPU and so are not contention:
#: the other side of an A/B run (``python -m gpuperf ab`` writes it and names it here). Read at every check, as
#: the file is written once both sides have started.
SIBLINGS_ENV = "GPUPERF_GPU_SIBLINGS"


def sibling_pids(environ: Any = os.environ) -> frozenset[int]:
    """The pids named by ``$GPUPERF_GPU_SIBLINGS``'s file; none when it is unset or not (yet) there."""
    path = environ.get(SIBLINGS_ENV)
    if not path:
        return frozenset()
    try:
        with open(path, encoding="utf-8") as handle:
            return frozenset(int(line) for line in handle.read().split() if line.isdigit())
    except OSError:
        return frozenset()


class NoGpuError(RuntimeError):
    """No usable GPU stack; the message names what is missing and how to get it."""


def slug(name: str) -> str:
    """``"NVIDIA H200"`` → ``"nvidia-h200"``: the baseline file name of a GPU model."""
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not text:
        raise ValueError(f"cannot make a file name from GPU name {name!r}")
    return text


def _version(number: int) -> str:
    """CUDA-style integer version (13000, 130100) → ``"13.0"`` / ``"13.1.0"``."""
    if number >= 100000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 10}"


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    cc: tuple[int, int]
    sm_count: int
    l2_bytes: int
    mem_clock_mhz: int
    bus_width_bits: int
    sm_clock_max_mhz: int
    total_memory_bytes: int
    pci_bus_id: str
    driver: str
    cuda_runtime: str
    cuda_driver_api: str
    cublas: str
    cupy: str
    sm_clock_mhz: int | None = None
    clock_events: tuple[str, ...] = ()
    temperature_c: int | None = None
    power_w: float | None = None
    uuid: str | None = None  # which physical GPU: hosts of one model differ, so results name it
    serial: str | None = None
    missing: tuple[str, ...] = field(default_factory=tuple)

    @property
    def slug(self) -> str:
        return slug(self.name)

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def compute_capability(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["slug"] = self.slug
        data["arch"] = self.arch
        return data


def _import_cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        from gpuperf.install.command import cuda_extra_command

        raise NoGpuError(f"CuPy is not importable ({exc}): {cuda_extra_command()}") from exc
    return cupy


#: Why there is no GPU where the driver's library cannot be loaded (CUDA's runtime would say "driver version is
#: insufficient", which misleads).
NO_DRIVER = "no NVIDIA driver is installed (libcuda.so.1 cannot be loaded): this machine has no NVIDIA GPU or driver"


def driver_installed() -> bool:
    """Whether the NVIDIA driver's CUDA library can be loaded at all."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def usable_gpu_problem(cwd: Path | str = ".") -> str:
    """Why this machine has no usable GPU (empty when it has one), as ``python -m gpuperf device`` finds it: in a
    subprocess, so the caller never holds a CUDA context on the GPU that others measure on."""
    out = subprocess.run([sys.executable, "-m", "gpuperf", "device", "--slug"], capture_output=True, text=True,
                         cwd=cwd, check=False, timeout=300)
    if out.returncode == 0:
        return ""
    return out.stderr.strip().removeprefix("gpuperf: error: ") or f"python -m gpuperf device exited {out.returncode}"


def device_count() -> int:
    """The number of CUDA devices, or a ``NoGpuError`` naming why there are none."""
    cupy = _import_cupy()
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError, or a missing libcudart / driver
        if not driver_installed():  # the runtime then says "driver version is insufficient", which misleads
            raise NoGpuError(NO_DRIVER) from exc
        raise NoGpuError(f"no CUDA device is usable ({exc}): this machine has no NVIDIA GPU or driver") from exc
    if count < 1:
        raise NoGpuError("the CUDA runtime reports no devices")
    return int(count)


def list_devices() -> list[tuple[int, str]]:
    """``[(index, name), …]`` of the CUDA devices, without creating a context on any of them."""
    cupy = _import_cupy()
    devices = []
    for index in range(device_count()):
        try:
            name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
        except Exception as exc:  # CUDARuntimeError: a device counted but not usable, or no driver behind the count
            if not driver_installed():
                raise NoGpuError(NO_DRIVER) from exc
            raise NoGpuError(f"GPU {index} cannot be queried ({exc}): check it with nvidia-smi") from exc
        devices.append((index, name.decode() if isinstance(name, bytes) else str(name)))
    return devices


def _normalize_bus_id(bus_id: str | bytes) -> tuple[int, int, int, int]:
    text = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
    domain, bus, rest = text.strip().split(":")
    device, function = rest.split(".")
    return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)


class Nvml:
    """A thin, failure-tolerant view of one device through NVML (``nvidia-ml-py``)."""

    def __init__(self, pci_bus_id: str) -> None:
        self.error = ""
        self.handle: Any = None
        self._max_sm_clock: int | None = None
        try:
            import pynvml
        except ImportError:
            self.error = "NVML bindings missing: pip install nvidia-ml-py"
            return
        self.nvml = pynvml
        try:
            pynvml.nvmlInit()
            self.handle = self._find(pci_bus_id)
        except pynvml.NVMLError as exc:
            self.error = f"NVML unavailable ({exc}): clocks, throttling and processes are not recorded"

    def _find(self, pci_bus_id: str) -> Any:
        wanted = _normalize_bus_id(pci_bus_id)
        for index in range(self.nvml.nvmlDeviceGetCount()):
            handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
            if _normalize_bus_id(self.nvml.nvmlDeviceGetPciInfo(handle).busId) == wanted:
                return handle
        raise self.nvml.NVMLError(self.nvml.NVML_ERROR_NOT_FOUND)

    @property
    def ok(self) -> bool:
        return self.handle is not None

    def _call(self, name: str, *args: Any) -> Any:
        if not self.ok:
            return None
        try:
            return getattr(self.nvml, name)(self.handle, *args)
        except self.nvml.NVMLError:
            return None

    def sm_clock_mhz(self) -> int | None:
        return self._call("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM) if self.ok else None

    def max_sm_clock_mhz(self) -> int | None:
        """The SM clock's maximum, a property of the board: read once (the call takes about 5 ms, and every
        traced measurement asks for it)."""
        if self._max_sm_clock is None and self.ok:
            self._max_sm_clock = self._call("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_SM)
        return self._max_sm_clock

    def max_mem_clock_mhz(self) -> int | None:
        return self._call("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_MEM) if self.ok else None

    def clock_event_mask(self) -> int:
        if not self.ok:
            return 0
        getter = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        try:
            return int(getter(self.handle))
        except self.nvml.NVMLError:
            return 0

    def temperature_c(self) -> int | None:
        return self._call("nvmlDeviceGetTemperature", self.nvml.NVML_TEMPERATURE_GPU) if self.ok else None

    def text(self, name: str) -> str | None:
        """A string property (``nvmlDeviceGetUUID``, ``nvmlDeviceGetSerial``), ``None`` where NVML has none."""
        value = self._call(name)
        return value.decode() if isinstance(value, bytes) else (str(value) if value else None)

    def power_w(self) -> float | None:
        milliwatts = self._call("nvmlDeviceGetPowerUsage")
        return None if milliwatts is None else milliwatts / 1000.0

    def driver_version(self) -> str | None:
        if not self.ok:
            return None
        try:
            version = self.nvml.nvmlSystemGetDriverVersion()
        except self.nvml.NVMLError:
            return None
        return version.decode() if isinstance(version, bytes) else str(version)

    def other_processes(self) -> tuple[int, ...]:
        """PIDs of other compute processes on this GPU: contention that makes timings unreliable. Its own and its
        siblings' (``sibling_pids``: they wait while this one measures) are not."""
        processes = self._call("nvmlDeviceGetComputeRunningProcesses") or []
        own = {os.getpid(), *sibling_pids()}
        return tuple(sorted({p.pid for p in processes if p.pid not in own}))


def _cublas_version(cupy: Any) -> str:
    try:
        from cupy_backends.cuda.libs import cublas

        return _version(cublas.getVersion(cupy.cuda.device.get_cublas_handle()))
    except Exception as exc:  # a missing libcublas is reported, not fatal
        return f"unavailable ({type(exc).__name__})"


def query_device(index: int = 0) -> tuple[DeviceInfo, Nvml]:
    """Identity, versions and current state of CUDA device ``index``, and its NVML view."""
    cupy = _import_cupy()
    count = device_count()
    if not 0 <= index < count:
        raise NoGpuError(f"GPU {index} does not exist: this machine has {count} (use --gpu 0..{count - 1})")
    runtime = cupy.cuda.runtime
    with cupy.cuda.Device(index) as device:
        props = runtime.getDeviceProperties(index)
        attributes = device.attributes
        bus_id = runtime.deviceGetPCIBusId(index)
        nvml = Nvml(bus_id)
        missing = (nvml.error,) if nvml.error else ()
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        max_sm = nvml.max_sm_clock_mhz() or attributes.get("ClockRate", 0) // 1000
        mem_clock = attributes.get("MemoryClockRate", 0) // 1000 or nvml.max_mem_clock_mhz() or 0
        bus_width = attributes.get("GlobalMemoryBusWidth", 0) or (nvml._call("nvmlDeviceGetMemoryBusWidth") or 0)
        info = DeviceInfo(
            index=index,
            name=name,
            cc=(int(props["major"]), int(props["minor"])),
            sm_count=int(attributes["MultiProcessorCount"]),
            l2_bytes=int(attributes["L2CacheSize"]),
            mem_clock_mhz=int(mem_clock),
            bus_width_bits=int(bus_width),
            sm_clock_max_mhz=int(max_sm),
            total_memory_bytes=int(props["totalGlobalMem"]),
            pci_bus_id=bus_id,
            driver=nvml.driver_version() or f"CUDA driver API {_version(runtime.driverGetVersion())}",
            cuda_runtime=_version(runtime.runtimeGetVersion()),
            cuda_driver_api=_version(runtime.driverGetVersion()),
            cublas=_cublas_version(cupy),
            cupy=cupy.__version__,
            sm_clock_mhz=nvml.sm_clock_mhz(),
            clock_events=decode(nvml.clock_event_mask()),
            temperature_c=nvml.temperature_c(),
            power_w=nvml.power_w(),
            uuid=nvml.text("nvmlDeviceGetUUID"),
            serial=nvml.text("nvmlDeviceGetSerial"),
            missing=missing,
        )
    return info, nvml


@dataclass(frozen=True)
class GpuContext:
    """What the ``gpu`` fixture gives a test: the CUDA device, its identity, its NVML view and its peaks."""

    index: int
    device: Any  # cupy.cuda.Device
    info: DeviceInfo
    nvml: Nvml
    peaks: Any  # gpuperf.measure.peaks.DevicePeaks
