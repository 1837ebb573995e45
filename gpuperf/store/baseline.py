"""The per-GPU YAML baseline store: schema, load, compare, and atomic, locked, ordered updates.

One file per GPU model, ``baselines/<slug>.yaml``::

    schema: 1
    header: {gpu, slug, compute_capability, driver, cuda_runtime, cublas, cupy, recorded, clocks, peaks,
             integrity: {entries: <count>, sha256: <hex digest>}}
    entries:
      <case id>: {metric, value, unit, spread, samples, flush, method, runs?, run_spread?, hosts?, band?, resolution?,
                  memory_level?: {value, band, resolution, low, high, cases},
                  family?, kernel?, precision?, shape?, flops?, bytes?, kernels?, tolerance?}

``runs`` and ``run_spread`` are set on an entry recorded from several runs (``python -m gpuperf baseline
from-runs``, ``fleet.py``): its value is then the median of the runs' figures and ``run_spread`` their
relative range, which the gate takes as a floor of the band. ``hosts``, ``band`` and ``resolution`` are set on a
fleet's entry (``baseline from-fleet``, ``verdict/fleet_bands.py``): the band chosen from the hosts' spread, which
takes ``run_spread``'s place, and the smallest slowdown the entry catches on every one of those hosts. ``memory_level``
is set on a fleet's memory-bound entry that is judged with the run's memory level taken out (``MemoryLevel``).

The descriptive fields (family, kernel, precision, shape, flops, bytes, kernels) are written by
``--update-baselines`` from the record, so plots and tables made from a baseline read what a case is
instead of guessing it from its id. ``kernels`` lists what one call launched, from the kernel records
(``kernel_records.Kernel``: name, grid, block, cluster, registers, shared memory, median µs): a
regression note compares it with what ran today (``same kernels`` / ``kernel changed: A → B``).

Files are read through ``gpuperf.store.reading``: a regular file of at most ``MAX_BASELINE_BYTES``, UTF-8
(an undecodable byte is reported with its offset), parsed by its ``StrictLoader``, which refuses anchors,
aliases, deep nesting and a key repeated in any mapping (a merge conflict or a bad hand edit would
otherwise let the last one win silently). Every problem is reported with the file, the entry and,
for damage a person cannot repair by hand, the fix: restore the file from version control, then
re-record (``--update-baselines`` refuses a damaged file, so re-recording alone cannot repair one).

Integrity: a file cut at an entry boundary is still valid YAML, so the header records how many entries
the file holds and the SHA-256 of a canonical serialisation of them: a compact JSON array, sorted by case
id, of ``[case id, metric, value, unit, spread, samples, flush, method]`` per entry (floats as Python's
shortest round-trip ``repr``), followed, for an entry that has them, by its descriptive fields as one JSON
object; encoded as UTF-8. ``tolerance`` is left out on purpose: it is the one field
a person may set by hand, and doing so must not break the seal. A file whose entries do not match the
header, or with no integrity field, is refused. ``dump_baseline`` always writes it.

Writes go through ``gpuperf.store.atomic`` (a temporary file beside it, renamed over it), under its
exclusive lock, after merging with what is on disk at that moment: an interrupted update leaves the old
file intact and concurrent writers (pytest-xdist workers, two CI jobs) lose no entry.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from gpuperf.store.atomic import locked, write_atomically
from gpuperf.store.baseline_entry import (AT_MAX_CLOCK, AT_MAX_CLOCK_KEYS, ENTRY_DESCRIPTION, ENTRY_OPTIONAL,
                                          ENTRY_REQUIRED, ENTRY_RUNS, SHAPE_SIZES, BaselineError, ClockFree, Entry,
                                          MemoryLevel,
                                          clock_free_fields, ordered_shape, parse_entry, restore_hint, round_figure)
from gpuperf.store.field_forms import header_fault
from gpuperf.store.reading import MIB, DuplicateKeyError, InputError, decode, load_yaml, read_bytes


#: ``baseline_entry.py``'s names are imported from here as well: what an entry is belongs with the file.
__all__ = ["AT_MAX_CLOCK", "AT_MAX_CLOCK_KEYS", "ENTRY_DESCRIPTION", "ENTRY_OPTIONAL", "ENTRY_REQUIRED", "ENTRY_RUNS",
           "MAX_BASELINE_BYTES", "SCHEMA_VERSION", "SHAPE_SIZES", "VERSION_KEYS", "BaselineError", "BaselineFile",
           "Change", "ClockFree", "Entry", "Integrity", "MemoryLevel", "baseline_path", "check_file_name", "check_gpu",
           "decode_baseline", "dump_baseline", "entries_digest", "load_baseline", "ordered_shape",
           "parse_baseline", "read_baseline_text", "restore_hint", "parse_unsealed", "update_baseline",
           "version_changes", "versions_of"]

SCHEMA_VERSION = 1
HEADER_KEYS = ("gpu", "slug", "compute_capability", "driver", "cuda_runtime", "cublas", "cupy", "recorded",
               "clocks", "peaks", "integrity")
#: Header fields whose change between the baseline and this run is announced (and can fail the run).
VERSION_KEYS = ("driver", "cuda_runtime", "cublas")
TOP_KEYS = ("schema", "header", "entries")
INTEGRITY_KEYS = ("entries", "sha256")
#: The most a baseline file may hold, a limit measured so that checking one this size (about 2,400 entries
#: of today's size, 20 times the committed suite) takes seconds; a larger file is refused unread.
MAX_BASELINE_BYTES = 2 * MIB
#: The top-level keys of a results file, by which one given where a baseline is expected is named.
_RESULTS_KEYS = frozenset({"run", "records"})
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def _as_stored(entry: Entry) -> Entry:
    """The entry as the file holds it (rounded), so a digest computed on writing matches one on reading."""
    clock_free = entry.at_max_clock
    if clock_free is not None:
        clock_free = ClockFree(**clock_free_fields(clock_free.to_yaml()))
    return replace(entry, value=round_figure(entry.value), spread=round_figure(entry.spread),
                   run_spread=round_figure(entry.run_spread), at_max_clock=clock_free,
                   band=None if entry.band is None else round_figure(entry.band),
                   resolution=None if entry.resolution is None else round_figure(entry.resolution),
                   memory_level=None if entry.memory_level is None else entry.memory_level.stored())


def _measured_fields(case: str, entry: Entry) -> list[Any]:
    """One entry's row of the canonical serialisation: every measured field, never ``tolerance``."""
    row: list[Any] = [case, entry.metric, float(entry.value), entry.unit, float(entry.spread),
                      int(entry.samples), entry.flush, entry.method]
    extra = {**entry.fleet(), **entry.description(), **entry.clock_free()}
    return [*row, extra] if extra else row


def entries_digest(entries: Mapping[str, Entry]) -> str:
    """SHA-256 (hex) of the entries' canonical serialisation, described in the module docstring."""
    rows = [_measured_fields(case, entries[case]) for case in sorted(entries)]
    canonical = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Integrity:
    """What a header promises about its file's entries: how many there are and their digest."""

    entries: int
    sha256: str

    @classmethod
    def of(cls, entries: Mapping[str, Entry]) -> Integrity:
        return cls(entries=len(entries), sha256=entries_digest(entries))

    def to_yaml(self) -> dict[str, Any]:
        return {"entries": self.entries, "sha256": self.sha256}


@dataclass(frozen=True)
class BaselineFile:
    path: Path
    header: dict[str, Any]
    entries: dict[str, Entry] = field(default_factory=dict)


def baseline_path(directory: Path, gpu_slug: str) -> Path:
    return Path(directory) / f"{gpu_slug}.yaml"


# --- reading: bytes → text → YAML → checked entries → integrity ------------------------------------------


def decode_baseline(path: Path, data: bytes) -> str:
    """The file's text; bytes that are not UTF-8 (or a byte-order mark) are refused by name, not a traceback."""
    try:
        return decode(path, data, restore_hint(path))
    except InputError as exc:
        raise BaselineError(str(exc)) from None


def _duplicate_message(path: Path, duplicate: DuplicateKeyError) -> str:
    lines = f"at line {duplicate.line} (first at line {duplicate.first_line})"
    location = duplicate.location
    if location == ("entries",):
        what = f"entry {duplicate.key!r} appears twice, {lines}"
    elif len(location) == 2 and location[0] == "entries":
        what = f"entry {location[1]!r}: field {duplicate.key!r} appears twice, {lines}"
    elif location:
        what = f"{'.'.join(location)}: key {duplicate.key!r} appears twice, {lines}"
    else:
        what = f"top-level key {duplicate.key!r} appears twice, {lines}"
    return (f"{path}: {what}: a merge conflict or a bad hand edit, and YAML would keep the last one "
            f"silently; {restore_hint(path)}")


def _load_yaml(path: Path, text: str) -> Any:
    try:
        return load_yaml(path, text, restore_hint(path))
    except DuplicateKeyError as exc:
        raise BaselineError(_duplicate_message(path, exc)) from None
    except InputError as exc:
        raise BaselineError(str(exc)) from None


def _is_integrity_field(raw: Any) -> bool:
    return (isinstance(raw, dict) and set(raw) == set(INTEGRITY_KEYS)
            and isinstance(raw["entries"], int) and not isinstance(raw["entries"], bool) and raw["entries"] >= 0
            and isinstance(raw["sha256"], str) and _SHA256_HEX.fullmatch(raw["sha256"]) is not None)


def _recorded_integrity(path: Path, header: Mapping[str, Any]) -> Integrity | None:
    """The header's integrity field, ``None`` when it has none (a file recorded before it existed)."""
    if "integrity" not in header:
        return None
    raw = header["integrity"]
    if not _is_integrity_field(raw):
        raise BaselineError(f"{path}: the header's integrity must be {{entries: <count>, sha256: <64 hex "
                            f"digits>}}, got {raw!r}; {restore_hint(path)}")
    return Integrity(entries=raw["entries"], sha256=raw["sha256"])


def _check_integrity(path: Path, recorded: Integrity, entries: Mapping[str, Entry]) -> None:
    actual = Integrity.of(entries)
    if actual.entries != recorded.entries:
        raise BaselineError(f"{path}: {actual.entries} entries listed, header says {recorded.entries}: the file "
                            f"was truncated or edited; {restore_hint(path)}")
    if actual.sha256 != recorded.sha256:
        raise BaselineError(f"{path}: the entries' sha256 is {actual.sha256[:12]}…, header says "
                            f"{recorded.sha256[:12]}…: a measured figure was edited (only tolerance may be "
                            f"set by hand) or the file was damaged; {restore_hint(path)}")


def _missing_integrity_message(path: Path) -> str:
    return (f"{path}: the header has no integrity field (entries count and sha256), so a truncated or edited "
            f"file could not be told from a good one; if the file was recorded before gpuperf wrote the "
            f"field, seal it once with python -m gpuperf baseline seal {path} (it checks everything else "
            f"first); otherwise {restore_hint(path)}")


def parse_unsealed(path: Path, text: str) -> tuple[BaselineFile, Integrity | None]:
    """Everything ``parse_baseline`` checks except that the integrity field is there (``seal`` adds it).

    The returned header leaves the integrity field out: it describes the file, not the recording, and
    ``dump_baseline`` computes it afresh.
    """
    data = _load_yaml(path, text)
    if isinstance(data, dict) and _RESULTS_KEYS <= set(data):
        raise BaselineError(f"{path}: is a results file (run and records), not a baseline; pass a "
                            "baselines/<gpu-slug>.yaml file")
    if not isinstance(data, dict):
        raise BaselineError(f"{path}: expected a mapping with keys {', '.join(TOP_KEYS)}, got "
                            f"{type(data).__name__}; {restore_hint(path)}")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise BaselineError(f"{path}: unknown top-level key(s) {unknown}; allowed: {', '.join(TOP_KEYS)}")
    if data.get("schema") != SCHEMA_VERSION:
        raise BaselineError(f"{path}: schema {data.get('schema')!r} is not {SCHEMA_VERSION}; {restore_hint(path)}")
    header = data.get("header")
    if not isinstance(header, dict) or "slug" not in header:
        raise BaselineError(f"{path}: header must be a mapping with at least 'slug' (and "
                            f"{', '.join(HEADER_KEYS)}); {restore_hint(path)}")
    unknown = sorted(set(header) - set(HEADER_KEYS))
    if unknown:
        raise BaselineError(f"{path}: header has unknown key(s) {unknown}; allowed: {', '.join(HEADER_KEYS)}")
    name, fault = header_fault(header)
    if fault:
        raise BaselineError(f"{path}: header: field {name!r} {fault}; {restore_hint(path)}")
    recorded = _recorded_integrity(path, header)
    raw_entries = data.get("entries") or {}
    if not isinstance(raw_entries, dict):
        raise BaselineError(f"{path}: entries must be a mapping of case id → entry; {restore_hint(path)}")
    entries = {str(case): parse_entry(path, str(case), raw) for case, raw in raw_entries.items()}
    if recorded is not None:
        _check_integrity(path, recorded, entries)
    run_header = {key: value for key, value in header.items() if key != "integrity"}
    return BaselineFile(path=path, header=run_header, entries=entries), recorded


def parse_baseline(path: Path, text: str) -> BaselineFile:
    """Validate and parse a baseline file's text; every error names ``path``, the entry and the fix."""
    baseline, recorded = parse_unsealed(path, text)
    if recorded is None:
        raise BaselineError(_missing_integrity_message(path))
    return baseline


def read_baseline_text(path: Path) -> str:
    """The text of the baseline file at ``path``, read within the limits of ``reading.read_bytes``; a missing
    file raises ``FileNotFoundError``."""
    try:
        data = read_bytes(path, MAX_BASELINE_BYTES, "a baseline file")
    except InputError as exc:
        raise BaselineError(str(exc)) from None
    return decode_baseline(path, data)


def load_baseline(path: Path) -> BaselineFile | None:
    """The parsed file, or ``None`` when it does not exist (a new GPU)."""
    path = Path(path)
    try:
        text = read_baseline_text(path)
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


def check_file_name(path: Path, header: Mapping[str, Any]) -> None:
    """A baseline file is named for the GPU model its header records (``baselines/<slug>.yaml``): the gate reads
    a GPU's file by that name, so one named for another model would judge that model's runs by this one's
    figures. Refused, naming both, by ``update_baseline`` (``--update-baselines``, ``baseline from-runs``) and by
    ``baseline check``."""
    slug = str(header.get("slug", ""))
    if Path(path).name != f"{slug}.yaml":
        raise BaselineError(f"{path}: holds the baseline of {header.get('gpu') or slug!r} ({slug}) but is named for "
                            f"{Path(path).stem!r}: the gate reads a GPU's baseline from baselines/<slug>.yaml, so "
                            f"write it as {Path(path).with_name(f'{slug}.yaml')} (for runs of that GPU model), or pass "
                            "the runs of the GPU this file is named for")


def write_checked(path: Path, text: str) -> None:
    """The one write of a baseline file: ``text`` is first read back as its loader reads it (within
    ``MAX_BASELINE_BYTES``, ``parse_baseline``'s checks), then renamed over ``path``
    (``atomic.write_atomically``); so no write replaces a good file by one its own loader would refuse."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BaselineError(f"{path}: not written: a case id or field holds {text[exc.start:exc.end]!r}, which is "
                            "not text (an unpaired surrogate); the file on disk is unchanged: fix the id") from None
    if size > MAX_BASELINE_BYTES:
        raise BaselineError(f"{path}: not written: it would hold {size / MIB:.1f} MiB, more than the "
                            f"{MAX_BASELINE_BYTES // MIB} MiB a baseline file may hold, so its own loader would refuse "
                            "it; the file on disk is unchanged: record fewer cases into it (select them with -k, drop "
                            "stale ones with python -m gpuperf baseline drop)")
    try:
        parse_baseline(path, text)
    except BaselineError as exc:
        raise BaselineError(f"{path}: not written, as its loader would refuse it ({exc}); the file on disk is "
                            "unchanged") from None
    write_atomically(path, text)


def check_entry(path: Path, case_id: str, entry: Entry) -> None:
    """``BaselineError`` where ``entry`` of ``case_id``, as the file at ``path`` would hold it, is one its loader
    would refuse (``parse_entry``): checked before a record is counted on as an entry, so that one bad record
    never keeps a baseline's other entries from being written."""
    stored = yaml.safe_load(yaml.safe_dump(_as_stored(entry).to_yaml(), allow_unicode=True))
    parse_entry(path, case_id, stored)


def versions_of(fields: Mapping[str, Any]) -> dict[str, str]:
    """The versions (``VERSION_KEYS``) that a baseline header or a run's fields hold, as text: the one place
    a run's software is read, for the version-change banner, ``compare`` and the fleet's one-stack rule."""
    return {key: str(fields[key]) for key in VERSION_KEYS if key in fields and fields[key] not in (None, "")}


def version_changes(header: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``["driver 580.1 → 590.2", …]`` for each version field that differs from the baseline header."""
    before, after = versions_of(header), versions_of(current)
    return [f"{key} {before[key]} → {after[key]}" for key in VERSION_KEYS
            if key in before and key in after and before[key] != after[key]]


#: PyYAML's libyaml emitter where the installed PyYAML has it: the same text for the committed baseline (a test holds
#: it), and a baseline of 1,100 long case ids dumped 3-4 × faster. Every write is read back by the loader first.
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_baseline(header: Mapping[str, Any], entries: Mapping[str, Entry]) -> str:
    """Deterministic text: fixed header key order ending with the integrity field, computed here over the
    entries as written (any ``integrity`` in ``header`` is ignored), and entries sorted by case id."""
    stored = {case: _as_stored(entries[case]) for case in sorted(entries)}
    ordered_header = {key: header[key] for key in HEADER_KEYS if key in header and key != "integrity"}
    ordered_header["integrity"] = Integrity.of(stored).to_yaml()
    document = {
        "schema": SCHEMA_VERSION,
        "header": ordered_header,
        "entries": {case: entry.to_yaml() for case, entry in stored.items()},
    }
    return yaml.dump(document, Dumper=SAFE_DUMPER, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=120)


@dataclass(frozen=True)
class Change:
    case_id: str
    old: Entry | None
    new: Entry
    #: Not written: ``old`` is a fleet's entry (``hosts`` > 1) and ``new`` was measured on one host, whose spread
    #: must not narrow the fleet's band; ``new`` is what the write would have been.
    held: bool = False


def _check_versions_cover(path: Path, current: BaselineFile, header: Mapping[str, Any],
                          updates: Mapping[str, Entry]) -> None:
    """The header's versions speak for every entry: re-recording some entries under new versions would stamp
    the others, measured under the old ones, with versions they never ran on (and hide the version change
    from the next run)."""
    changed = version_changes(current.header, header)
    left = sorted(set(current.entries) - set(updates))
    if changed and left:
        raise BaselineError(f"{path}: recorded under other versions ({'; '.join(changed)}); re-recording "
                            f"{len(updates)} of its {len(current.entries)} entries would leave {len(left)} (e.g. "
                            f"{left[0]!r}) under a header naming versions they were not measured with: re-record "
                            "every entry (pytest perf_tests --update-baselines, no -k; or baseline from-runs; a "
                            "fleet's entries with baseline from-fleet), or drop the others first (python -m gpuperf "
                            "baseline drop)")


def update_baseline(path: Path, header: Mapping[str, Any], updates: Mapping[str, Entry],
                    keep_fleet: bool = False) -> list[Change]:
    """Merge ``updates`` into the file at ``path`` (created if absent) under a lock, atomically.

    Only the given cases change; every other entry is kept as it is on disk *now* (re-read under the lock),
    so concurrent writers each land their own cases. A per-entry tolerance set by hand is preserved. With
    ``keep_fleet`` (one host's ``--update-baselines``), a fleet's entry (``hosts`` > 1) is kept and its would-be
    replacement returned as a held ``Change``: one host's run never narrows a band chosen from many hosts.
    """
    path = Path(path)
    check_file_name(path, header)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        current = load_baseline(path)
        entries = dict(current.entries) if current else {}
        held = [Change(case, entries[case], new, held=True) for case, new in sorted(updates.items())
                if keep_fleet and case in entries and entries[case].hosts > 1]
        updates = {case: new for case, new in updates.items() if case not in {change.case_id for change in held}}
        if current is not None:
            check_gpu(current, str(header["slug"]))
        if not updates:
            return held
        if current is not None:
            _check_versions_cover(path, current, header, updates)
        changes = list(held)
        for case_id in sorted(updates):
            new = updates[case_id]
            old = entries.get(case_id)
            if old is not None and old.tolerance is not None and new.tolerance is None:
                new = Entry(**{**new.__dict__, "tolerance": old.tolerance})
            entries[case_id] = new
            changes.append(Change(case_id, old, new))
        write_checked(path, dump_baseline(header, entries))
    return changes
