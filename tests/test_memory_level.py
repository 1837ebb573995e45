"""A run's memory level (``verdict/memory_level.py``): the median of its judged GEMV figures against their entries,
taken out of a fleet's levelled entries at the end of the run, kept within the range the fleet's runs showed, and
used only when it rests on at least half the family's cases; ``baseline`` keeps, seals and checks the block."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from gpuperf.store.baseline import BaselineError, Entry, MemoryLevel, dump_baseline, parse_baseline
from gpuperf.store.records import Record
from gpuperf.verdict.false_alarms import judge
from gpuperf.verdict.gate import Basis, GateConfig, decide, Context
from gpuperf.verdict.memory_level import RunLevel, levelled, levelled_records, run_level
from gpuperf.vocabulary import Status

CONFIG = GateConfig()
BLOCK = MemoryLevel(value=1000.0, band=0.045, resolution=0.04, low=-0.01, high=0.02, cases=4)
HEADER = {"gpu": "NVIDIA H200", "slug": "nvidia-h200", "driver": "580.159.04"}


def entry(family: str = "gemv", value: float = 1000.0, **fields: object) -> Entry:
    base = Entry(metric="GB/s", value=value, unit="GB/s", method="cupti-cold", family=family, hosts=16, band=0.07,
                 resolution=0.08)
    return replace(base, **fields)  # type: ignore[arg-type]


def measured(case: str, value: float, family: str = "gemv") -> Record:
    return Record(case_id=case, nodeid=case, family=family, params={}, metric="GB/s", value=value, unit="GB/s",
                  status=Status.PASS, method="cupti-cold", rel_iqr=0.002, samples=50)


def judged(case: str, value: float, the_entry: Entry) -> Record:
    return decide(measured(case, value, the_entry.family), the_entry, CONFIG, Context())


def test_the_level_is_the_median_deviation_of_the_run_s_judged_gemvs() -> None:
    draw = random.Random(7)
    deviations = [draw.uniform(-0.03, 0.03) for _ in range(9)]
    entries = {f"gemv{i}": entry(value=draw.uniform(500, 5000)) for i in range(9)}
    entries["gemm"] = entry(family="gemm")
    records = [judged(case, e.value * (1 + d), e) for (case, e), d in zip(entries.items(), deviations)]
    records.append(judged("gemm", 2000.0, entries["gemm"]))  # 100 % faster: not of the family
    records.append(replace(judged("gemv0", 1.0, entries["gemv0"]), case_id="gemv0@2", status=Status.UNRELIABLE))
    level = run_level(records, entries)
    assert level is not None and level.cases == 9
    assert level.level == pytest.approx(sorted(deviations)[4], rel=1e-9)
    assert run_level([records[-2]], entries) is None


def test_a_host_reading_memory_faster_passes_and_a_slowdown_hidden_by_it_is_caught() -> None:
    the_entry = entry(memory_level=BLOCK)
    fast_host = RunLevel(0.015, 4)
    same = levelled(judged("proj", 1000.0 * 1.015, the_entry), the_entry, fast_host, CONFIG)
    assert same.status == Status.PASS and "memory level +1.5 % of this run (4 GEMV cases) taken out" in same.note
    hidden = judged("proj", 1000.0 * 1.015 * 0.95, the_entry)  # −3.6 % plain: inside the plain band of 7 %
    assert hidden.status == Status.PASS
    caught = levelled(hidden, the_entry, fast_host, CONFIG)
    assert caught.status == Status.REGRESSED
    assert caught.delta_pct == pytest.approx(-5.0, abs=1e-9) and caught.tolerance == pytest.approx(0.045)
    assert caught.baseline == pytest.approx(1015.0) and "memory level taken out" in caught.note


def test_a_level_beyond_the_fleet_s_range_is_kept_within_it_so_a_family_wide_slowdown_is_caught() -> None:
    the_entry = entry(memory_level=BLOCK)
    whole_family_slower = RunLevel(-0.06, 4)  # every GEMV 6 % slower: no host read that
    record = judged("proj", 1000.0 * 0.94, the_entry)
    assert record.status == Status.PASS  # the plain band of 7 % lets it pass
    caught = levelled(record, the_entry, whole_family_slower, CONFIG)
    assert caught.status == Status.REGRESSED and caught.delta_pct == pytest.approx((0.94 / 0.99 - 1) * 100)
    assert "kept within the fleet's -1.0…+2.0 % from -6.0 %" in caught.note


def test_the_level_is_not_taken_from_too_few_cases_nor_applied_where_the_entry_does_not_ask() -> None:
    the_entry = entry(memory_level=BLOCK)
    record = judged("proj", 1000.0 * 0.96, the_entry)
    assert levelled(record, the_entry, RunLevel(0.02, 1), CONFIG) == record  # 1 of the 4 cases the range came from
    assert levelled(record, entry(), RunLevel(0.02, 4), CONFIG) == record
    assert levelled(record, the_entry, None, CONFIG) == record
    failed = replace(record, status=Status.REGRESSED)
    assert levelled(failed, the_entry, RunLevel(0.02, 4), CONFIG) == failed
    on_cycles = replace(record, judged_on=Basis.CYCLES)
    assert levelled(on_cycles, the_entry, RunLevel(0.02, 4), CONFIG) == on_cycles


def test_a_whole_run_is_judged_again_with_its_own_level_and_the_false_alarm_judge_agrees() -> None:
    entries = {f"gemv{i}": entry() for i in range(4)}
    entries["proj"] = entry(family="projection", memory_level=BLOCK)
    records = [judged(f"gemv{i}", 1020.0, entries[f"gemv{i}"]) for i in range(4)]
    records.append(judged("proj", 1020.0 * 0.95, entries["proj"]))
    again = levelled_records(records, entries, CONFIG)
    assert [r.status for r in again] == [Status.PASS] * 4 + [Status.REGRESSED]
    level = run_level(records, entries)
    assert judge(records[-1], entries["proj"], CONFIG, level).alarm
    assert not judge(records[-1], entries["proj"], CONFIG).alarm  # its test alone lets it pass
    assert levelled_records(records, {case: replace(e, memory_level=None) for case, e in entries.items()},
                            CONFIG) == records


def test_the_block_is_kept_sealed_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    text = dump_baseline(HEADER, {"case": entry(memory_level=BLOCK)})
    assert parse_baseline(path, text).entries["case"].memory_level == BLOCK
    assert parse_baseline(path, text).entries["case"].resolution_levelled == 0.04
    with pytest.raises(BaselineError, match="sha256"):
        parse_baseline(path, text.replace("band: 0.045", "band: 0.05"))


@pytest.mark.parametrize("key, value", [("band", "0"), ("band", "1.5"), ("low", "0.01"), ("high", "-0.01"),
                                        ("cases", "0"), ("cases", "2.5"), ("value", "-3"), ("resolution", "nan")])
def test_a_bad_memory_level_is_refused_with_the_file_and_entry(tmp_path: Path, key: str, value: str) -> None:
    path = tmp_path / "nvidia-h200.yaml"
    text = dump_baseline(HEADER, {"case": entry(memory_level=BLOCK)})
    old = {"band": "band: 0.045", "low": "low: -0.01", "high": "high: 0.02", "cases": "cases: 4",
           "value": "value: 1000.0\n      band", "resolution": "resolution: 0.04"}[key]
    bad = text.replace(old, f"{key}: {value}" + ("\n      band" if key == "value" else ""), 1)
    assert bad != text
    with pytest.raises(BaselineError, match=r"entry 'case'.*memory_level"):
        parse_baseline(path, bad)
