"""``python -m gpuperf``: compare (its verdicts, through ``gpuperf.output.diff``, and end to end), baseline diff,
check, seal and drop, plot, device (the real ``DeviceInfo`` path, with only the CUDA query stood in for), and
its errors."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuperf.install.command import cuda_extra_command


from gpuperf.output import diff, results
from gpuperf.store.baseline import Entry, dump_baseline, load_baseline
from gpuperf.cli import main
from gpuperf.measure import device
from gpuperf.measure.device import DeviceInfo, NoGpuError
from gpuperf.verdict.check import entry_from_record
from gpuperf.verdict.gate import Context, GateConfig, decide
from gpuperf.store.records import Reason, Record, RunInfo
from gpuperf.vocabulary import Metric, Status

REPO = Path(__file__).resolve().parent.parent
GEMV = "perf_tests/test_gemv.py::test_sgemv_perf[opN-16384x16384-cold]"
GEMM = "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"
OLD_ONLY = "perf_tests/test_gemm.py::test_gemm_perf[fp32-8x8x8-cold]"
NEW_ONLY = "perf_tests/test_gemm.py::test_gemm_perf[fp16-4096x4096x4096-cold]"
PEAKS = {"memory_gbps": 1000.0, "compute_tflops": {"fp32": 50.0, "tf32": 400.0, "fp16": 800.0,
                                                   "bf16": 800.0, "fp64": 50.0}}


HEADER = {"gpu": "Synthetic GPU", "slug": "synthetic-gpu", "compute_capability": "9.0", "driver": "1.2.3",
          "cuda_runtime": "13.0", "cublas": "13.1.0", "cupy": "14.0.0", "recorded": "2026-01-01T00:00:00+00:00",
          "clocks": {"sm_max_mhz": 2000, "mem_mhz": 3000, "sm_seen_mhz": [1900, 2000]}, "peaks": PEAKS}


def entry(metric: str, value: float) -> Entry:
    return Entry(metric=metric, value=value, unit=Metric.UNITS[metric], spread=0.01, samples=10, flush="cold")


def write_baseline(path: Path, entries: dict[str, Entry]) -> Path:
    """A synthetic baseline in the documented schema, sealed as ``--update-baselines`` writes it (figures are
    made up)."""
    path.write_bytes(dump_baseline(HEADER, entries).encode("utf-8"))
    return path


@pytest.fixture
def old_new(tmp_path: Path) -> tuple[Path, Path]:
    old = write_baseline(tmp_path / "old.yaml", {GEMV: entry("GB/s", 800.0), GEMM: entry("TFLOPS", 40.0),
                                                 OLD_ONLY: entry("TFLOPS", 0.01)})
    new = write_baseline(tmp_path / "new.yaml", {GEMV: entry("GB/s", 760.0), GEMM: entry("TFLOPS", 42.0),
                                                 NEW_ONLY: entry("TFLOPS", 500.0)})
    return old, new


def test_baseline_diff_prints_old_new_and_delta(old_new: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "diff", str(old_new[0]), str(old_new[1])]) == 0
    out = capsys.readouterr().out
    gemv = next(line for line in out.splitlines() if line.startswith(GEMV))
    assert gemv.split()[1:] == ["GB/s", "800.0", "760.0", "-5.0"]
    gemm = next(line for line in out.splitlines() if line.startswith(GEMM))
    assert gemm.split()[1:] == ["TFLOPS", "40.00", "42.00", "+5.0"]
    assert "removed" in next(line for line in out.splitlines() if line.startswith(OLD_ONLY))
    assert "added" in next(line for line in out.splitlines() if line.startswith(NEW_ONLY))
    assert "2 compared" in out and "1 added" in out and "1 removed" in out


def test_baseline_diff_shows_which_kernels_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuperf.measure.kernel_records import Kernel

    gemv2t = Kernel("gemv2T_kernel_val", (2048, 1, 1), (128, 1, 1), registers=65, median_us=240.0)
    gemvx = Kernel("gemvx::kernel", (128, 1, 1), (128, 1, 1), registers=128, median_us=236.0)
    old = write_baseline(tmp_path / "old.yaml", {GEMV: replace(entry("GB/s", 800.0), kernels=(gemv2t,)),
                                                 GEMM: entry("TFLOPS", 40.0)})
    new = write_baseline(tmp_path / "new.yaml", {GEMV: replace(entry("GB/s", 801.0), kernels=(gemvx,)),
                                                 GEMM: entry("TFLOPS", 40.1)})
    assert main(["baseline", "diff", str(old), str(new), "--min-delta", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("case"))
    assert header.split() == ["case", "metric", "old", "new", "Δ", "%", "kernels"]
    gemv = next(line for line in lines if line.startswith(GEMV))  # shown although it moved only 0.1 %
    assert gemv.endswith("kernel changed: gemv2T_kernel_val → gemvx::kernel")
    assert not any(line.startswith(GEMM) for line in lines)  # no kernel change, under the threshold


def test_baseline_diff_markdown_and_min_delta(old_new: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "diff", "--markdown", "--min-delta", "5.0", *map(str, old_new)]) == 0
    out = capsys.readouterr().out
    assert "| case | metric | old | new | Δ % |" in out
    assert f"| `{GEMV}` | GB/s | 800.0 | 760.0 | -5.0 |" in out
    assert "| +5.0 |" in out  # |Δ| = 5.0 is not below 5.0
    assert main(["baseline", "diff", "--markdown", "--min-delta", "5.1", *map(str, old_new)]) == 0
    out = capsys.readouterr().out
    assert GEMV not in out and GEMM not in out and "added" in out


def test_baseline_diff_of_a_results_file_against_a_baseline(tmp_path: Path, old_new: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = RunInfo("Synthetic GPU", "synthetic-gpu", "9.0", "1.2.3", "13.0", "13.1.0", "14.0.0", 2000, 3000,
                  ("cold",), "2026-01-01T00:00:00+00:00", {"peaks": PEAKS})
    record = Record(GEMV, GEMV, "gemv", {"op": "N", "shape": "16384x16384"}, "GB/s", 880.0, "GB/s", Status.PASS,
                    precision="fp32")
    files = results.write_run(tmp_path / "run", run, [record])
    assert main(["baseline", "diff", str(old_new[0]), str(files.directory)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(GEMV))
    assert line.split()[1:] == ["GB/s", "800.0", "880.0", "+10.0"]


def test_diff_of_a_missing_file_names_it(tmp_path: Path, old_new: tuple[Path, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nvidia-nothing.yaml"
    assert main(["baseline", "diff", str(missing), str(old_new[1])]) == 1
    err = capsys.readouterr().err
    assert str(missing) in err and "no such baseline file" in err and "--update-baselines" in err
    assert main(["baseline", "diff", str(old_new[0]), str(tmp_path / "gone" / "results.json")]) == 1
    assert "results.json: no such file" in capsys.readouterr().err
    assert main(["baseline", "diff", str(old_new[0]), str(tmp_path / "nothing-here")]) == 1
    assert "nothing-here: no such file or directory" in capsys.readouterr().err


def test_diff_of_a_broken_baseline_names_the_file_and_entry(tmp_path: Path, old_new: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    broken = write_baseline(tmp_path / "broken.yaml", {GEMV: entry("GB/s", 800.0)})
    broken.write_text(broken.read_text().replace("    value: 800.0\n", ""))
    assert main(["baseline", "diff", str(broken), str(old_new[1])]) == 1
    err = capsys.readouterr().err
    assert str(broken) in err and GEMV in err


# -- compare: B judged against A with the gate's rule ---------------------------------------------------

RUN = RunInfo("Synthetic GPU", "synthetic-gpu", "9.0", "1.2.3", "13.0", "13.1.0", "14.0.0", 2000, 3000, ("cold",),
              "2026-01-01T00:00:00+00:00", {"peaks": PEAKS})
CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]"


def measured(value: float, spread: float = 0.01, case: str = CASE, **kw: Any) -> Record:
    """A checked record as a run writes it (synthetic figures)."""
    fields: dict[str, Any] = {"status": Status.PASS, "rel_iqr": spread, "samples": 10, "method": "cold-flush",
                              "flush": "cold", "precision": "fp16", **kw}
    metric = fields.pop("metric", Metric.TFLOPS)
    return Record(case, case, "gemm", {}, metric, value, Metric.UNITS[metric], **fields)


def verdict(a: Record, b: Record, config: GateConfig = GateConfig(), versions: tuple[str, ...] = ()) -> diff.DiffRow:
    [row] = diff.compare_runs({CASE: entry_from_record(a)}, {CASE: b}, config, versions)
    return row


@pytest.mark.parametrize(("b_value", "status"), [
    (95.0, Status.REGRESSED),  # 5 % slower, tolerance 4 %
    (96.5, Status.PASS), (103.0, Status.PASS),  # within
    (105.0, Status.IMPROVED),
])
def test_compare_verdict_against_tolerance(b_value: float, status: str) -> None:
    row = verdict(measured(100.0), measured(b_value))
    assert (row.status, row.old, row.new) == (status, 100.0, b_value)
    assert row.delta_pct == pytest.approx(b_value - 100.0)


def test_compare_regression_note_names_the_band_and_the_versions() -> None:
    row = verdict(measured(100.0), measured(95.0), versions=("driver 1.2.3 → 1.2.4",))
    assert "5.0 % below baseline (tolerance 4.0 %)" in row.note
    assert "versions changed since the baseline: driver 1.2.3 → 1.2.4" in row.note


def test_compare_gives_the_gate_s_verdicts() -> None:
    """Whatever the figures, compare's status is ``gate.decide``'s with A's record as the baseline entry."""
    config = GateConfig(tolerance=0.03, noise_k=3.0, max_tolerance=0.05)
    for a_spread in (0.0, 0.01, 0.02, 0.04):
        for b_spread in (0.0, 0.01, 0.02):
            for b_value in (90.0, 94.0, 96.0, 98.0, 100.0, 103.0, 106.0):
                a, b = measured(100.0, a_spread), measured(b_value, b_spread)
                gate = decide(b, entry_from_record(a), config, Context())
                row = verdict(a, b, config)
                assert (row.status, row.note, row.delta_pct) == (gate.status, gate.note, gate.delta_pct)


def test_a_noisy_b_is_unreliable() -> None:
    row = verdict(measured(100.0), measured(100.0, spread=0.05))  # 2 × 5 % needs 10 %, above the 8 % cap
    assert row.status == Status.UNRELIABLE and row.note.startswith("noisy")
    assert verdict(measured(100.0), measured(100.0, spread=0.05), GateConfig(max_tolerance=0.2)).status == Status.PASS


def test_a_noisy_a_widens_the_band_up_to_the_cap() -> None:
    assert verdict(measured(100.0, spread=0.03), measured(95.0)).status == Status.PASS  # band 2 × 3 % = 6 %
    capped = verdict(measured(100.0, spread=0.10), measured(91.0))  # 2 × 10 % = 20 %, capped at 8 %
    assert capped.status == Status.REGRESSED and "tolerance 8.0 %" in capped.note
    assert verdict(measured(100.0, spread=0.10), measured(91.0), GateConfig(max_tolerance=0.10)).status == Status.PASS
    assert verdict(measured(100.0), measured(95.0), GateConfig(tolerance=0.06)).status == Status.PASS


def test_figures_taken_another_way_are_not_comparable() -> None:
    other_metric = verdict(measured(100.0), measured(100.0, metric=Metric.GBPS))
    other_method = verdict(measured(100.0), measured(100.0, method="cold-rotate"))
    assert other_metric.status == other_method.status == Status.NOT_COMPARABLE
    assert "cold-rotate" in other_method.note


def test_what_b_s_run_found_about_the_figure_stands_its_verdict_does_not() -> None:
    anomaly = verdict(measured(100.0), measured(100.0, status=Status.ANOMALY, note="above-memory-peak: cache"))
    assert anomaly.status == Status.ANOMALY and "above-memory-peak" in anomaly.note
    throttled = verdict(measured(100.0), measured(100.0, status=Status.UNRELIABLE, reliable=False,
                                                    reason=Reason.THROTTLED, unreliable_reason="thermal slowdown",
                                                    note="unreliable: thermal slowdown"))
    assert throttled.status == Status.UNRELIABLE and throttled.note == "unreliable: thermal slowdown"
    judged_again = verdict(measured(100.0), measured(100.0, status=Status.REGRESSED, baseline=120.0,
                                                     delta_pct=-16.7, note="16.7 % below baseline"))
    assert (judged_again.status, judged_again.note, judged_again.delta_pct) == (Status.PASS, "", 0.0)
    assert verdict(measured(100.0), measured(math.nan)).status == Status.ERROR


def test_cases_only_one_side_has_are_listed_after_the_verdicts() -> None:
    a = {CASE: entry_from_record(measured(100.0)), "only-a": entry_from_record(measured(1.0))}
    b = {CASE: measured(95.0), "only-b": measured(2.0), "also-b": measured(3.0)}
    rows = diff.compare_runs(a, b, GateConfig())
    assert [(r.case_id, r.status, r.change) for r in rows] == [
        (CASE, Status.REGRESSED, ""), ("only-a", "", diff.ONLY_IN_A), ("also-b", "", diff.ONLY_IN_B),
        ("only-b", "", diff.ONLY_IN_B)]
    assert (rows[1].old, rows[1].new) == (1.0, None) and (rows[2].old, rows[2].new) == (None, 3.0)


@pytest.mark.parametrize(("status", "fails"), [
    (Status.REGRESSED, True), (Status.ERROR, True), (Status.ANOMALY, True), (Status.PASS, False),
    (Status.IMPROVED, False), (Status.UNRELIABLE, False), (Status.NOT_COMPARABLE, False), ("", False),
])
def test_which_verdicts_fail_a_comparison(status: str, fails: bool) -> None:
    assert bool(diff.failing([diff.DiffRow("c", "TFLOPS", 1.0, 1.0, status=status)])) is fails


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run A and run B of the same suite: one regression, one pass, one improvement, one noisy case, a case
    whose A figure is NaN, and one case each side alone."""
    def case(name: str) -> str:
        return f"perf_tests/test_gemm.py::test_gemm_perf[{name}-cold]"

    a = [measured(100.0, case=case("slower")), measured(50.0, case=case("same")), measured(10.0, case=case("faster")),
         measured(20.0, case=case("noisy")), measured(math.nan, case=case("broken-in-a"), status=Status.ERROR),
         measured(5.0, case=case("gone"))]
    b = [measured(90.0, case=case("slower")), measured(50.5, case=case("same")), measured(11.0, case=case("faster")),
         measured(20.0, spread=0.06, case=case("noisy")), measured(7.0, case=case("broken-in-a")),
         measured(6.0, case=case("new"))]
    newer = replace(RUN, driver="1.2.4")
    return (results.write_run(tmp_path / "a", RUN, a).results_json,
            results.write_run(tmp_path / "b", newer, b).results_json)


def test_compare_prints_the_table_and_summary_and_fails_on_a_regression(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", *map(str, runs)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"B ({runs[1]}) against A ({runs[0]}): tolerance 4 %, noise k 2, cap 8 %"
    assert out[1] == "versions differ: driver 1.2.3 → 1.2.4"
    assert out[2].split()[:8] == ["case", "metric", "A", "B", "Δ", "%", "status", "note"]
    cases = [line.split()[0].split("[")[1].split("-cold")[0] for line in out[4:-1]]
    assert cases == ["slower", "noisy", "faster", "same", "gone", "broken-in-a", "new"]
    slower = out[4].split()
    assert slower[1:6] == ["TFLOPS", "100.0", "90.00", "-10.0", "REGRESSED"]
    assert "versions changed since the baseline: driver 1.2.3 → 1.2.4" in out[4]
    assert "only in A" in out[8] and "only in B" in out[9] and "no valid figure in A" in out[9]
    assert out[-1] == "4 compared: 1 regressed, 1 unreliable, 1 improved, 1 pass; 1 only in A; 2 only in B"


def test_compare_options_mirror_the_gate_s(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--tolerance", "0.1", "--noise-k", "1", *map(str, runs)]) == 0
    out = capsys.readouterr().out
    assert "tolerance 10 %, noise k 1, cap 20 %" in out.splitlines()[0]
    assert out.splitlines()[-1] == "4 compared: 4 pass; 1 only in A; 2 only in B"  # ±10 % is within 10 %
    assert main(["compare", "--max-tolerance", "0.12", *map(str, runs)]) == 1  # a higher cap admits the noisy B
    last = capsys.readouterr().out.splitlines()[-1]  # but never widens the 4 % band of a quiet A: still regressed
    assert last == "4 compared: 1 regressed, 1 improved, 2 pass; 1 only in A; 2 only in B"


def test_compare_markdown_for_a_pull_request(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--markdown", "--names", "main", "branch", *map(str, runs)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("**B (branch) against A (main)**: 4 compared: 1 regressed, 1 unreliable, 1 improved, "
                          "1 pass; 1 only in A; 2 only in B (tolerance 4 %, noise k 2, cap 8 %)\n")
    assert "| case | metric | A | B | Δ % | status | note |" in out
    assert "| `perf_tests/test_gemm.py::test_gemm_perf[slower-cold]` | TFLOPS | 100.0 | 90.00 | -10.0 | ❌ REGRESSED |" \
        in out
    assert "| only in A | no valid figure in B |" in out


def test_compare_errors(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--tolerance", "0.05", "--max-tolerance", "0.02", *map(str, runs)]) == 1
    assert "max tolerance must be a fraction in [tolerance, 1)" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing"), str(runs[1])]) == 1
    assert "missing: no such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["compare", "--tolerance", "4", *map(str, runs)])
    assert info.value.code == 2 and "write 0.04 for 4 %" in capsys.readouterr().err


def test_compare_a_run_against_a_baseline_file(runs: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A may be a baseline: the run is judged as the gate would judge it, hand-set tolerances included."""
    a = results.load_figures(runs[0])
    entries = dict(a.entries)
    slower = "perf_tests/test_gemm.py::test_gemm_perf[slower-cold]"
    entries[slower] = replace(entries[slower], tolerance=0.12)
    baseline = write_baseline(tmp_path / "synthetic-gpu.yaml", entries)
    assert main(["compare", "--max-tolerance", "0.15", str(baseline), str(runs[1])]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(slower))
    assert line.split()[5] == "PASS"  # -10 % within the entry's own 12 % (under the 15 % cap)
    assert main(["compare", "--max-tolerance", "0.15", str(runs[0]), str(runs[1])]) == 1  # 4 % without it


@pytest.mark.long
def test_python_dash_m_compare(runs: tuple[Path, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "gpuperf", "compare", *map(str, runs)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert "REGRESSED" in done.stdout and done.stdout.splitlines()[-1].startswith("4 compared: 1 regressed")
    same = subprocess.run([sys.executable, "-m", "gpuperf", "compare", str(runs[0]), str(runs[0])],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert same.returncode == 1 and same.stdout == ""  # a run against itself would pass every case by construction
    assert same.stderr == (f"gpuperf: error: {runs[0]} and {runs[0]} are the same run (GPU Synthetic GPU, started "
                           "2026-01-01T00:00:00+00:00): each run counts once; pass each run's results once\n")


@pytest.mark.long
def test_plot_a_baseline_writes_pngs_beside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    described = {
        GEMV: replace(entry("GB/s", 760.0), family="gemv", precision="fp32", shape=(("m", 16384), ("n", 16384)),
                      flops=2 * 16384.0**2, bytes=4 * (16384.0**2 + 2 * 16384)),
        GEMM: replace(entry("TFLOPS", 42.0), family="gemm", precision="fp32",
                      shape=(("m", 4096), ("n", 4096), ("k", 4096)), flops=2 * 4096.0**3, bytes=3 * 4 * 4096.0**2),
    }
    baseline = write_baseline(tmp_path / "new.yaml", described)
    assert main(["plot", str(baseline)]) == 0
    written = [Path(line) for line in capsys.readouterr().out.split()]
    assert {p.name for p in written} == {"throughput-gemv.png", "throughput-gemm.png", "roofline.png"}
    assert all(p.parent == tmp_path / "new-plots" and p.stat().st_size > 0 for p in written)


@pytest.mark.long
def test_plot_a_results_directory_into_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = RunInfo("Synthetic GPU", "synthetic-gpu", "9.0", "1.2.3", "13.0", "13.1.0", "14.0.0", 2000, 3000,
                  ("cold",), "2026-01-01T00:00:00+00:00", {"peaks": PEAKS})
    record = Record(GEMM, GEMM, "gemm", {"dtype": "fp32", "shape": "4096x4096x4096"}, "TFLOPS", 40.0, "TFLOPS",
                    Status.PASS, flops=2 * 4096.0**3, bytes=3 * 4 * 4096.0**2, tflops=40.0,
                    precision="fp32")
    files = results.write_run(tmp_path / "run", run, [record])
    assert main(["plot", str(files.directory), "--out", str(tmp_path / "png")]) == 0
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["roofline.png", "throughput-gemm.png"]


def test_plot_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", str(tmp_path / "missing.yaml")]) == 1
    assert "missing.yaml: no such baseline file" in capsys.readouterr().err
    ratios = write_baseline(tmp_path / "ratios.yaml", {f"{GEMM}#vs_cublas": entry("ratio", 0.9)})
    assert main(["plot", str(ratios)]) == 1
    assert "nothing to plot" in capsys.readouterr().err


def device_info(index: int = 0) -> DeviceInfo:
    """A synthetic device as ``device.query_device`` returns it (figures made up)."""
    return DeviceInfo(index=index, name="Synthetic GPU", cc=(9, 0), sm_count=100, l2_bytes=50 * 2**20,
                      mem_clock_mhz=3000, bus_width_bits=4096, sm_clock_max_mhz=2000, total_memory_bytes=80 * 2**30,
                      pci_bus_id="00000000:01:00.0", driver="1.2.3", cuda_runtime="13.0", cuda_driver_api="13.0",
                      cublas="13.1.0", cupy="14.0.0",
                      missing=("NVML bindings missing: pip install nvidia-ml-py",))


def test_device_prints_identity_versions_clocks_and_peaks(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(device, "query_device", lambda index: (device_info(index), None))
    assert main(["device", "--gpu", "0"]) == 0
    out = capsys.readouterr().out
    for fragment in ("GPU 0: Synthetic GPU (sm_90, compute capability 9.0)", "baselines/synthetic-gpu.yaml",
                     "cuBLAS", "13.1.0", "SM max", "2000 MHz", "note: NVML bindings missing: pip install nvidia-ml-py"):
        assert fragment in out
    peaks = next(line for line in out.splitlines() if "at max clock" in line)
    assert "TFLOPS fp32 " in peaks and "fp16 " in peaks and "| memory 3072 GB/s" in peaks
    assert main(["device", "--slug"]) == 0
    assert capsys.readouterr().out == "synthetic-gpu\n"
    assert main(["device", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"slug": "synthetic-gpu"' in out and '"memory_gbps": 3072.0' in out


def test_device_without_cupy_names_the_cause_and_the_fix(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # the real query: import cupy fails as it does without CuPy
    assert main(["device"]) == 1
    err = capsys.readouterr().err
    assert "CuPy is not importable" in err and cuda_extra_command() in err


def test_device_without_a_gpu_reports_the_device_error(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    def no_gpu(index: int) -> None:
        raise NoGpuError("no CUDA device is usable: this machine has no NVIDIA GPU or driver")

    monkeypatch.setattr(device, "query_device", no_gpu)
    assert main(["device", "--gpu", "3"]) == 1
    assert "cannot query GPU 3: no CUDA device is usable" in capsys.readouterr().err


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["device", "--gpu", "-1"])
    assert info.value.code == 2
    assert "negative" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2


def test_python_dash_m_entry_point(old_new: tuple[Path, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "gpuperf", "baseline", "diff", *map(str, old_new)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{GEMV}" in done.stdout and "-5.0" in done.stdout


# -- baseline check and seal -----------------------------------------------------------------------------


def damaged_copies(good: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of damage ``baseline check`` must catch, as a copy of ``good``: (file, expected message part)."""
    text = good.read_text()
    last_entry = text.index(f"  {GEMV}:")  # entries are sorted: GEMM, then GEMV
    cases = {
        "truncated": (text[:last_entry], "1 entries listed, header says 2: the file was truncated or edited"),
        "edited value": (text.replace("value: 40.0", "value: 44.0"), "a measured figure was edited"),
        "duplicate entry": (text + text[last_entry:], f"entry {GEMV!r} appears twice"),
        "duplicate field": (text.replace("    unit: TFLOPS\n", "    unit: TFLOPS\n    value: 41.0\n"),
                            f"entry {GEMM!r}: field 'value' appears twice"),
        "wrong unit": (text.replace("unit: TFLOPS", "unit: TFL"), "unit 'TFL' does not match metric 'TFLOPS'"),
        "infinite spread": (text.replace("spread: 0.01", "spread: .inf", 1), "spread must be a finite fraction"),
        "no integrity": ("".join(line for line in text.splitlines(keepends=True)
                                 if not line.startswith(("  integrity:", "    entries:", "    sha256:"))),
                         "the header has no integrity field"),
    }
    copies = {}
    for name, (damaged, message) in cases.items():
        path = good.parent / f"{name.replace(' ', '-')}.yaml"
        path.write_text(damaged)
        copies[name] = (path, message)
    not_utf8 = good.parent / "not-utf8.yaml"
    not_utf8.write_bytes(text.encode("utf-8").replace(b"Synthetic GPU", b"Synthetic \xff GPU"))
    copies["not UTF-8"] = (not_utf8, "not UTF-8 text: byte 0xff at offset")
    return copies


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return write_baseline(tmp_path / "synthetic-gpu.yaml", {GEMV: entry("GB/s", 800.0), GEMM: entry("TFLOPS", 40.0)})


def test_baseline_check_a_good_file(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "check", str(good)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{good}: ok (2 entries, digest ") and out.count("\n") == 1
    assert err == ""


def test_baseline_check_names_each_kind_of_damage(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, (path, message) in damaged_copies(good).items():
        assert main(["baseline", "check", str(path)]) == 1, name
        out, err = capsys.readouterr()
        assert out.startswith(f"{path}: "), name
        assert message in out, (name, out)
        assert "1 of 1 baseline file(s) cannot be used" in err


def test_baseline_check_goes_over_every_file(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copies = damaged_copies(good)
    truncated, edited = copies["truncated"][0], copies["edited value"][0]
    missing = good.parent / "nvidia-nothing.yaml"
    assert main(["baseline", "check", str(truncated), str(good), str(missing), str(edited)]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [str(truncated), str(good), str(missing), str(edited)]
    assert "truncated or edited" in lines[0] and "git checkout --" in lines[0]
    assert lines[1].startswith(f"{good}: ok (2 entries")
    assert "no such baseline file" in lines[2]
    assert "a measured figure was edited" in lines[3]
    assert "3 of 4 baseline file(s) cannot be used" in err


def test_baseline_check_without_files_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["baseline", "check"])
    assert info.value.code == 2


def test_baseline_check_the_committed_baselines(capsys: pytest.CaptureFixture[str]) -> None:
    """What CPU CI runs before the tests: every committed baseline must load."""
    files = sorted(str(path) for path in (REPO / "baselines").glob("*.yaml"))
    assert main(["baseline", "check", *files]) == 0, capsys.readouterr().out


def test_baseline_seal_adds_only_the_integrity_field(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sealed = good.read_text()
    legacy = good.parent / "legacy" / good.name  # named for its GPU, as baseline check requires
    legacy.parent.mkdir()
    legacy.write_text("".join(line for line in sealed.splitlines(keepends=True)
                              if not line.startswith(("  integrity:", "    entries:", "    sha256:"))))
    assert main(["baseline", "check", str(legacy)]) == 1
    assert f"python -m gpuperf baseline seal {legacy}" in capsys.readouterr().out
    assert main(["baseline", "seal", str(legacy)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{legacy}: sealed (2 entries, digest ") and "git diff" in out
    assert legacy.read_text() == sealed
    assert main(["baseline", "seal", str(legacy)]) == 0
    assert "already sealed" in capsys.readouterr().out
    assert legacy.read_text() == sealed
    assert main(["baseline", "check", str(legacy)]) == 0


def test_baseline_seal_refuses_a_damaged_file_and_leaves_it(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copies = damaged_copies(good)
    for name in ("truncated", "edited value", "duplicate field", "wrong unit", "not UTF-8"):
        path = copies[name][0]
        before = path.read_bytes()
        assert main(["baseline", "seal", str(path)]) == 1, name
        assert copies[name][1] in capsys.readouterr().err, name
        assert path.read_bytes() == before, name
    assert main(["baseline", "seal", str(good.parent / "nvidia-nothing.yaml")]) == 1
    assert "no such baseline file" in capsys.readouterr().err


def test_baseline_seal_refuses_figures_it_would_round(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A legacy file with more digits than gpuperf writes would change on re-dumping: not sealed."""
    legacy = good.parent / "legacy" / good.name  # named for its GPU, as baseline check requires
    legacy.parent.mkdir()
    legacy.write_text("".join(line for line in good.read_text().splitlines(keepends=True)
                              if not line.startswith(("  integrity:", "    entries:", "    sha256:")))
                      .replace("value: 40.0", "value: 40.123456789"))
    before = legacy.read_bytes()
    assert main(["baseline", "seal", str(legacy)]) == 1
    assert "would change recorded figures" in capsys.readouterr().err
    assert legacy.read_bytes() == before


def test_baseline_drop_removes_only_the_named_entries_and_re_seals(good: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "drop", str(good), GEMV]) == 0
    out, _ = capsys.readouterr()
    assert f"{good}: dropped {GEMV}" in out and "1 entry dropped and the file re-sealed" in out
    assert main(["baseline", "check", str(good)]) == 0
    loaded = load_baseline(good)
    assert loaded is not None and set(loaded.entries) == {GEMM}
    assert loaded.entries[GEMM].value == 40.0


def test_baseline_drop_refuses_a_name_that_is_not_an_entry(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = good.read_bytes()
    assert main(["baseline", "drop", str(good), GEMV + "x"]) == 1
    assert "no entry" in capsys.readouterr().err
    assert good.read_bytes() == before


def test_an_improved_row_of_two_runs_suggests_recording_from_b_not_update_baselines(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """A is a run, not a baseline: there is no baseline to update, so the hint names baseline from-runs with B."""
    main(["compare", *map(str, runs)])
    improved = [line for line in capsys.readouterr().out.splitlines() if "IMPROVED" in line]
    assert len(improved) == 1
    assert f"python -m gpuperf baseline from-runs baselines/synthetic-gpu.yaml {runs[1]}" in improved[0]
    assert "--update-baselines" not in improved[0]


def test_the_suggested_from_runs_command_quotes_b_s_path(runs: tuple[Path, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A path with a space and shell text is one quoted word of the command to paste."""
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(runs[1], tmp_path / "b c;x.json")
    main(["compare", str(runs[0]), "b c;x.json"])
    (improved,) = [line for line in capsys.readouterr().out.splitlines() if "IMPROVED" in line]
    assert "baseline from-runs baselines/synthetic-gpu.yaml 'b c;x.json' (if B" in improved


def test_compare_says_when_a_and_b_ran_on_different_boards(capsys: pytest.CaptureFixture[str]) -> None:
    """Two passing gate runs of two H200s (the committed merge-gate evidence) differ by the boards: the header says
    so before the table; the same board's run against itself says nothing of the kind."""
    runs = REPO / "evidence" / "ab" / "merge-gate"
    a, b = str(runs / "0d7bcbaf" / "gate.json"), str(runs / "407f2e2d" / "gate.json")
    main(["compare", a, b])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("A and B ran on different GPUs (A GPU-0d7bcbaf, B GPU-407f2e2d, both nvidia-h200): "
                               "each delta includes how the two boards differ")
    assert lines[2].startswith("case ")  # before the table
    main(["compare", a, a])
    assert "different GPUs" not in capsys.readouterr().out
