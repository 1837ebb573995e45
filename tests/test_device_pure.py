"""The parts of ``gpuperf.measure.device`` that need no GPU: the slug, version strings, PCI bus ids, and ``Nvml``
degrading gracefully when the bindings are missing or NVML fails (a fake ``pynvml`` module stands in)."""

from __future__ import annotations

import os
import sys
import types
from typing import Any
from pathlib import Path

import pytest

from gpuperf.measure.device import SIBLINGS_ENV, DeviceInfo, Nvml, _normalize_bus_id, _version, slug

# -- slug ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA H200", "nvidia-h200"),
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
    ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb"),
    ("NVIDIA GeForce RTX 4090", "nvidia-geforce-rtx-4090"),
    ("  Tesla V100-SXM2-16GB  ", "tesla-v100-sxm2-16gb"),
    ("NVIDIA RTX PRO 6000 Blackwell (Server)", "nvidia-rtx-pro-6000-blackwell-server"),
])
def test_slug(name: str, expected: str) -> None:
    assert slug(name) == expected


@pytest.mark.parametrize("name", ["", "   ", "!!!", "()"])
def test_slug_of_nothing_usable_raises(name: str) -> None:
    with pytest.raises(ValueError, match="GPU name"):
        slug(name)


# -- _version --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("number", "text"), [
    (13000, "13.0"),    # cudaRuntimeGetVersion: 1000·major + 10·minor
    (12040, "12.4"),
    (13010, "13.1"),
    (11080, "11.8"),
    (130100, "13.1.0"),  # cublasGetVersion: 10000·major + 100·minor + patch
    (120403, "12.4.3"),
    (111103, "11.11.3"),
])
def test_version(number: int, text: str) -> None:
    assert _version(number) == text


# -- _normalize_bus_id -----------------------------------------------------------------------------------


def test_bus_ids_from_cuda_and_nvml_compare_equal() -> None:
    cuda = "0000:1b:00.0"  # cudaDeviceGetPCIBusId: 4-digit domain, lower case
    nvml = "00000000:1B:00.0"  # NVML: 8-digit domain, upper case
    assert _normalize_bus_id(cuda) == _normalize_bus_id(nvml) == (0, 0x1B, 0, 0)
    assert _normalize_bus_id(b"00000000:1B:00.0") == (0, 0x1B, 0, 0)
    assert _normalize_bus_id(" 0001:C3:1f.7\n") == (1, 0xC3, 0x1F, 7)
    assert _normalize_bus_id("0000:1b:00.0") != _normalize_bus_id("0000:1c:00.0")


@pytest.mark.parametrize("bad", ["", "1b:00.0", "0000:1b:00", "0000:zz:00.0"])
def test_malformed_bus_id_raises(bad: str) -> None:
    with pytest.raises(ValueError):
        _normalize_bus_id(bad)


# -- DeviceInfo ------------------------------------------------------------------------------------------


def test_device_info_derived_names() -> None:
    info = DeviceInfo(index=0, name="NVIDIA H200", cc=(9, 0), sm_count=132, l2_bytes=60 * 2**20,
                      mem_clock_mhz=3201, bus_width_bits=6016, sm_clock_max_mhz=1980, total_memory_bytes=141 * 2**30,
                      pci_bus_id="0000:1b:00.0", driver="580.159.04", cuda_runtime="13.0", cuda_driver_api="13.0",
                      cublas="13.1.0", cupy="14.0.0", missing=("NVML bindings missing",))
    assert (info.slug, info.arch, info.compute_capability) == ("nvidia-h200", "sm_90", "9.0")
    data = info.to_dict()
    assert data["slug"] == "nvidia-h200" and data["arch"] == "sm_90"
    assert data["missing"] == ("NVML bindings missing",)


# -- Nvml ------------------------------------------------------------------------------------------------


class NVMLError(Exception):
    pass


def fake_pynvml(devices: list[str], fail: frozenset[str] | set[str] = frozenset(),
                old_api: bool = False) -> types.ModuleType:
    """A stand-in for ``pynvml``: ``devices`` are the PCI bus ids in NVML's order; calls named in ``fail``
    raise ``NVMLError``."""
    module = types.ModuleType("pynvml")
    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    module.NVML_ERROR_NOT_FOUND = 6  # type: ignore[attr-defined]
    module.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    module.NVML_CLOCK_MEM = 2  # type: ignore[attr-defined]
    module.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]

    def api(name: str, fn: Any) -> None:
        def call(*args: Any) -> Any:
            if name in fail:
                raise NVMLError(f"{name} failed")
            return fn(*args)
        setattr(module, name, call)

    api("nvmlInit", lambda: None)
    api("nvmlDeviceGetCount", lambda: len(devices))
    api("nvmlDeviceGetHandleByIndex", lambda i: f"handle-{i}")
    api("nvmlDeviceGetPciInfo", lambda h: types.SimpleNamespace(busId=devices[int(h.split("-")[1])].encode()))
    api("nvmlDeviceGetClockInfo", lambda h, clock: {1: 1755, 2: 3201}[clock])
    api("nvmlDeviceGetMaxClockInfo", lambda h, clock: {1: 1980, 2: 3201}[clock])
    api("nvmlDeviceGetTemperature", lambda h, sensor: 41)
    api("nvmlDeviceGetPowerUsage", lambda h: 123456)
    api("nvmlSystemGetDriverVersion", lambda: b"580.159.04")
    api("nvmlDeviceGetComputeRunningProcesses",
        lambda h: [types.SimpleNamespace(pid=os.getpid()), types.SimpleNamespace(pid=4242),
                   types.SimpleNamespace(pid=17), types.SimpleNamespace(pid=4242)])
    if old_api:
        api("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: 0x4 | 0x40)
    else:
        api("nvmlDeviceGetCurrentClocksEventReasons", lambda h: 0x4)
    return module


def assert_degraded(nvml: Nvml) -> None:
    assert not nvml.ok
    assert nvml.sm_clock_mhz() is None
    assert nvml.max_sm_clock_mhz() is None
    assert nvml.max_mem_clock_mhz() is None
    assert nvml.clock_event_mask() == 0
    assert nvml.temperature_c() is None
    assert nvml.power_w() is None
    assert nvml.driver_version() is None
    assert nvml.other_processes() == ()


def test_nvml_bindings_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml → ImportError
    nvml = Nvml("0000:1b:00.0")
    assert "nvidia-ml-py" in nvml.error
    assert_degraded(nvml)


def test_nvml_init_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """No driver library (or a container without the NVML mount): the error says what is not recorded."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(["00000000:1B:00.0"], fail={"nvmlInit"}))
    nvml = Nvml("0000:1b:00.0")
    assert "NVML unavailable" in nvml.error
    assert "nvmlInit failed" in nvml.error
    assert "clocks" in nvml.error
    assert_degraded(nvml)


def test_nvml_device_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(["00000000:1B:00.0"]))
    nvml = Nvml("0000:99:00.0")
    assert "NVML unavailable" in nvml.error
    assert_degraded(nvml)


def test_nvml_matches_the_device_by_bus_id_not_index(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_pynvml(["00000000:1B:00.0", "00000000:2A:00.0", "00000000:3C:00.0"])
    monkeypatch.setitem(sys.modules, "pynvml", module)
    nvml = Nvml("0000:2a:00.0")  # CUDA device 0 may well be NVML device 1
    assert nvml.ok and nvml.error == ""
    assert nvml.handle == "handle-1"


def test_nvml_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(["00000000:1B:00.0"]))
    nvml = Nvml("0000:1b:00.0")
    assert nvml.sm_clock_mhz() == 1755
    assert nvml.max_sm_clock_mhz() == 1980
    assert nvml.max_mem_clock_mhz() == 3201
    assert nvml.clock_event_mask() == 0x4
    assert nvml.temperature_c() == 41
    assert nvml.power_w() == pytest.approx(123.456)
    assert nvml.driver_version() == "580.159.04"
    assert nvml.other_processes() == (17, 4242)  # own pid left out, sorted, unique


def test_an_ab_sibling_is_not_contention(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(["00000000:1B:00.0"]))
    nvml = Nvml("0000:1b:00.0")
    siblings = tmp_path / "pids"
    monkeypatch.setenv(SIBLINGS_ENV, str(siblings))
    assert nvml.other_processes() == (17, 4242)  # the file is not written yet: every other process counts
    siblings.write_text("4242\n99\n")
    assert nvml.other_processes() == (17,)


def test_nvml_old_throttle_reasons_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(["00000000:1B:00.0"], old_api=True))
    assert Nvml("0000:1b:00.0").clock_event_mask() == 0x4 | 0x40


GETTERS = {
    "nvmlDeviceGetClockInfo": ("sm_clock_mhz", None),
    "nvmlDeviceGetMaxClockInfo": ("max_sm_clock_mhz", None),
    "nvmlDeviceGetTemperature": ("temperature_c", None),
    "nvmlDeviceGetPowerUsage": ("power_w", None),
    "nvmlDeviceGetCurrentClocksEventReasons": ("clock_event_mask", 0),
    "nvmlDeviceGetComputeRunningProcesses": ("other_processes", ()),
    "nvmlSystemGetDriverVersion": ("driver_version", None),
}


@pytest.mark.parametrize("call", sorted(GETTERS))
def test_a_failing_nvml_query_degrades_to_unknown(monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    """Any single query may be unsupported on a GPU (NVML_ERROR_NOT_SUPPORTED, e.g. power on some boards, or a
    MIG instance): that reading becomes unknown, nothing raises."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(["00000000:1B:00.0"], fail={call}))
    nvml = Nvml("0000:1b:00.0")
    assert nvml.ok
    method, unknown = GETTERS[call]
    assert getattr(nvml, method)() == unknown


def test_without_a_driver_the_reason_says_so_not_driver_version_insufficient(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA's runtime answers "CUDA driver version is insufficient" when there is no driver at all."""
    from gpuperf.measure import device

    def no_devices() -> int:
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=no_devices)))
    monkeypatch.setattr(device, "_import_cupy", lambda: fake)
    monkeypatch.setattr(device, "driver_installed", lambda: False)
    with pytest.raises(device.NoGpuError) as info:
        device.device_count()
    assert str(info.value) == ("no NVIDIA driver is installed (libcuda.so.1 cannot be loaded): this machine has no "
                               "NVIDIA GPU or driver")
    monkeypatch.setattr(device, "driver_installed", lambda: True)
    with pytest.raises(device.NoGpuError, match="driver version is insufficient"):
        device.device_count()


def test_a_device_counted_but_not_queryable_is_no_gpu_not_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy installed, no driver, and a count that says 1 (a stand-in, or a runtime that counts without a driver):
    the device's properties fail, and the start-up check reads that as no GPU, with the cause."""
    from gpuperf.measure import device

    def no_properties(index: int) -> dict[str, str]:
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
        getDeviceProperties=no_properties)))
    monkeypatch.setattr(device, "_import_cupy", lambda: fake)
    monkeypatch.setattr(device, "device_count", lambda: 1)
    monkeypatch.setattr(device, "driver_installed", lambda: False)
    with pytest.raises(device.NoGpuError) as info:
        device.list_devices()
    assert str(info.value) == device.NO_DRIVER
    monkeypatch.setattr(device, "driver_installed", lambda: True)
    with pytest.raises(device.NoGpuError, match="GPU 0 cannot be queried .*driver version is insufficient.*nvidia-smi"):
        device.list_devices()
