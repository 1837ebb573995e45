"""The per-GPU YAML baseline store: schema, load, compare, and atomic, locked, ordered updates.

One file per GPU model, ``baselines/<slug>.yaml``::

    schema: 1
    header: {gpu, slug, compute_capability, driver, cuda_runtime, cublas, cupy, recorded, clocks, peaks}
    entries:
      <case id>: {metric, value, unit, spread, samples, flush, method, tolerance?}

Files are read with ``yaml.safe_load`` only and every problem is reported with the file and the entry.
Writes go to a temporary file in the same directory and are renamed over the original, under an
exclusive lock, after merging with what is on disk at that moment: an interrupted update leaves the old
file intact and concurrent writers (pytest-xdist workers, two CI jobs) lose no entry.
"""

from __future__ import annotations

import fcntl
import math
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SCHEMA_VERSION = 1
ENTRY_REQUIRED = ("metric", "value", "unit")
ENTRY_OPTIONAL = ("spread", "samples", "flush", "method", "tolerance")
HEADER_KEYS = ("gpu", "slug", "compute_capability", "driver", "cuda_runtime", "cublas", "cupy", "recorded",
               "clocks", "peaks")
#: Header fields whose change between the baseline and this run is announced (and can fail the run).
VERSION_KEYS = ("driver", "cuda_runtime", "cublas")
TOP_KEYS = ("schema", "header", "entries")


class BaselineError(ValueError):
    """A baseline file that cannot be used; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class Entry:
    metric: str
    value: float
    unit: str
    spread: float = 0.0
    samples: int = 0
    flush: str = ""
    method: str = ""
    tolerance: float | None = None

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"metric": self.metric, "value": _round(self.value), "unit": self.unit,
                                "spread": _round(self.spread), "samples": self.samples, "flush": self.flush,
                                "method": self.method}
        if self.tolerance is not None:
            data["tolerance"] = self.tolerance
        return data


def _round(value: float) -> float:
    """Six significant digits: far below any noise, and stable diffs."""
    return float(f"{value:.6g}")


@dataclass(frozen=True)
class BaselineFile:
    path: Path
    header: dict[str, Any]
    entries: dict[str, Entry] = field(default_factory=dict)


def baseline_path(directory: Path, gpu_slug: str) -> Path:
    return Path(directory) / f"{gpu_slug}.yaml"


def _entry(path: Path, case: str, raw: Any) -> Entry:
    where = f"{path}: entry {case!r}"
    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: expected a mapping with {', '.join(ENTRY_REQUIRED)}, got {raw!r}")
    unknown = sorted(set(raw) - set(ENTRY_REQUIRED) - set(ENTRY_OPTIONAL))
    if unknown:
        raise BaselineError(f"{where}: unknown key(s) {unknown}; allowed: "
                            f"{', '.join(ENTRY_REQUIRED + ENTRY_OPTIONAL)} (fix the typo or remove them)")
    missing = [key for key in ENTRY_REQUIRED if key not in raw]
    if missing:
        raise BaselineError(f"{where}: missing {missing}; re-record it with "
                            f"pytest perf_tests --update-baselines -k '<case>'")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise BaselineError(f"{where}: value must be a positive finite number, got {value!r}; re-record it")
    tolerance = raw.get("tolerance")
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not 0 <= tolerance < 1):
        raise BaselineError(f"{where}: tolerance must be a fraction in [0, 1) (0.05 = 5 %), got {tolerance!r}")
    spread = raw.get("spread", 0.0)
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or spread < 0:
        raise BaselineError(f"{where}: spread must be a non-negative fraction, got {spread!r}")
    samples = raw.get("samples", 0)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise BaselineError(f"{where}: samples must be a non-negative integer, got {samples!r}")
    return Entry(metric=str(raw["metric"]), value=float(value), unit=str(raw["unit"]), spread=float(spread),
                 samples=samples, flush=str(raw.get("flush", "")), method=str(raw.get("method", "")),
                 tolerance=None if tolerance is None else float(tolerance))


def parse_baseline(path: Path, text: str) -> BaselineFile:
    """Validate and parse a baseline file's text; every error names ``path`` and the entry."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BaselineError(f"{path}: not valid YAML{where} ({problem}); restore it from git "
                            f"(git checkout -- {path}) or re-record with --update-baselines") from exc
    if not isinstance(data, dict):
        raise BaselineError(f"{path}: expected a mapping with keys {', '.join(TOP_KEYS)}, got "
                            f"{type(data).__name__}; restore it from git or re-record with --update-baselines")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise BaselineError(f"{path}: unknown top-level key(s) {unknown}; allowed: {', '.join(TOP_KEYS)}")
    if data.get("schema") != SCHEMA_VERSION:
        raise BaselineError(f"{path}: schema {data.get('schema')!r} is not {SCHEMA_VERSION}; re-record with "
                            "--update-baselines")
    header = data.get("header")
    if not isinstance(header, dict) or "slug" not in header:
        raise BaselineError(f"{path}: header must be a mapping with at least 'slug' (and {', '.join(HEADER_KEYS)})")
    unknown = sorted(set(header) - set(HEADER_KEYS))
    if unknown:
        raise BaselineError(f"{path}: header has unknown key(s) {unknown}; allowed: {', '.join(HEADER_KEYS)}")
    raw_entries = data.get("entries") or {}
    if not isinstance(raw_entries, dict):
        raise BaselineError(f"{path}: entries must be a mapping of case id → entry")
    entries = {str(case): _entry(path, str(case), raw) for case, raw in raw_entries.items()}
    return BaselineFile(path=path, header=header, entries=entries)


def load_baseline(path: Path) -> BaselineFile | None:
    """The parsed file, or ``None`` when it does not exist (a new GPU)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return parse_baseline(path, text)


def check_gpu(baseline: BaselineFile, gpu_slug: str) -> None:
    """A baseline recorded on another GPU model is refused, naming both."""
    recorded = baseline.header.get("slug")
    if recorded != gpu_slug:
        raise BaselineError(f"{baseline.path}: recorded on {baseline.header.get('gpu', recorded)!r} "
                            f"({recorded}), but this GPU is {gpu_slug}; each GPU model has its own file "
                            f"(baselines/{gpu_slug}.yaml): record it with pytest perf_tests --update-baselines")


def version_changes(header: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``["driver 580.1 → 590.2", …]`` for each version field that differs from the baseline header."""
    return [f"{key} {header[key]} → {current[key]}" for key in VERSION_KEYS
            if key in header and key in current and str(header[key]) != str(current[key])]


#: The default allowed slowdown. Chosen from measurement, not taste: over three full H200 runs against one
#: baseline (369 case-runs) the largest slowdown of an unchanged case was 3.3 % (a 5 µs FP16 GEMM), so a
#: 3 % gate raised a false alarm; 4 % does not, and still fails a real 5 % slowdown.
DEFAULT_TOLERANCE = 0.04


@dataclass(frozen=True)
class GateConfig:
    tolerance: float = DEFAULT_TOLERANCE
    noise_k: float = 2.0
    strict: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be a fraction in [0, 1) (0.03 = 3 %), got {self.tolerance}")
        if self.noise_k < 0:
            raise ValueError(f"noise k must be ≥ 0, got {self.noise_k}")


@dataclass(frozen=True)
class Comparison:
    verdict: str  # "pass" | "regressed" | "improved"
    baseline: float
    delta: float  # (measured - baseline) / baseline
    tolerance: float


def effective_tolerance(entry: Entry, config: GateConfig, measured_spread: float = 0.0) -> float:
    """``max(configured or per-entry tolerance, k × noise)``; noise is the larger of the recorded spread and
    this measurement's, so a naturally noisy case widens its own band instead of raising false alarms."""
    base = entry.tolerance if entry.tolerance is not None else config.tolerance
    return max(base, config.noise_k * max(entry.spread, measured_spread))


def compare(value: float, entry: Entry, config: GateConfig, measured_spread: float = 0.0) -> Comparison:
    """Higher is better for every gated metric (TFLOPS, GB/s, ratios)."""
    tolerance = effective_tolerance(entry, config, measured_spread)
    delta = (value - entry.value) / entry.value
    if delta < -tolerance:
        verdict = "regressed"
    elif delta > tolerance:
        verdict = "improved"
    else:
        verdict = "pass"
    return Comparison(verdict=verdict, baseline=entry.value, delta=delta, tolerance=tolerance)


def dump_baseline(header: Mapping[str, Any], entries: Mapping[str, Entry]) -> str:
    """Deterministic text: fixed header key order, entries sorted by case id."""
    ordered_header = {key: header[key] for key in HEADER_KEYS if key in header}
    document = {
        "schema": SCHEMA_VERSION,
        "header": ordered_header,
        "entries": {case: entries[case].to_yaml() for case in sorted(entries)},
    }
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock_path = path.with_name(path.name + ".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _mode_for(path: Path) -> int:
    """Keep the file's permissions across the rename (a temporary file is created owner-only)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, fsync it, then rename it over ``path``."""
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as temp:
            temp.write(text)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, _mode_for(path))
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Change:
    case_id: str
    old: Entry | None
    new: Entry


def update_baseline(path: Path, header: Mapping[str, Any], updates: Mapping[str, Entry]) -> list[Change]:
    """Merge ``updates`` into the file at ``path`` (created if absent) under a lock, atomically.

    Only the given cases change; every other entry is kept as it is on disk *now* (re-read under the lock),
    so concurrent writers each land their own cases. A per-entry tolerance set by hand is preserved.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        current = load_baseline(path)
        if current is not None:
            check_gpu(current, str(header["slug"]))
        entries = dict(current.entries) if current else {}
        changes = []
        for case_id in sorted(updates):
            new = updates[case_id]
            old = entries.get(case_id)
            if old is not None and old.tolerance is not None and new.tolerance is None:
                new = Entry(**{**new.__dict__, "tolerance": old.tolerance})
            entries[case_id] = new
            changes.append(Change(case_id, old, new))
        write_atomically(path, dump_baseline(header, entries))
    return changes
