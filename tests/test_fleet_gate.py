"""A fleet's baseline in a pytest run (fake GPU): the run names, once and at its start, the entries that cannot catch
``--must-catch`` on every host, and their notes say it; ``--update-baselines`` on one host keeps a fleet's entry and
says what it would change and how many hosts the new entry would rest on."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from gpuperf.store.baseline import MemoryLevel, dump_baseline, load_baseline
from test_plugin import GEMM_ID, GEMV_ID, GEMV_S, GEMM_S, project, recorded, run, set_timings  # noqa: F401 - fixture

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.long  # each test runs pytest in a fresh process or two


def as_fleet(project: pytest.Pytester, resolution: float) -> None:
    """The recorded GEMV entry made a fleet's: 12 hosts, a 6 % band, ``resolution``."""
    recorded(project)
    path = project.path / "baselines" / "fake-gpu.yaml"
    baseline = load_baseline(path)
    assert baseline is not None
    entries = dict(baseline.entries)
    entries[GEMV_ID] = replace(entries[GEMV_ID], hosts=12, band=0.06, resolution=resolution)
    path.write_text(dump_baseline(baseline.header, entries))


def test_the_run_names_the_entries_that_cannot_catch_the_stated_slowdown_once_at_its_start(
        project: pytest.Pytester) -> None:
    as_fleet(project, 0.072)
    result = run(project)
    result.assert_outcomes(passed=2, deselected=1)
    lines = result.stdout.lines
    said = [i for i, line in enumerate(lines) if "RESOLUTION:" in line]
    first_result = next(i for i, line in enumerate(lines) if "test_perf.py " in line)
    assert len(said) == 1 and said[0] < first_result
    assert "1 of 2 entries" in lines[said[0]] and "5.0 % slowdown" in lines[said[0]]
    result.stdout.fnmatch_lines(["*PASS*resolution 7.2 %*A/B gate*"])
    quiet = run(project, "--must-catch", "0.08")
    quiet.assert_outcomes(passed=2, deselected=1)
    assert "RESOLUTION" not in quiet.stdout.str() and "resolution 7.2 %" not in quiet.stdout.str()


def test_one_host_s_update_keeps_the_fleet_entry_and_says_what_it_would_change(project: pytest.Pytester) -> None:
    as_fleet(project, 0.03)
    before = yaml.safe_load((project.path / "baselines" / "fake-gpu.yaml").read_text())["entries"][GEMV_ID]
    set_timings(project, gemv=GEMV_S / 1.02, gemm=GEMM_S / 1.02)
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*kept 1 fleet entry of *fake-gpu.yaml (each resting on up to 12 hosts)*rest on "
                                 "this 1 host*", "*test_gemv*", "*baseline from-fleet *fake-gpu.yaml*"])
    after = yaml.safe_load((project.path / "baselines" / "fake-gpu.yaml").read_text())["entries"]
    assert after[GEMV_ID] == before  # the fleet's entry, its band and resolution, as they were
    assert GEMM_ID not in after or after[GEMM_ID]["value"] > 0


def as_levelled(project: pytest.Pytester) -> None:
    """The recorded GEMV entry made a fleet's levelled one: a 7 % band on its own, 4.5 % with the run's memory level
    (its own family's median) taken out, kept within −1…+2 %."""
    recorded(project)
    path = project.path / "baselines" / "fake-gpu.yaml"
    baseline = load_baseline(path)
    assert baseline is not None
    entries = dict(baseline.entries)
    gemv = entries[GEMV_ID]
    assert gemv.family == "gemv"
    block = MemoryLevel(value=gemv.value, band=0.045, resolution=0.05, low=-0.01, high=0.02, cases=1)
    entries[GEMV_ID] = replace(gemv, hosts=12, band=0.07, resolution=0.08, memory_level=block)
    path.write_text(dump_baseline(baseline.header, entries))


def test_a_slowdown_the_plain_band_lets_pass_fails_the_run_with_the_memory_level_taken_out(
        project: pytest.Pytester) -> None:
    as_levelled(project)
    set_timings(project, gemv=GEMV_S / 0.94, gemm=GEMM_S)  # 6 % slower: inside the 7 % band, beyond any host's level
    result = run(project)
    result.assert_outcomes(passed=2, deselected=1)  # each test judged its own figure on its plain band
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*test_gemv*REGRESSED*below baseline with the host's memory level taken out*",
                                 "*GATE FAILED: REGRESSED *test_gemv*kept within the fleet's -1.0…+2.0 % from -6.0 %*"])
    set_timings(project, gemv=GEMV_S / 1.01, gemm=GEMM_S)
    steady = run(project, "--results-dir", "out")
    steady.assert_outcomes(passed=2, deselected=1)
    assert steady.ret == 0 and "GATE FAILED" not in steady.stdout.str()
    written = json.loads(next((project.path / "out").rglob("*.json")).read_text())
    note = next(r["note"] for r in written["records"] if r["case_id"] == GEMV_ID)
    assert "memory level +1.0 % of this run (1 GEMV cases) taken out: -0.0 % against band 4.5 %" in note
