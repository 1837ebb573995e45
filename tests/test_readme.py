"""The generated results section of a page (evidence/results-h200.md)."""

from __future__ import annotations

import pytest

from gpuperf.output.readme import END, START, ReadmeError, replace_section, results_section
from gpuperf.store.records import Record, RunInfo

RUN = RunInfo(gpu_name="Fake GPU", gpu_slug="fake-gpu", compute_capability="9.0", driver="580.1", cuda_runtime="13.0",
              cublas="13.1.0", cupy="14.2.0", sm_clock_max_mhz=1980, mem_clock_mhz=3201, flush_modes=("cold",),
              started="2026-11-29T16:00:00+00:00",
              extra={"peaks": {"memory_gbps": 4814.3, "compute_tflops": {"fp32": 66.9, "tf32": None}}})


def record(case: str, family: str, value: float, unit: str, pct: float | None) -> Record:
    return Record(case_id=f"perf_tests/x.py::{case}", nodeid=case, family=family, params={}, metric=unit,
                  value=value, unit=unit, status="PASS", pct_of_peak=pct, rel_iqr=0.0123,
                  precision="fp32")


def test_section_has_one_table_per_family_with_value_and_percent_of_peak() -> None:
    records = [record("test_gemv[16384x16384-cold]", "gemv", 3916.4, "GB/s", 81.35),
               record("test_gemm[fp32-4096x4096x4096-cold]", "gemm", 51.33, "TFLOPS", 76.7),
               record("test_custom[tiled]#vs_cublas", "custom", 0.25, "×", None)]
    text = results_section(RUN, records, ["docs/roofline.png"], "results/x")
    assert text.startswith(START) and text.endswith(END)
    assert text.index("#### GEMM") < text.index("#### GEMV") < text.index("#### Custom kernels")
    assert "| case | measured | unit | % peak | spread % | status |" in text
    assert "| `test_gemv[16384x16384-cold]` | 3916 | GB/s | 81.3 | 1.23 | ✅ PASS |" in text
    assert "| `test_custom[tiled]#vs_cublas` | 0.2500 | × | – |" in text
    peaks = text.split("Peaks used for % of peak: ")[1].split("\n")[0]
    assert peaks == "TFLOPS fp32 66.9 | memory 4814 GB/s."  # the shared peaks line; no tf32 unit here
    assert "![roofline.png](docs/roofline.png)" in text


def test_replace_section_keeps_the_rest_of_the_readme() -> None:
    readme = f"# Title\nintro\n{START}\nold\n{END}\nafter\n"
    new = replace_section(readme, f"{START}\nnew\n{END}")
    assert new == f"# Title\nintro\n{START}\nnew\n{END}\nafter\n"


@pytest.mark.parametrize("readme", ["no markers", f"{END}\n{START}", f"{START}{START}{END}"])
def test_missing_or_broken_markers_are_an_error_naming_them(readme: str) -> None:
    with pytest.raises(ReadmeError, match="exactly one pair of markers"):
        replace_section(readme, "x")


def test_cli_rewrites_the_section_from_a_results_file(tmp_path) -> None:
    from gpuperf.cli import main
    from gpuperf.output.results import write_run

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_run(run_dir, RUN, [record("test_gemv[16384x16384-cold]", "gemv", 3916.4, "GB/s", 81.35)])
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{START}\n{END}\n")
    image = str(tmp_path / "docs" / "a.png")
    assert main(["readme", str(run_dir), "--readme", str(readme), "--images", image]) == 1  # no such PNG yet
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.png").write_bytes(b"\x89PNG")
    assert main(["readme", str(run_dir), "--readme", str(readme), "--images", image]) == 0
    text = readme.read_text()
    assert "3916" in text and "![a.png](docs/a.png)" in text and text.startswith("# x\n")  # linked from the page
    readme.write_text("no markers")
    assert main(["readme", str(run_dir), "--readme", str(readme)]) == 1
