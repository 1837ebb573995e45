"""An entry's figure at max clock (``at_max_clock``) in the baseline file: written and read back as it was, sealed
by the integrity digest, and every malformed block refused naming the entry; and the code digest that makes a
custom kernel's identity (``Kernel.code``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuperf.measure.kernel_records import (CODE_DIGEST_LENGTH, SAME_KERNELS, Kernel, KernelActivity, call_kernels,
                                            code_digest, describe_change, launched_code, note_code)
from gpuperf.store.baseline import (AT_MAX_CLOCK, BaselineError, ClockFree, Entry, dump_baseline, load_baseline,
                                      parse_baseline)

GEMM = "perf_tests/test_gemm.py::test_gemm_perf[fp16-nn-8192x8192x8192-cold]"
RATIO = "perf_tests/test_tf32.py::test_tf32_faster_than_fp32[4096x4096x4096-gemmex-cold]#tf32_over_fp32"
PLAIN = "perf_tests/test_gemv.py::test_gemv_perf[fp32-opT-4096x1024-cold]"
HEADER: dict[str, Any] = {"gpu": "NVIDIA H200", "slug": "nvidia-h200", "driver": "580.159.04"}
CODE = "0123456789ab"
KERNEL = Kernel(name="mma_hgemm", grid=(64, 32, 1), block=(128, 1, 1), registers=96, shared_memory=32768,
                median_us=812.5, code=CODE)
ENTRIES = {
    GEMM: Entry(metric="TFLOPS", value=612.345, unit="TFLOPS", spread=0.021, samples=60, flush="cold",
                method="cupti-cold", runs=4, run_spread=0.031, kernels=(KERNEL,),
                at_max_clock=ClockFree(value=842.117, spread=0.0031, run_spread=0.0123, cycles=1643210.0,
                                       clock_mhz=1397.45)),
    RATIO: Entry(metric="ratio", value=7.2681, unit="×", spread=0.01, samples=30, flush="cold", method="cupti-cold",
                 at_max_clock=ClockFree(value=7.41234, spread=0.004)),
    PLAIN: Entry(metric="GB/s", value=2476.0, unit="GB/s", spread=0.003, samples=90, flush="cold",
                 method="cupti-cold"),
}


def write(path: Path, entries: dict[str, Entry] = ENTRIES) -> Path:
    path.write_text(dump_baseline(HEADER, entries))
    return path


def test_at_max_clock_round_trips(tmp_path: Path) -> None:
    loaded = load_baseline(write(tmp_path / "nvidia-h200.yaml"))
    assert loaded is not None
    assert loaded.entries == ENTRIES
    assert loaded.entries[GEMM].at_max_clock == ClockFree(842.117, 0.0031, 0.0123, 1643210.0, 1397.45)
    ratio = loaded.entries[RATIO].at_max_clock
    assert ratio is not None and (ratio.cycles, ratio.clock_mhz, ratio.run_spread) == (None, None, 0.0)
    assert loaded.entries[PLAIN].at_max_clock is None
    assert loaded.entries[GEMM].kernels[0].code == CODE


def test_the_block_is_written_with_only_the_fields_it_has(tmp_path: Path) -> None:
    data = yaml.safe_load(dump_baseline(HEADER, ENTRIES))["entries"]
    assert data[GEMM][AT_MAX_CLOCK] == {"value": 842.117, "spread": 0.0031, "run_spread": 0.0123,
                                        "cycles": 1643210.0, "clock_mhz": 1397.45}
    assert data[RATIO][AT_MAX_CLOCK] == {"value": 7.41234, "spread": 0.004}
    assert AT_MAX_CLOCK not in data[PLAIN]


def test_figures_at_max_clock_are_rounded_like_every_figure(tmp_path: Path) -> None:
    precise = {GEMM: Entry(metric="TFLOPS", value=600.0, unit="TFLOPS",
                           at_max_clock=ClockFree(value=842.1173456789, spread=0.00312345678, cycles=1643210.987,
                                                  clock_mhz=1397.4567))}
    loaded = load_baseline(write(tmp_path / "b.yaml", precise))
    assert loaded is not None
    assert loaded.entries[GEMM].at_max_clock == ClockFree(value=842.117, spread=0.00312346, cycles=1643210.0,
                                                          clock_mhz=1397.46)


@pytest.mark.parametrize(("field", "old", "new"), [
    ("value", "842.117", "850.0"), ("clock_mhz", "1397.45", "1980.0"), ("cycles", "1643210.0", "1500000.0"),
    ("spread", "0.0031", "0.01"),
])
def test_editing_a_figure_at_max_clock_breaks_the_seal(tmp_path: Path, field: str, old: str, new: str) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    text = path.read_text()
    line = f"      {field}: {old}\n"
    assert text.count(line) == 1, text
    with pytest.raises(BaselineError, match="sha256") as raised:
        parse_baseline(path, text.replace(line, f"      {field}: {new}\n"))
    assert "a measured figure was edited" in str(raised.value) and str(path) in str(raised.value)


def test_removing_the_block_breaks_the_seal(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    data = yaml.safe_load(path.read_text())
    del data["entries"][GEMM][AT_MAX_CLOCK]
    with pytest.raises(BaselineError, match="sha256"):
        parse_baseline(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def test_editing_a_kernel_code_digest_breaks_the_seal(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    text = path.read_text()
    assert text.count(f"code: {CODE}") == 1
    with pytest.raises(BaselineError, match="sha256"):
        parse_baseline(path, text.replace(f"code: {CODE}", "code: ffffffffffff"))


@pytest.mark.parametrize(("block", "why"), [
    (812.5, "must be a mapping with at least value"),
    ([812.5, 0.01], "must be a mapping with at least value"),
    ({"spread": 0.01}, "must be a mapping with at least value"),
    ({"value": 812.5, "cycle": 5.0}, "has unknown key(s) ['cycle']"),
    ({"value": -812.5}, "value, cycles and clock_mhz must be positive"),
    ({"value": 0.0}, "value, cycles and clock_mhz must be positive"),
    ({"value": 812.5, "cycles": -1.0}, "value, cycles and clock_mhz must be positive"),
    ({"value": 812.5, "clock_mhz": 0}, "value, cycles and clock_mhz must be positive"),
    ({"value": 812.5, "spread": 1.0}, "spread and run_spread must be fractions in [0, 1)"),
    ({"value": 812.5, "spread": -0.01}, "spread and run_spread must be fractions in [0, 1)"),
    ({"value": 812.5, "run_spread": 1.5}, "spread and run_spread must be fractions in [0, 1)"),
    ({"value": math.nan}, "holds a figure that is not a finite number"),
    ({"value": math.inf}, "holds a figure that is not a finite number"),
    ({"value": 812.5, "spread": math.nan}, "holds a figure that is not a finite number"),
    ({"value": "fast"}, "holds a figure that is not a finite number"),
    ({"value": True}, "holds a figure that is not a finite number"),
    ({"value": 812.5, "cycles": None}, "holds a figure that is not a finite number"),
])
def test_a_malformed_block_names_the_entry_and_at_max_clock(tmp_path: Path, block: Any, why: str) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    data = yaml.safe_load(path.read_text())
    data["entries"][GEMM][AT_MAX_CLOCK] = block
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    with pytest.raises(BaselineError) as raised:
        parse_baseline(path, text)
    message = str(raised.value)
    assert f"entry {GEMM!r}" in message and f"{AT_MAX_CLOCK} {why}" in message
    assert str(path) in message and "git checkout" in message  # the fix


# -- a kernel's code ---------------------------------------------------------------------------------------


def test_a_kernel_round_trips_with_its_code() -> None:
    assert Kernel.from_dict(KERNEL.to_dict()) == KERNEL
    assert KERNEL.to_dict()["code"] == CODE
    library = Kernel(name="nvjet_sm90", grid=(132, 1, 1), block=(384, 1, 1))
    assert "code" not in library.to_dict() and Kernel.from_dict(library.to_dict()).code == ""


@pytest.mark.parametrize("code", ["xyz", "0123456789a", "0123456789abc", "0123456789AB", "0123456789a ", 123456789012,
                                  None, ["0123456789ab"]])
def test_a_bad_code_is_refused_naming_the_kernel(code: Any) -> None:
    with pytest.raises(ValueError, match=f"kernel 'mma_hgemm': code must be {CODE_DIGEST_LENGTH} hex digits"):
        Kernel.from_dict({**KERNEL.to_dict(), "code": code})


def test_a_bad_code_in_a_baseline_names_the_entry(tmp_path: Path) -> None:
    path = write(tmp_path / "nvidia-h200.yaml")
    with pytest.raises(BaselineError) as raised:
        parse_baseline(path, path.read_text().replace(f"code: {CODE}", "code: not-a-digest"))
    assert f"entry {GEMM!r}: kernel 'mma_hgemm': code must be {CODE_DIGEST_LENGTH} hex digits" in str(raised.value)


def test_describe_change_sees_other_code_under_the_same_name() -> None:
    edited = Kernel(name="mma_hgemm", grid=KERNEL.grid, block=KERNEL.block, code="ba9876543210")
    assert describe_change((KERNEL,), (edited,)) == \
        f"kernel changed: mma_hgemm code {CODE} → ba9876543210 (same name, other code)"
    unknown = Kernel(name="mma_hgemm", grid=KERNEL.grid, block=KERNEL.block)
    assert describe_change((KERNEL,), (unknown,)) == SAME_KERNELS  # a run that could not say which code
    assert describe_change((unknown,), (KERNEL,)) == SAME_KERNELS  # an entry recorded before digests
    assert describe_change((KERNEL,), (Kernel(name="mma_hgemm", grid=KERNEL.grid, block=KERNEL.block,
                                              code=CODE),)) == SAME_KERNELS
    assert describe_change((), (KERNEL,)) == "" and describe_change((KERNEL,), ()) == ""


def test_code_digest_is_deterministic_and_sees_every_part() -> None:
    parts = ("__global__ void k() {}", "-arch=sm_90", "-DTILE=64")
    digest = code_digest(*parts)
    assert digest == code_digest(*parts) and len(digest) == CODE_DIGEST_LENGTH
    assert all(c in "0123456789abcdef" for c in digest)
    assert Kernel.from_dict({"name": "k", "grid": [1, 1, 1], "block": [1, 1, 1], "code": digest}).code == digest
    for i in range(len(parts)):
        changed = list(parts)
        changed[i] += " "
        assert code_digest(*changed) != digest, i
    assert code_digest("ab", "c") != code_digest("a", "bc")  # parts are not simply concatenated
    assert code_digest(*parts[:2]) != digest


def test_the_code_noted_at_launch_is_the_code_of_the_traced_kernel() -> None:
    name = "gpuperf_test_only_kernel_7f3a"
    assert launched_code(name) == ""
    calls = [[KernelActivity(name, 0, 1000, grid=(4, 1, 1))], [KernelActivity(name, 2000, 3000, grid=(4, 1, 1))]]
    assert call_kernels(calls)[0].code == ""
    note_code(name, "aaaaaaaaaaaa")
    note_code(name, "bbbbbbbbbbbb")  # rebuilt: the last launch wins
    [kernel] = call_kernels(calls)
    assert kernel.code == "bbbbbbbbbbbb" and kernel.name == name and kernel.median_us == pytest.approx(1.0)


def test_a_custom_kernel_s_digest_covers_its_source_defines_and_arch() -> None:
    from kernels.custom import code_of
    from kernels.custom_plan import LaunchPlan

    plan = LaunchPlan(source="tiled_sgemm.cu", kernel="tiled_sgemm", grid=(1, 1, 1), block=(16, 16, 1), args=(),
                      defines=(("TILE", "16"),))
    digest = code_of(plan, "90")
    assert digest == code_of(plan, "90") and len(digest) == CODE_DIGEST_LENGTH
    assert code_of(LaunchPlan(**{**plan.__dict__, "defines": (("TILE", "32"),)}), "90") != digest
    assert code_of(plan, "100") != digest
    assert code_of(LaunchPlan(**{**plan.__dict__, "source": "warp_sgemm.cu"}), "90") != digest
    assert code_of(LaunchPlan(**{**plan.__dict__, "grid": (8, 8, 1)}), "90") == digest  # the launch is not code
