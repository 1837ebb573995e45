"""The kernel build catalogues as data (kernels/custom_builds.yaml through kernels/build_catalogue.py).

The default builds are the gated kernels: their names and NVRTC defines are pinned here, and the code digest of
every custom kernel the default selection times, computed on the CPU from its plan exactly as ``kernels.custom``
computes it at launch, must be the one the H200 baseline recorded (the gate compares kernel identity by it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuperf.measure.kernel_records import code_digest
from gpuperf.suite.cases import load_cases
from kernels import custom, custom_plan
from kernels.build_catalogue import CATALOGUE, CatalogueError, load_section
from kernels.custom_plan import MmaConfig, SgemmConfig, WarpSgemmConfig
from test_custom_plan import batched_operands, gemm_operands

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "baselines" / "nvidia-h200.yaml"
SGEMM_KINDS = {"optimized": SgemmConfig, "warp": WarpSgemmConfig}

#: The default builds and their defines, as the gate's baseline entries were recorded with them.
DEFAULTS = {
    "wt128x256-t16x8-bk16-s3-fast-pipe": (("WT_BM", "128"), ("WT_BN", "256"), ("WT_BK", "16"), ("WT_STAGES", "3"),
                                          ("WT_WARPS_M", "2"), ("WT_WARPS_N", "4"), ("WT_LANES_M", "4"),
                                          ("WT_MIN_BLOCKS", "1"), ("WT_FAST", "1"), ("WT_PIPE", "1")),
    "wt128x128-t8x8-bk16-s3-fast": (("WT_BM", "128"), ("WT_BN", "128"), ("WT_BK", "16"), ("WT_STAGES", "3"),
                                    ("WT_WARPS_M", "4"), ("WT_WARPS_N", "2"), ("WT_LANES_M", "4"),
                                    ("WT_MIN_BLOCKS", "2"), ("WT_FAST", "1")),
    "128x128-k64-s3-fast": (("MMA_BM", "128"), ("MMA_BN", "128"), ("MMA_WARPS_M", "2"), ("MMA_WARPS_N", "2"),
                            ("MMA_STAGES", "3"), ("MMA_MIN_BLOCKS", "2"), ("MMA_BK", "64"), ("MMA_FAST", "1")),
}


def test_the_default_builds_keep_their_names_and_defines() -> None:
    assert custom_plan.SGEMM_DEFAULT == "wt128x256-t16x8-bk16-s3-fast-pipe"
    assert custom_plan.BATCHED_TILED_DEFAULT == "wt128x128-t8x8-bk16-s3-fast"
    assert custom_plan.MMA_DEFAULT == "128x128-k64-s3-fast"
    builds = {**custom_plan.SGEMM_CONFIGS, **custom_plan.MMA_CONFIGS}
    for name, defines in DEFAULTS.items():
        assert builds[name].defines == defines, name
    assert len(custom_plan.SGEMM_CONFIGS) == 22 and len(custom_plan.MMA_CONFIGS) == 15


def _digest(plan: custom.LaunchPlan) -> str:
    return code_digest(custom.load_source(plan.source), *custom.compile_options(plan.source, "90", plan.defines))


def _default_plans() -> dict[str, tuple[str, custom.LaunchPlan]]:
    """Case id → (kernel, plan) of every custom perf case of the default selection whose code the suite compiles
    without the toolkit's headers (all but wmma)."""
    cases = load_cases("custom")
    plans: dict[str, tuple[str, custom.LaunchPlan]] = {}
    for case in cases["perf"]:
        spec = cases["kernels"][case["kernel"]]
        if spec["planner"] == "wmma":
            continue
        shape = case["shape"]
        dtype = "float16" if spec["dtype"] == "fp16" else "float32"
        options: dict[str, Any] = {"tile": int(spec.get("tile", 16))} if spec["planner"] == "tiled" else {}
        plan = custom_plan.GEMM_PLANNERS[spec["planner"]](*gemm_operands(shape.m, shape.n, shape.k, dtype), **options)
        plans[f"perf_tests/test_custom.py::test_custom_perf[{case['kernel']}-{shape}-cold]"] = (plan.kernel, plan)
    for shape in cases["batched_perf"]:
        plan = custom_plan.plan_batched(*batched_operands(shape.batch, shape.m, shape.n, shape.k))[0]
        plans[f"perf_tests/test_custom.py::test_custom_batched_perf[{shape}-cold]"] = (plan.kernel, plan)
    return plans


@pytest.mark.long
def test_the_gated_custom_kernels_compile_to_the_code_their_baseline_recorded() -> None:
    entries = yaml.safe_load(BASELINE.read_text())["entries"]
    checked = 0
    for case_id, (kernel, plan) in _default_plans().items():
        if case_id not in entries:  # a slow case without an H200 entry
            continue
        recorded = {k["name"]: k.get("code") for k in entries[case_id]["kernels"]}
        assert recorded.get(kernel) == _digest(plan), f"{case_id}: {kernel} no longer compiles to its baseline's code"
        checked += 1
    assert checked >= 8


def _catalogue(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "builds.yaml"
    path.write_text(text)
    return path


GOOD = """
sgemm:
  defaults: {gemm: bk16-s3, batched_tiled: bk16-s3}
  builds:
    bk16-s3: {core: optimized, bk: 16, stages: 3}
"""


def test_a_good_catalogue_loads_in_order(tmp_path: Path) -> None:
    catalogue = load_section("sgemm", SGEMM_KINDS, ("gemm", "batched_tiled"), path=_catalogue(tmp_path, GOOD))
    assert catalogue.builds == {"bk16-s3": SgemmConfig(16, 3)} and catalogue.defaults["gemm"] == "bk16-s3"
    shipped = load_section("mma", {"mma": MmaConfig}, ("gemm",), default_kind="mma", path=CATALOGUE)
    assert list(shipped.builds) == list(custom_plan.MMA_CONFIGS)


@pytest.mark.parametrize(("entry", "message"), [
    ("{core: optimized, bk: 16, stages: 3, depth: 2}", r"unknown field\(s\) depth for SgemmConfig"),
    ("{core: optimized, bk: 16}", r"lacks stages"),
    ("{core: optimized, bk: sixteen, stages: 3}", r"bk must be a whole number ≥ 0, got 'sixteen'"),
    ("{core: optimized, bk: true, stages: 3}", r"bk must be a whole number ≥ 0, got True"),
    ("{core: cutlass, bk: 16, stages: 3}", r"core 'cutlass' is not one of 'optimized', 'warp'"),
    ("{core: optimized, bk: 16, stages: 4}", r"its fields make the build 'bk16-s4'; name the entry 'bk16-s4'"),
    ("[16, 3]", r"a build is a name holding a mapping of fields"),
    ("{core: warp, bm: 128, bn: 128, bk: 16, stages: 3, warps_m: 2, warps_n: 2, lanes_m: 4, min_blocks: 2, "
     "fast: 1}", r"fast must be true or false, got 1"),
])
def test_a_bad_entry_is_named_with_its_fix(tmp_path: Path, entry: str, message: str) -> None:
    text = GOOD.replace("{core: optimized, bk: 16, stages: 3}", entry)
    with pytest.raises(CatalogueError, match=message) as info:
        load_section("sgemm", SGEMM_KINDS, ("gemm", "batched_tiled"), path=_catalogue(tmp_path, text))
    assert "sgemm.builds.bk16-s3" in str(info.value)


@pytest.mark.parametrize(("text", "message"), [
    (GOOD.replace("batched_tiled: bk16-s3", "batched_tiled: bk8-s2"), r"defaults.batched_tiled is 'bk8-s2'"),
    (GOOD.replace(", batched_tiled: bk16-s3", ""), r"sgemm.defaults must name a build for each of gemm, batched"),
    (GOOD.replace("sgemm:", "sgem:"), r"no section 'sgemm'"),
    (GOOD + "  notes: old\n", r"section 'sgemm' holds notes; only defaults and builds"),
    (GOOD + "    bk16-s3: {core: optimized, bk: 16, stages: 3}\n", r"repeat|twice|duplicate"),
])
def test_a_bad_section_is_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises((CatalogueError, ValueError), match=message):
        load_section("sgemm", SGEMM_KINDS, ("gemm", "batched_tiled"), path=_catalogue(tmp_path, text))


def test_a_missing_catalogue_says_so(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="the kernel build catalogue is missing"):
        load_section("sgemm", SGEMM_KINDS, ("gemm",), path=tmp_path / "absent.yaml")
