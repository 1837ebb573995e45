"""``python -m gpuperf``: baseline diff, check and seal, plot, device (with a stand-in device module), and
its errors."""

from __future__ import annotations

import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuperf import results
from gpuperf.__main__ import main
from gpuperf.baseline import Entry, dump_baseline, load_baseline
from gpuperf.records import Record, RunInfo
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
    assert gemv.split()[1:] == ["GB/s", "800.0", "760.0", "−5.0", "%"]
    gemm = next(line for line in out.splitlines() if line.startswith(GEMM))
    assert "40.00" in gemm and "42.00" in gemm and "+5.0 %" in gemm
    assert "removed" in next(line for line in out.splitlines() if line.startswith(OLD_ONLY))
    assert "added" in next(line for line in out.splitlines() if line.startswith(NEW_ONLY))
    assert "2 compared" in out and "1 added" in out and "1 removed" in out


def test_baseline_diff_markdown_and_min_delta(old_new: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "diff", "--markdown", "--min-delta", "5.0", *map(str, old_new)]) == 0
    out = capsys.readouterr().out
    assert "| case | metric | old | new | Δ % |" in out
    assert f"| `{GEMV}` | GB/s | 800.0 | 760.0 | −5.0 % |" in out
    assert "+5.0 %" in out  # |Δ| = 5.0 is not below 5.0
    assert main(["baseline", "diff", "--markdown", "--min-delta", "5.1", *map(str, old_new)]) == 0
    out = capsys.readouterr().out
    assert GEMV not in out and GEMM not in out and "added" in out


def test_baseline_diff_of_a_results_file_against_a_baseline(tmp_path: Path, old_new: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run = RunInfo("Synthetic GPU", "synthetic-gpu", "9.0", "1.2.3", "13.0", "13.1.0", "14.0.0", 2000, 3000,
                  ("cold",), "2026-01-01T00:00:00+00:00", {"peaks": PEAKS})
    record = Record(GEMV, GEMV, "gemv", {"op": "N", "shape": "16384x16384"}, "GB/s", 880.0, "GB/s", Status.PASS)
    files = results.write_run(tmp_path / "run", run, [record])
    assert main(["baseline", "diff", str(old_new[0]), str(files.directory)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(GEMV))
    assert "+10.0 %" in line


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


def test_plot_a_baseline_writes_pngs_beside_it(old_new: tuple[Path, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", str(old_new[1])]) == 0
    written = [Path(line) for line in capsys.readouterr().out.split()]
    assert {p.name for p in written} == {"throughput-gemv.png", "throughput-gemm.png", "roofline.png"}
    assert all(p.parent == old_new[1].parent / "new-plots" and p.stat().st_size > 0 for p in written)


def test_plot_a_results_directory_into_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = RunInfo("Synthetic GPU", "synthetic-gpu", "9.0", "1.2.3", "13.0", "13.1.0", "14.0.0", 2000, 3000,
                  ("cold",), "2026-01-01T00:00:00+00:00", {"peaks": PEAKS})
    record = Record(GEMM, GEMM, "gemm", {"dtype": "fp32", "shape": "4096x4096x4096"}, "TFLOPS", 40.0, "TFLOPS",
                    Status.PASS, flops=2 * 4096.0**3, bytes=3 * 4 * 4096.0**2, tflops=40.0)
    files = results.write_run(tmp_path / "run", run, [record])
    assert main(["plot", str(files.directory), "--out", str(tmp_path / "png")]) == 0
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["roofline.png", "throughput-gemm.png"]


def test_plot_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", str(tmp_path / "missing.yaml")]) == 1
    assert "missing.yaml: no such baseline file" in capsys.readouterr().err
    ratios = write_baseline(tmp_path / "ratios.yaml", {f"{GEMM}#vs_cublas": entry("ratio", 0.9)})
    assert main(["plot", str(ratios)]) == 1
    assert "nothing to plot" in capsys.readouterr().err


@dataclass(frozen=True)
class FakeInfo:
    index: int = 0
    name: str = "Synthetic GPU"
    cc: tuple[int, int] = (9, 0)
    sm_count: int = 100
    l2_bytes: int = 50 * 2**20
    mem_clock_mhz: int = 3000
    bus_width_bits: int = 4096
    sm_clock_max_mhz: int = 2000
    total_memory_bytes: int = 80 * 2**30
    driver: str = "1.2.3"
    cuda_runtime: str = "13.0"
    cublas: str = "13.1.0"
    cupy: str = "14.0.0"
    clock_events: tuple[str, ...] = ()
    missing: tuple[str, ...] = ("NVML bindings missing: pip install nvidia-ml-py",)

    @property
    def slug(self) -> str:
        return "synthetic-gpu"

    @property
    def arch(self) -> str:
        return "sm_90"

    @property
    def compute_capability(self) -> str:
        return "9.0"

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "slug": self.slug}


def fake_device_module(monkeypatch: pytest.MonkeyPatch, query: object) -> None:
    module = types.ModuleType("gpuperf.device")
    module.query_device = query  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpuperf.device", module)


def test_device_prints_identity_versions_clocks_and_peaks(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    fake_device_module(monkeypatch, lambda index: (FakeInfo(index=index), object()))
    assert main(["device", "--gpu", "0"]) == 0
    out = capsys.readouterr().out
    for fragment in ("GPU 0: Synthetic GPU (sm_90", "baselines/synthetic-gpu.yaml", "cuBLAS", "13.1.0",
                     "SM max", "2000 MHz", "fp16", "TFLOPS", "GB/s", "nvidia-ml-py"):
        assert fragment in out
    assert main(["device", "--slug"]) == 0
    assert capsys.readouterr().out == "synthetic-gpu\n"
    assert main(["device", "--json"]) == 0
    assert '"slug": "synthetic-gpu"' in capsys.readouterr().out


def test_device_without_cupy_names_the_cause_and_the_fix(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    def no_cupy(index: int) -> None:
        raise ModuleNotFoundError("No module named 'cupy'", name="cupy")

    fake_device_module(monkeypatch, no_cupy)
    assert main(["device"]) == 1
    err = capsys.readouterr().err
    assert "CuPy is not importable" in err and "pip install -e '.[cuda13]'" in err


def test_device_without_a_gpu_reports_the_device_error(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    def no_gpu(index: int) -> None:
        raise RuntimeError("no CUDA device is usable: this machine has no NVIDIA GPU or driver")

    fake_device_module(monkeypatch, no_gpu)
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
    assert "−5.0 %" in done.stdout


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
    legacy = good.parent / "legacy.yaml"
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
    legacy = good.parent / "legacy.yaml"
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
