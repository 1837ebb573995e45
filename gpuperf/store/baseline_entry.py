"""What one baseline entry is and how one read from a file is checked: ``Entry`` (and its ``ClockFree`` figure),
the keys an entry may hold, and ``parse_entry``, which refuses a value, a key or a kind the schema does not
allow with the file, the entry and the fix. ``baseline.py`` reads, seals and writes whole files of them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuperf.measure.kernel_records import Kernel
from gpuperf.store.reading import InputError
from gpuperf.vocabulary import Metric, Precision

ENTRY_REQUIRED = ("metric", "value", "unit")
#: What a case is, as the record said: read by plots and tables, never parsed back from the case id.
ENTRY_DESCRIPTION = ("family", "kernel", "precision", "shape", "flops", "bytes", "kernels")
#: How many runs an entry's value is the median of, and their relative range (absent: one run).
ENTRY_RUNS = ("runs", "run_spread")
#: A fleet's entry (``baseline from-fleet``, ``verdict/fleet_bands.py``): how many hosts it rests on, the band chosen
#: from their spread by leaving one host out at a time, and the smallest slowdown it catches on every one of them.
ENTRY_FLEET = ("hosts", "band", "resolution")
#: A fleet's memory-bound entry judged with the host's memory level of the run taken out (``MemoryLevel``).
MEMORY_LEVEL = "memory_level"
MEMORY_LEVEL_KEYS = ("value", "band", "resolution", "low", "high", "cases")
#: The figure with the host's power state taken out (``ClockFree``).
AT_MAX_CLOCK = "at_max_clock"
AT_MAX_CLOCK_KEYS = ("value", "spread", "run_spread", "cycles", "clock_mhz", "band")
ENTRY_OPTIONAL = ("spread", "samples", "flush", "method", *ENTRY_RUNS, *ENTRY_FLEET, MEMORY_LEVEL, *ENTRY_DESCRIPTION,
                  AT_MAX_CLOCK, "tolerance")
#: The sizes a shape may name (``metrics.Work.shape``).
SHAPE_SIZES = ("batch", "m", "n", "k")
#: A size of a user's own family is named in its case table (``heads``, ``seq``, ``dim``): a short lower-case name.
SIZE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: More named sizes than any operation has: a larger shape is not one.
MAX_SHAPE_SIZES = 16


def ordered_shape(shape: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """A shape's sizes in a stable order (the GEMM names first, as written; any other names after, sorted), as a
    baseline entry keeps them, so a re-recorded file diffs cleanly."""
    known = [(name, shape[name]) for name in SHAPE_SIZES if name in shape]
    return tuple(known + sorted((name, size) for name, size in shape.items() if name not in SHAPE_SIZES))


class BaselineError(InputError):
    """A baseline file that cannot be used; the message names the file, the entry and the fix."""


def restore_hint(path: Path) -> str:
    """The fix for a damaged file. Re-recording alone cannot be the advice: ``--update-baselines`` reads the
    file first and refuses a damaged one, so the good copy has to come back from version control first."""
    return (f"restore it from version control (git checkout -- {path}), then re-record with "
            "pytest perf_tests --update-baselines")


@dataclass(frozen=True)
class ClockFree:
    """An entry's figure with the host's power state taken out: the metric its cycles per call give at the
    GPU's maximum SM clock (``value``), their samples' relative IQR (``spread``) and, recorded from several
    runs, their relative range (``run_spread``); the median cycles per call and the mean SM clock (MHz) the
    calls ran at when recorded (a ratio entry has no cycles of its own); a fleet's entry's band for this figure
    (``Entry.band``)."""

    value: float
    spread: float = 0.0
    run_spread: float = 0.0
    cycles: float | None = None
    clock_mhz: float | None = None
    band: float | None = None

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"value": round_figure(self.value), "spread": round_figure(self.spread)}
        if self.run_spread:
            data["run_spread"] = round_figure(self.run_spread)
        if self.cycles is not None:
            data["cycles"] = round_figure(self.cycles)
        if self.clock_mhz is not None:
            data["clock_mhz"] = round_figure(self.clock_mhz)
        if self.band is not None:
            data["band"] = round_figure(self.band)
        return data


@dataclass(frozen=True)
class MemoryLevel:
    """A fleet's memory-bound entry with the host's memory level taken out (``verdict/memory_level.py``): in a run,
    the level is the median deviation of the GEMV family's figures from their entries, kept within the range
    ``low``…``high`` the fleet's runs showed, and counted only from at least half of the ``cases`` it was made from;
    the entry's figure divided by (1 + level) is then judged against ``value`` with ``band``, and catches a
    slowdown of ``resolution`` on every host (fractions)."""

    value: float
    band: float
    resolution: float
    low: float
    high: float
    cases: int

    def to_yaml(self) -> dict[str, Any]:
        return {"value": round_figure(self.value), "band": round_figure(self.band),
                "resolution": round_figure(self.resolution), "low": round_figure(self.low),
                "high": round_figure(self.high), "cases": self.cases}

    def stored(self) -> MemoryLevel:
        """As the file holds it (rounded)."""
        return MemoryLevel(**self.to_yaml())


@dataclass(frozen=True)
class Entry:
    metric: str
    value: float
    unit: str
    spread: float = 0.0
    samples: int = 0
    flush: str = ""
    method: str = ""
    family: str = ""
    kernel: str = ""
    precision: str = ""
    shape: tuple[tuple[str, int], ...] = ()  # (("batch", B), ("m", M), ...), as ``Work.sizes``
    flops: float | None = None
    bytes: float | None = None
    kernels: tuple[Kernel, ...] = ()  # what one call launched when recorded (traced measurements)
    runs: int = 0  # > 1: the value is the median of this many runs' figures
    run_spread: float = 0.0  # their relative range, (max − min) / median
    at_max_clock: ClockFree | None = None
    tolerance: float | None = None
    #: A fleet's entry: the hosts its runs came from, its band (the floor the gate judges it with in place of
    #: ``run_spread``, and not cut by the cap: it was measured) and its resolution (the smallest slowdown it catches
    #: on every one of those hosts), both fractions. ``None``: an entry of one host, judged as before.
    hosts: int = 0
    band: float | None = None
    resolution: float | None = None
    memory_level: MemoryLevel | None = None

    @property
    def resolution_levelled(self) -> float | None:
        """The smallest slowdown the gate catches on every host: the entry's resolution, or its resolution with the
        run's memory level taken out where that is smaller (judged at the end of a run that measured the GEMVs)."""
        found = [value for value in (self.resolution, self.memory_level.resolution if self.memory_level else None)
                 if value is not None]
        return min(found) if found else None

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"metric": self.metric, "value": round_figure(self.value), "unit": self.unit,
                                "spread": round_figure(self.spread), "samples": self.samples, "flush": self.flush,
                                "method": self.method}
        data.update(self.fleet())
        data.update(self.description())
        data.update(self.clock_free())
        if self.tolerance is not None:
            data["tolerance"] = self.tolerance
        return data

    def fleet(self) -> dict[str, Any]:
        """``runs`` and ``run_spread`` as the file holds them, for an entry recorded from several runs, and a fleet's
        entry's ``hosts``, ``band`` and ``resolution``."""
        data: dict[str, Any] = {"runs": self.runs, "run_spread": round_figure(self.run_spread)} if self.runs > 1 else {}
        if self.hosts:
            data["hosts"] = self.hosts
        for key, value in (("band", self.band), ("resolution", self.resolution)):
            if value is not None:
                data[key] = round_figure(value)
        if self.memory_level is not None:
            data[MEMORY_LEVEL] = self.memory_level.to_yaml()
        return data

    def clock_free(self) -> dict[str, Any]:
        """``at_max_clock`` as the file holds it, when the entry has one."""
        return {AT_MAX_CLOCK: self.at_max_clock.to_yaml()} if self.at_max_clock is not None else {}

    def description(self) -> dict[str, Any]:
        """The descriptive fields that are set, as the file holds them."""
        described: dict[str, Any] = {"family": self.family, "kernel": self.kernel, "precision": self.precision,
                                     "shape": dict(self.shape), "flops": self.flops, "bytes": self.bytes,
                                     "kernels": [kernel.to_dict() for kernel in self.kernels]}
        return {key: value for key, value in described.items() if value not in ("", {}, None, [])}


def round_figure(value: float) -> float:
    """Six significant digits: far below any noise, and stable diffs."""
    return float(f"{value:.6g}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_metric_and_unit(where: str, path: Path, metric: Any, unit: Any) -> None:
    expected = Metric.UNITS.get(metric) if isinstance(metric, str) else None
    if expected is None:
        raise BaselineError(f"{where}: unknown metric {metric!r}; a baseline metric is one of "
                            f"{', '.join(Metric.UNITS)}; {restore_hint(path)}")
    if unit != expected:
        raise BaselineError(f"{where}: unit {unit!r} does not match metric {metric!r}, whose unit is "
                            f"{expected!r}; {restore_hint(path)}")


def parse_entry(path: Path, case: str, raw: Any) -> Entry:
    where = f"{path}: entry {case!r}"
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: expected a mapping with {', '.join(ENTRY_REQUIRED)}, got {raw!r}; "
                            f"{restore_hint(path)}")
    unknown = sorted(set(raw) - set(ENTRY_REQUIRED) - set(ENTRY_OPTIONAL))
    if unknown:
        raise BaselineError(f"{where}: unknown key(s) {unknown}; allowed: "
                            f"{', '.join(ENTRY_REQUIRED + ENTRY_OPTIONAL)} (fix the typo or remove them)")
    missing = [key for key in ENTRY_REQUIRED if key not in raw]
    if missing:
        raise BaselineError(f"{where}: missing {missing}; {restore_hint(path)}")
    _check_metric_and_unit(where, path, raw["metric"], raw["unit"])
    value = raw["value"]
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise BaselineError(f"{where}: value must be a positive finite number, got {value!r}; {restore_hint(path)}")
    spread = raw.get("spread", 0.0)
    if not _is_number(spread) or not 0 <= spread < 1:
        raise BaselineError(f"{where}: spread must be a finite fraction in [0, 1) (the samples' relative IQR, "
                            f"0.01 = 1 %), got {spread!r}; {restore_hint(path)}")
    samples = raw.get("samples", 0)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise BaselineError(f"{where}: samples must be a non-negative integer, got {samples!r}; "
                            f"{restore_hint(path)}")
    tolerance = raw.get("tolerance")
    if tolerance is not None and (not _is_number(tolerance) or not 0 <= tolerance < 1):
        raise BaselineError(f"{where}: tolerance must be a fraction in [0, 1) (0.05 = 5 %), got {tolerance!r}; "
                            "set it by hand or remove it to use --tolerance")
    return Entry(metric=raw["metric"], value=float(value), unit=raw["unit"], spread=float(spread),
                 samples=samples, flush=str(raw.get("flush", "")), method=str(raw.get("method", "")),
                 tolerance=None if tolerance is None else float(tolerance), **_runs(where, path, raw),
                 **_fleet(where, path, raw),
                 **_description(where, path, raw), at_max_clock=_at_max_clock(where, path, raw))


def clock_free_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {key: (None if raw.get(key) is None else float(raw[key])) if key in ("cycles", "clock_mhz", "band")
            else float(raw.get(key, 0.0)) for key in AT_MAX_CLOCK_KEYS}


def _at_max_clock(where: str, path: Path, raw: Mapping[str, Any]) -> ClockFree | None:
    """``at_max_clock``: a positive finite value, spreads in [0, 1), positive cycles and clock when given."""
    if AT_MAX_CLOCK not in raw:
        return None
    block = raw[AT_MAX_CLOCK]
    problem = ""
    if not isinstance(block, dict) or "value" not in block:
        problem = "must be a mapping with at least value"
    elif sorted(set(block) - set(AT_MAX_CLOCK_KEYS)):
        problem = f"has unknown key(s) {sorted(set(block) - set(AT_MAX_CLOCK_KEYS))}"
    elif not all(_is_number(v) and math.isfinite(v) for v in block.values()):
        problem = "holds a figure that is not a finite number"
    elif block["value"] <= 0 or any(block.get(k, 1) <= 0 for k in ("cycles", "clock_mhz")):
        problem = "value, cycles and clock_mhz must be positive"
    elif not all(0 <= block.get(k, 0) < 1 for k in ("spread", "run_spread")) or not 0 < block.get("band", 0.5) < 1:
        problem = "spread and run_spread must be fractions in [0, 1), band one in (0, 1)"
    if problem:
        raise BaselineError(f"{where}: {AT_MAX_CLOCK} {problem} (keys: {', '.join(AT_MAX_CLOCK_KEYS)}), got "
                            f"{block!r}; {restore_hint(path)}")
    return ClockFree(**clock_free_fields(block))


def _runs(where: str, path: Path, raw: Mapping[str, Any]) -> dict[str, Any]:
    """``runs`` (an integer above 1) and ``run_spread`` (a fraction in [0, 1)) come together or not at all."""
    if not any(key in raw for key in ENTRY_RUNS):
        return {}
    runs, run_spread = raw.get("runs"), raw.get("run_spread")
    if (isinstance(runs, bool) or not isinstance(runs, int) or runs < 2 or not isinstance(run_spread, (int, float))
            or not _is_number(run_spread) or not 0 <= run_spread < 1):
        raise BaselineError(f"{where}: runs must be an integer above 1 with run_spread a fraction in [0, 1), got "
                            f"runs {runs!r}, run_spread {run_spread!r}; {restore_hint(path)}")
    return {"runs": runs, "run_spread": float(run_spread)}


def _fleet(where: str, path: Path, raw: Mapping[str, Any]) -> dict[str, Any]:
    """``hosts`` (a positive integer), ``band`` and ``resolution`` (fractions in (0, 1) and [0, 1)): a fleet's entry."""
    fields: dict[str, Any] = {}
    hosts = raw.get("hosts", 1)
    if isinstance(hosts, bool) or not isinstance(hosts, int) or hosts < 1:
        raise BaselineError(f"{where}: hosts must be a positive integer (how many hosts the entry rests on), got "
                            f"{hosts!r}; {restore_hint(path)}")
    if "hosts" in raw:
        fields["hosts"] = hosts
    for key, low_open in (("band", True), ("resolution", False)):
        if key in raw:
            value = raw[key]
            if not _is_number(value) or not math.isfinite(value) or not (0 < value < 1 if low_open else 0 <= value < 1):
                raise BaselineError(f"{where}: {key} must be a fraction in {'(0' if low_open else '[0'}, 1) (0.05 = "
                                    f"5 %), got {value!r}; {restore_hint(path)}")
            fields[key] = float(value)
    if MEMORY_LEVEL in raw:
        fields[MEMORY_LEVEL] = _memory_level(where, path, raw[MEMORY_LEVEL])
    return fields


def _memory_level(where: str, path: Path, block: Any) -> MemoryLevel:
    """``memory_level``: every key; a positive value; band in (0, 1), resolution in [0, 1); low ≤ 0 ≤ high, both
    within ±50 %; a positive count of cases."""
    problem = ""
    if not isinstance(block, dict) or sorted(block) != sorted(MEMORY_LEVEL_KEYS):
        problem = f"must be a mapping with exactly {', '.join(MEMORY_LEVEL_KEYS)}"
    elif not all(_is_number(v) and math.isfinite(v) for v in block.values()):
        problem = "holds a figure that is not a finite number"
    elif isinstance(block["cases"], float) or block["cases"] < 1:
        problem = "cases must be a positive integer"
    elif not (block["value"] > 0 and 0 < block["band"] < 1 and 0 <= block["resolution"] < 1):
        problem = "value must be positive, band a fraction in (0, 1), resolution one in [0, 1)"
    elif not -0.5 < block["low"] <= 0 <= block["high"] < 0.5:
        problem = "low and high must bound 0 (low ≤ 0 ≤ high, within ±0.5)"
    if problem:
        raise BaselineError(f"{where}: {MEMORY_LEVEL} {problem}, got {block!r}; {restore_hint(path)}")
    return MemoryLevel(value=float(block["value"]), band=float(block["band"]), resolution=float(block["resolution"]),
                       low=float(block["low"]), high=float(block["high"]), cases=int(block["cases"]))


def _description(where: str, path: Path, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The descriptive fields of an entry, checked: names from the vocabulary, positive sizes and counts."""
    described: dict[str, Any] = {}
    for key in ("family", "kernel", "precision"):
        if key in raw:
            if not isinstance(raw[key], str):
                raise BaselineError(f"{where}: {key} must be text, got {raw[key]!r}; {restore_hint(path)}")
            described[key] = raw[key]
    if described.get("precision", Precision.FP32) not in Precision.ALL:
        raise BaselineError(f"{where}: precision {described['precision']!r} is not one of "
                            f"{', '.join(Precision.ALL)}; {restore_hint(path)}")
    if "shape" in raw:
        shape = raw["shape"]
        if (not isinstance(shape, dict) or len(shape) > MAX_SHAPE_SIZES
                or not all(isinstance(name, str) and SIZE_NAME.fullmatch(name) for name in shape)
                or not all(isinstance(size, int) and not isinstance(size, bool) and size > 0
                           for size in shape.values())):
            raise BaselineError(f"{where}: shape must map at most {MAX_SHAPE_SIZES} size names (lower-case, like "
                                f"{', '.join(SHAPE_SIZES)} or heads) to positive integers, got {shape!r}; "
                                f"{restore_hint(path)}")
        described["shape"] = ordered_shape(shape)
    for key in ("flops", "bytes"):
        if key in raw:
            if not _is_number(raw[key]) or not math.isfinite(raw[key]) or raw[key] <= 0:
                raise BaselineError(f"{where}: {key} must be a positive finite number, got {raw[key]!r}; "
                                    f"{restore_hint(path)}")
            described[key] = float(raw[key])
    if "kernels" in raw:
        kernels = raw["kernels"]
        if not isinstance(kernels, list):
            raise BaselineError(f"{where}: kernels must be a list of kernels, got {kernels!r}; {restore_hint(path)}")
        try:
            described["kernels"] = tuple(Kernel.from_dict(kernel) for kernel in kernels)
        except ValueError as exc:
            raise BaselineError(f"{where}: {exc}; {restore_hint(path)}") from exc
    return described
