"""What a fleet's entries catch: each entry's resolution sorted against the slowdown a user must catch, why an
entry cannot catch it (its band, the fastest host's reading, the scale that set the band). The resolutions themselves are chosen in ``fleet_bands.py``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuperf.store.baseline import Entry
from gpuperf.verdict.fleet_bands import CaseFleet
from gpuperf.verdict.gate import Basis


@dataclass(frozen=True)
class Resolutions:
    """A baseline's entries by what they catch on every host: ``must_catch`` or less, more but within the
    cap (the widest band the gate takes from noise), or only more than the cap (the A/B gate's to judge)."""

    must_catch: float
    cap: float
    catches: tuple[str, ...]
    larger: tuple[tuple[str, float], ...]
    ab_only: tuple[tuple[str, float], ...]
    unknown: tuple[str, ...]  # entries without a resolution (recorded on one host)

    @property
    def entries(self) -> int:
        return len(self.catches) + len(self.larger) + len(self.ab_only) + len(self.unknown)


def classify(entries: Mapping[str, Entry], must_catch: float, cap: float) -> Resolutions:
    catches, larger, ab_only, unknown = [], [], [], []
    for case in sorted(entries):
        found = entries[case].resolution_levelled
        if found is None:
            unknown.append(case)
        elif found <= must_catch:
            catches.append(case)
        elif found <= cap:
            larger.append((case, found))
        else:
            ab_only.append((case, found))
    by_size = lambda item: (-item[1], item[0])  # noqa: E731 - the widest first
    return Resolutions(must_catch=must_catch, cap=cap, catches=tuple(catches), larger=tuple(sorted(larger, key=by_size)),
                       ab_only=tuple(sorted(ab_only, key=by_size)), unknown=tuple(unknown))


def cannot_catch(entries: Mapping[str, Entry], must_catch: float) -> list[tuple[str, float]]:
    """The entries whose resolution is above ``must_catch``, widest first."""
    found = ((case, entry.resolution_levelled) for case, entry in entries.items())
    return sorted(((case, resolution) for case, resolution in found if resolution is not None and resolution > must_catch),
                  key=lambda item: (-item[1], item[0]))


@dataclass(frozen=True)
class Cause:
    """Why an entry cannot catch the stated slowdown: its band, the fastest host's reading against it, and the
    leave-one-host-out scale that set the band."""

    band: float
    fastest: float
    scale: float
    basis: str


def cause(fleet: CaseFleet, entry: Entry) -> Cause:
    """The basis with the widest resolution term: its band (the levelled one for a levelled entry, whose ``fleet`` is
    then the levelled spread) and the fastest run's reading."""
    def band_of(basis: str) -> float:
        if basis == Basis.CYCLES and entry.at_max_clock is not None and entry.at_max_clock.band is not None:
            return entry.at_max_clock.band
        if basis == Basis.TIME and entry.memory_level is not None:
            return entry.memory_level.band
        return entry.band or 0.0
    basis = max(fleet.spreads, key=lambda b: 1 - (1 - band_of(b)) / (1 + max(fleet.spreads[b].offsets)))
    spread = fleet.spreads[basis]
    return Cause(band=band_of(basis), fastest=max(spread.offsets), scale=spread.scale, basis=basis)
