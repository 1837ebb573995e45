"""The fleet's baseline (``baseline from-fleet``, ``verdict/fleet_bands.py``): the committed file is what the command
writes from the committed runs, every one of them green against it; evidence/fleet.md's leave-one-host-out section is
what ``fleet --bands`` prints; the schema, the gate's band, the start-of-run resolution line and one host's
``--update-baselines`` keeping a fleet's entry."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from gpuperf.cli import main
from gpuperf.commands.fleet import expand_lists, runs_from
from gpuperf.output.fleet_report import resolution_banner
from gpuperf.output.readme import section_markers
from gpuperf.store.baseline import BaselineError, Entry, dump_baseline, load_baseline, parse_baseline, update_baseline
from gpuperf.verdict.false_alarms import judge
from gpuperf.verdict.fleet_bands import TARGET_RED, CaseFleet, Spread, banded_baseline, most_that_can_catch
from gpuperf.verdict.fleet_estimate import binomial_upper
from gpuperf.verdict.fleet_resolution import classify
from gpuperf.verdict.gate import GateConfig, effective_tolerance
from gpuperf.verdict.student_t import t_quantile

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "baselines" / "nvidia-h200.yaml"
RUNS = REPO / "baselines" / "nvidia-h200.runs"
FLEET_DOC = REPO / "evidence" / "fleet.md"
HEADER = {"gpu": "NVIDIA H200", "slug": "nvidia-h200", "driver": "580.159.04"}


@pytest.mark.long
def test_the_committed_baseline_is_what_from_fleet_writes_from_the_listed_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    committed = load_baseline(BASELINE)
    assert committed is not None
    copy = tmp_path / "nvidia-h200.yaml"
    shutil.copyfile(BASELINE, copy)
    assert main(["baseline", "from-fleet", str(copy), f"@{RUNS.relative_to(REPO)}"]) == 0
    out = capsys.readouterr().out
    assert "163 entries from 23 runs on 16 GPUs" in out and "resolution: " in out
    rewritten = load_baseline(copy)
    assert rewritten is not None and rewritten.entries == committed.entries
    assert {entry.hosts for entry in committed.entries.values()} <= {15, 16}  # one case left out of one run (unheld)
    assert all(entry.band is not None and entry.resolution is not None for entry in committed.entries.values())
    for run in expand_lists([f"@{RUNS.relative_to(REPO)}"]):
        assert main(["compare", str(BASELINE), run]) == 0, f"{run} is red against the fleet's baseline"
    capsys.readouterr()


@pytest.mark.long
def test_the_fleet_page_s_leave_one_host_out_section_is_the_command_s(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    assert main(["fleet", "--bands", "--markdown", f"@{RUNS.relative_to(REPO)}"]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    start = "<!-- gpuperf:fleet-bands:start"
    page = FLEET_DOC.read_text(encoding="utf-8")
    section = page[page.index(start):page.index(section_markers("fleet-bands", "")[1])]
    assert section.split("\n", 1)[1].rstrip("\n") == printed
    assert "expected red full gates per 100 fresh-host runs 1.00" in printed
    recorded = re.search(r"As recorded, .*?resolution: (\d+) of (\d+) entries catch", printed)
    plain = re.search(r"With no level taken out: .*?resolution: (\d+) of \d+ entries catch", printed)
    assert recorded and plain
    assert f"{recorded[1]} of {recorded[2]} catch 5 % on every host, against {plain[1]} with no level" in \
        " ".join(page.split())
    bound = re.search(r"at most (\d+) of (\d+) entries could catch .*? and at most (\d+) with bands", printed)
    assert bound and int(recorded[1]) <= int(bound[1]) <= int(bound[3]) < 0.9 * int(bound[2])
    assert f"at most {bound[1]} of {bound[2]} with the 4 % tolerance as the floor, {bound[3]} even with bands below" \
        in " ".join(page.split())


def test_the_resolution_summary_counts_the_committed_entries() -> None:
    committed = load_baseline(BASELINE)
    assert committed is not None
    found = classify(committed.entries, 0.05, GateConfig().cap)
    assert found.entries == 163 and not found.unknown
    assert all(committed.entries[case].resolution_levelled <= 0.05 for case in found.catches)  # type: ignore[operator]
    levelled = [case for case, entry in committed.entries.items() if entry.memory_level is not None]
    assert levelled and all(committed.entries[case].memory_level.resolution  # type: ignore[union-attr]
                            < committed.entries[case].resolution for case in levelled)  # type: ignore[operator]
    assert all(0.05 < value <= 0.08 for _, value in found.larger) and all(value > 0.08 for _, value in found.ab_only)


def entry(**fields: object) -> Entry:
    return replace(Entry(metric="TFLOPS", value=100.0, unit="TFLOPS", method="cupti-cold"), **fields)  # type: ignore[arg-type]


def test_a_fleet_band_is_the_floor_and_is_not_cut_by_the_cap() -> None:
    config = GateConfig()
    assert effective_tolerance(entry(run_spread=0.06), config) == 0.06
    assert effective_tolerance(entry(run_spread=0.06, band=0.045, hosts=16), config) == 0.045
    assert effective_tolerance(entry(band=0.12, hosts=16), config) == 0.12
    assert effective_tolerance(entry(band=0.01, hosts=16), config) == config.tolerance


@pytest.mark.parametrize("field, value", [("band", 0.0), ("band", 1.5), ("resolution", -0.1), ("hosts", 0),
                                          ("hosts", True), ("band", "5 %")])
def test_a_bad_fleet_field_is_refused_with_the_file_and_entry(tmp_path: Path, field: str, value: object) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    text = dump_baseline(HEADER, {"case": entry(band=0.05, resolution=0.06, hosts=3)})
    bad = text.replace({"band": "band: 0.05", "resolution": "resolution: 0.06", "hosts": "hosts: 3"}[field],
                       f"{field}: {value!r}" if isinstance(value, str) else f"{field}: {value}")
    assert bad != text
    with pytest.raises(BaselineError, match=rf"entry 'case'.*{field}"):
        parse_baseline(path, bad)


def test_fleet_fields_are_sealed(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    text = dump_baseline(HEADER, {"case": entry(band=0.05, resolution=0.06, hosts=3)})
    assert parse_baseline(path, text).entries["case"].resolution == 0.06
    with pytest.raises(BaselineError, match="sha256"):
        parse_baseline(path, text.replace("resolution: 0.06", "resolution: 0.04"))


def test_one_host_s_update_keeps_a_fleet_entry_and_says_what_it_would_change(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    update_baseline(path, HEADER, {"fleet": entry(band=0.07, resolution=0.09, hosts=16), "own": entry()})
    changes = update_baseline(path, HEADER, {"fleet": entry(value=110.0), "own": entry(value=90.0)}, keep_fleet=True)
    assert [(c.case_id, c.held) for c in changes] == [("fleet", True), ("own", False)]
    kept = load_baseline(path)
    assert kept is not None and kept.entries["fleet"].value == 100.0 and kept.entries["fleet"].band == 0.07
    assert kept.entries["own"].value == 90.0
    update_baseline(path, HEADER, {"fleet": entry(value=110.0)})  # from-fleet's write replaces it
    assert load_baseline(path).entries["fleet"].value == 110.0  # type: ignore[union-attr]


def test_the_start_of_run_line_names_the_entries_that_cannot_catch_the_stated_slowdown() -> None:
    entries = {"a": entry(resolution=0.04, hosts=3), "b": entry(resolution=0.09, hosts=3), "c": entry()}
    lines = resolution_banner(Path("baselines/x.yaml"), entries, 0.05)
    assert len(lines) == 1 and "1 of 3 entries" in lines[0] and "b 9.0 %" in lines[0] and "--must-catch" in lines[0]
    assert resolution_banner(Path("baselines/x.yaml"), entries, 0.10) == []


def test_the_binomial_bound_is_clopper_pearson_s() -> None:
    assert binomial_upper(0, 23) == pytest.approx(1 - 0.05 ** (1 / 23), abs=1e-9)
    assert binomial_upper(23, 23) == 1.0


def test_a_run_list_that_lists_nothing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = tmp_path / "runs"
    listed.write_text("# nothing yet\n", encoding="utf-8")
    assert main(["fleet", f"@{listed}"]) != 0
    assert "lists no run" in capsys.readouterr().err


@pytest.mark.long
def test_each_committed_resolution_is_the_gate_s_own_over_the_listed_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resolution stored is the largest slowdown ``false_alarms.judge`` (the gate's rule) finds each committed
    run would let pass, entry by entry."""
    monkeypatch.chdir(REPO)
    committed = load_baseline(BASELINE)
    assert committed is not None
    runs = runs_from([f"@{RUNS.relative_to(REPO)}"])
    config = GateConfig()
    for case, entry in committed.entries.items():
        caught = [judged.catches for run in runs if (record := run.clean().get(case)) is not None
                  and record.method == entry.method and (judged := judge(record, entry, config)).catches is not None]
        assert entry.resolution == pytest.approx(max(caught), abs=2e-5), case


def spread(*offsets: float) -> Spread:
    hosts = tuple(f"h{i}" for i in range(len(offsets)))
    return Spread(hosts=hosts, loo=offsets, offsets=offsets, judged=(True,) * len(offsets), middle=1.0)


def test_the_bands_keep_a_fresh_host_s_full_gate_within_the_target_and_widen_only_the_wide_entries() -> None:
    config = GateConfig()
    quiet = (0.002, -0.003, 0.001, -0.001, 0.002, -0.002, 0.0, 0.001)
    wide = (0.02, -0.025, 0.015, -0.01, 0.03, -0.02, 0.0, 0.01)
    fleets = {f"q{i}": CaseFleet(f"q{i}", 8, {"time": spread(*quiet)}) for i in range(50)}
    fleets["wide"] = CaseFleet("wide", 8, {"time": spread(*wide)})
    entries = {case: entry() for case in fleets}
    made = banded_baseline(entries, fleets, config)
    assert made.bands.rate <= TARGET_RED
    assert {made.bands.bands[f"q{i}"]["time"] for i in range(50)} == {config.tolerance}
    scale = fleets["wide"].spreads["time"].scale
    assert made.bands.bands["wide"]["time"] == pytest.approx(t_quantile(made.bands.alpha, 7) * scale)
    assert made.bands.bands["wide"]["time"] > config.tolerance  # the one entry that spends the budget
    assert made.entries["wide"].resolution == pytest.approx(1 - (1 - made.bands.bands["wide"]["time"]) / 1.03)
    assert made.entries["q0"].resolution == pytest.approx(1 - (1 - config.tolerance) / 1.002)
    tighter = banded_baseline(entries, fleets, config, target=0.001)
    assert tighter.bands.bands["wide"]["time"] > made.bands.bands["wide"]["time"]


def test_after_a_driver_upgrade_one_host_s_update_holds_every_fleet_entry_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    update_baseline(path, HEADER, {"a": entry(band=0.05, resolution=0.05, hosts=4), "b": entry(band=0.05, hosts=4)})
    before = path.read_bytes()
    upgraded = {**HEADER, "driver": "590.10.01"}
    changes = update_baseline(path, upgraded, {"a": entry(value=120.0), "b": entry(value=80.0)}, keep_fleet=True)
    assert [(c.case_id, c.held) for c in changes] == [("a", True), ("b", True)]
    assert path.read_bytes() == before
    with pytest.raises(BaselineError, match="baseline from-fleet"):  # a one-host entry among them cannot be re-recorded
        update_baseline(path, upgraded, {"c": entry()}, keep_fleet=True)


@pytest.mark.long
def test_fleet_and_compare_say_what_the_committed_entries_catch(capsys: pytest.CaptureFixture[str]) -> None:
    gates = [str(REPO / "evidence" / "fleet" / "gate" / f"{host}-gate.json") for host in ("0e8d49c2", "7bde0c32")]
    assert main(["fleet", *gates, "--baseline", str(BASELINE)]) == 0
    committed = load_baseline(BASELINE)
    assert committed is not None
    found = classify(committed.entries, 0.05, GateConfig().cap)
    out = capsys.readouterr().out
    assert f"resolution: {len(found.catches)} of 163 entries catch a 5.0 % slowdown on every host" in out
    assert main(["compare", str(BASELINE), gates[0]]) == 0
    widest, value = found.ab_only[0]
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(widest))
    said = f"{100 * value:.1f} % with the run's memory level" if committed.entries[widest].memory_level else \
        f"resolution {100 * value:.1f} %"
    assert said in row and "the A/B gate's" in row
    assert main(["compare", str(BASELINE), gates[0], "--must-catch", "0.2"]) == 0
    assert "resolution " not in capsys.readouterr().out


def test_the_bound_counts_the_entries_that_could_catch_the_slowdown_within_the_budget() -> None:
    config = GateConfig()
    quiet = (0.002, -0.003, 0.001, -0.001, 0.002, -0.002, 0.0, 0.001)
    fast_host = (0.012, -0.004, 0.001, -0.002, 0.002, -0.003, 0.0, 0.001)  # 1.2 % above: 4 % + that misses 5 %
    wide = (0.02, -0.025, 0.015, -0.01, 0.03, -0.02, 0.0, 0.01)  # a 2 % scale: too dear to catch 5 %
    fleets = {f"q{i}": CaseFleet(f"q{i}", 8, {"time": spread(*quiet)}) for i in range(10)}
    fleets["fast"] = CaseFleet("fast", 8, {"time": spread(*fast_host)})
    fleets["wide"] = CaseFleet("wide", 8, {"time": spread(*wide)})
    entries = {case: entry() for case in fleets}
    assert most_that_can_catch([fleets], entries, 0.05, config) == 10
    assert most_that_can_catch([fleets], entries, 0.05, config, tolerance=False) == 11  # the fast host's, below 4 %
    assert most_that_can_catch([fleets], entries, 0.05, config, target=1e-12) == 0
