"""Evidence accounting: which baselined cases a run selected, which of them got a verdict, which did not and
why, and which baseline entries no test produces any more.

A green gate must mean "every baselined case was measured and held". Per GPU, M is the number of baseline
entries the selected perf tests own (``<case id>`` and its ``<case id>#<ratio>`` entries); N of them got a
verdict (``gate.VERDICTS``). Every other one is NOT MEASURED with its reason: unreliable after its retries,
skipped (a missing optional package, no GPU), a test error, out of memory, not comparable. Pure: the plugin
feeds it what the reports said.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuperf.store.baseline import BaselineFile
from gpuperf.verdict.gate import DRY_VERDICTS
from gpuperf.store.records import Record
from gpuperf.vocabulary import case_of_key


@dataclass(frozen=True)
class SelectedCase:
    """One selected perf test on one GPU, and what its reports said when it did not run to a verdict."""

    nodeid: str
    case_id: str
    gpu_index: int
    problem: str = ""  # "skipped: …", "error: …"; empty when the test body ran


@dataclass(frozen=True)
class Unmeasured:
    key: str
    reason: str


@dataclass(frozen=True)
class GpuAccount:
    gpu_index: int
    gpu_slug: str  # empty when the GPU could not be identified
    baselined: int
    measured: int
    not_measured: tuple[Unmeasured, ...] = ()
    unavailable: str = ""  # why this GPU has no account (no device, no baseline file)
    dry: bool = False  # a dry run's: its cases were checked without a GPU, none measured

    @property
    def complete(self) -> bool:
        return not self.unavailable and self.measured == self.baselined

    def summary(self) -> str:
        name = f"GPU {self.gpu_index}" + (f" ({self.gpu_slug})" if self.gpu_slug else "")
        if self.unavailable:
            return f"{name}: no baselined case could be measured: {self.unavailable}"
        done = "checked without a GPU (dry run)" if self.dry else "measured"
        return f"{name}: {self.measured} of {self.baselined} baselined cases {done}"


def owned_keys(case_id: str, baseline: BaselineFile) -> list[str]:
    """The entries a test owns: its own and its ratio entries (``<case id>#<name>``), and those of its later checks
    (``<case id>@2``, ``vocabulary.check_key``)."""
    return sorted(key for key in baseline.entries if case_of_key(key) == case_id)


def _reason(record: Record | None, selected: SelectedCase) -> str:
    if record is not None:
        return f"{record.status}: {record.note}" if record.note else record.status
    return selected.problem or "the test ran but produced no result for this entry"


def account(selected: Sequence[SelectedCase], records: Sequence[Record], slugs: Mapping[int, str],
            baselines: Mapping[str, BaselineFile | None], unavailable: Mapping[int, str],
            dry: bool = False) -> list[GpuAccount]:
    """One account per GPU that selected cases ran on.

    ``slugs`` maps a GPU index to its model's slug (from the start-up device query); ``unavailable`` says why
    an index has none. A record is matched to its test by node id and GPU index (``--gpu`` numbering), so a
    case run on several GPUs — parametrized per GPU, or by every xdist worker under ``--dist each`` — is
    counted on each.
    """
    latest: dict[tuple[str, int | None, str], Record] = {}
    for record in records:
        latest[(record.nodeid, record.gpu_index, record.case_id)] = record
    by_gpu: dict[int, list[SelectedCase]] = {}
    for case in selected:
        by_gpu.setdefault(case.gpu_index, []).append(case)
    accounts = []
    for index in sorted(by_gpu):
        slug = slugs.get(index, "")
        baseline = baselines.get(slug) if slug else None
        if not slug:
            accounts.append(GpuAccount(index, "", 0, 0, unavailable=unavailable.get(index, "GPU not identified")))
            continue
        if baseline is None:
            accounts.append(GpuAccount(index, slug, 0, 0, unavailable=f"no baseline file for {slug}"))
            continue
        measured, missing = 0, []
        for case in by_gpu[index]:
            for key in owned_keys(case.case_id, baseline):
                found = latest.get((case.nodeid, case.gpu_index, key))
                if found is not None and found.status in DRY_VERDICTS:  # a dry run's DRY_RUN would get one
                    measured += 1
                else:
                    missing.append(Unmeasured(key, _reason(found, case)))
        baselined = measured + len(missing)
        accounts.append(GpuAccount(index, slug, baselined, measured, tuple(sorted(missing, key=lambda u: u.key)),
                                   dry=dry))
    return accounts


@dataclass(frozen=True)
class CollectedTests:
    """What collection saw before any deselection: which test files it read whole, and the case ids there."""

    case_ids: frozenset[str] = frozenset()
    whole_files: frozenset[str] = frozenset()
    flush_modes: tuple[str, ...] = ()
    skipped_files: Mapping[str, str] = field(default_factory=dict)  # file → why it collected nothing

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as an xdist worker hands it to the controller."""
        return {"case_ids": sorted(self.case_ids), "whole_files": sorted(self.whole_files),
                "flush_modes": list(self.flush_modes), "skipped_files": dict(self.skipped_files)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollectedTests:
        return cls(case_ids=frozenset(data["case_ids"]), whole_files=frozenset(data["whole_files"]),
                   flush_modes=tuple(data["flush_modes"]), skipped_files=dict(data["skipped_files"]))


def stale_entries(baseline: BaselineFile, collected: CollectedTests,
                  file_exists: Callable[[str], bool] = lambda path: True) -> list[str]:
    """Entries whose test no longer exists: its test file is gone (``file_exists``, relative to the rootdir),
    or it was collected whole, in a flush mode this run uses, and no collected test produces the entry.
    Files skipped at collection (say, no CuPy) or collected in part tell nothing and are left out."""
    stale = []
    for key, entry in baseline.entries.items():
        case_id = case_of_key(key)
        path = case_id.split("::", 1)[0]
        if not file_exists(path):
            stale.append(key)
            continue
        if path not in collected.whole_files or path in collected.skipped_files:
            continue
        if entry.flush and collected.flush_modes and entry.flush not in collected.flush_modes:
            continue
        if case_id not in collected.case_ids:
            stale.append(key)
    return sorted(stale)


def merge_collected(parts: Iterable[CollectedTests]) -> CollectedTests:
    """Several workers' collections as one (xdist workers each collect the whole selection)."""
    parts = list(parts)
    skipped: dict[str, str] = {}
    for part in parts:
        skipped.update(part.skipped_files)
    return CollectedTests(
        case_ids=frozenset().union(*(p.case_ids for p in parts)),
        whole_files=frozenset().union(*(p.whole_files for p in parts)),
        flush_modes=next((p.flush_modes for p in parts if p.flush_modes), ()),
        skipped_files=skipped,
    )


def run_failures(accounts: Sequence[GpuAccount], stale: Sequence[str], gate_mode: bool, allow_stale: bool,
                 no_gpu: str = "") -> list[str]:
    """Why a run in gate mode fails although no test failed: missing evidence. Empty outside gate mode."""
    if not gate_mode:
        return []
    reasons = []
    if no_gpu:
        reasons.append(f"nothing measured there: {no_gpu}")
    reasons += [f"{account.summary()}: every baselined case must be measured in gate mode"
                for account in accounts if not account.complete]
    if accounts and all(account.complete for account in accounts) and not any(a.measured for a in accounts):
        reasons.append("nothing judged: no selected case has a baseline entry, so a green gate would say nothing; "
                       "select baselined cases, or record them first (pytest perf_tests --update-baselines)")
    if stale and not allow_stale:
        reasons.append(f"{len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'} (no test produces "
                       "them): remove them with python -m gpuperf baseline drop, or pass --allow-stale")
    return reasons
