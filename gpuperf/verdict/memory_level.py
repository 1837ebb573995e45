"""A host's memory level in one run, taken out of the memory-bound entries a fleet's baseline levels.

Hosts of one GPU model read memory-bound cases differently (1–3 % on the H200 fleet, evidence/fleet.md), while
within one run a host's GEMV family moves together with its other memory-bound cases. A fleet's baseline therefore
judges some memory-bound entries (``Entry.memory_level``, chosen by ``fleet_bands.adopting`` where leaving one host
out shows it lowers the resolution without raising the false-red estimate) on their figure with the run's level
taken out: the level is the median deviation of the run's GEMV figures from their entries (``run_level``), kept
within the range of levels the fleet's own runs showed, so that a change that slows the whole family beyond any
host's reading is still caught (``levelled``).

The level is known only once the run's GEMVs are measured, so a levelled entry is judged twice: by its test, on
its plain band (``Entry.band``), and at the end of the run, on the levelled band. Either fails the gate; the
baseline's false-red estimate counts both (``fleet_bands.adopting``).

Pure: records and entries in, records out.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpuperf.store.baseline_entry import Entry
from gpuperf.store.records import Record
from gpuperf.verdict.gate import Basis, GateConfig, compare, valid_figure
from gpuperf.vocabulary import Status

#: The family whose median deviation in a run is the host's memory level.
LEVEL_FAMILY = "gemv"
#: The records that say how fast the host read a case: judged against their entry on their time.
_JUDGED = (Status.PASS, Status.IMPROVED, Status.REGRESSED)


@dataclass(frozen=True)
class RunLevel:
    """The run's memory level (a fraction: +0.012 reads 1.2 % faster than the entries) and the cases it is the
    median of."""

    level: float
    cases: int


def run_level(records: Sequence[Record], entries: Mapping[str, Entry]) -> RunLevel | None:
    """The median deviation of the run's judged GEMV figures from their entries; ``None`` without any."""
    deviations = [record.value / entry.value - 1.0 for record in records
                  if (entry := entries.get(record.case_id)) is not None and entry.family == LEVEL_FAMILY
                  and record.status in _JUDGED and record.judged_on == Basis.TIME and valid_figure(record.value)]
    return RunLevel(statistics.median(deviations), len(deviations)) if deviations else None


def levelled(record: Record, entry: Entry | None, level: RunLevel | None, config: GateConfig) -> Record:
    """``record`` judged again with the run's level taken out, where its entry says so and the level rests on at
    least half the family's cases the entry's level range was made from; a record its test already failed, or
    one not judged on its time, is left as it is."""
    block = entry.memory_level if entry is not None else None
    if (block is None or entry is None or level is None or 2 * level.cases < block.cases
            or record.status not in (Status.PASS, Status.IMPROVED) or record.judged_on != Basis.TIME
            or not valid_figure(record.value)):
        return record
    taken = min(max(level.level, block.low), block.high)
    reference = replace(entry, value=block.value, band=block.band, resolution=block.resolution, run_spread=0.0,
                        at_max_clock=None)
    result = compare(record.value / (1.0 + taken), reference, config)
    kept = "" if taken == level.level else (f", kept within the fleet's {100 * block.low:+.1f}…{100 * block.high:+.1f} % "
                                            f"from {100 * level.level:+.1f} %")
    said = (f"memory level {100 * taken:+.1f} % of this run ({level.cases} GEMV cases{kept}) taken out: "
            f"{100 * result.delta:+.1f} % against band {100 * result.tolerance:.1f} %")
    if result.status != Status.REGRESSED:
        return replace(record, note="; ".join(part for part in (record.note, said) if part))
    return replace(record, status=Status.REGRESSED, baseline=block.value * (1.0 + taken),
                   delta_pct=100 * result.delta, tolerance=result.tolerance,
                   note="; ".join(part for part in (f"{100 * -result.delta:.1f} % below baseline with the host's "
                                                    f"memory level taken out (tolerance "
                                                    f"{100 * result.tolerance:.1f} %)", said, record.note) if part))


def levelled_records(records: Sequence[Record], entries: Mapping[str, Entry], config: GateConfig) -> list[Record]:
    """Every record of one GPU model's run, those of levelled entries judged again (``levelled``)."""
    if not any(entry.memory_level is not None for entry in entries.values()):
        return list(records)
    level = run_level(records, entries)
    return [levelled(record, entries.get(record.case_id), level, config) for record in records]
