"""Run-wide state, built once from the command line: options, baselines in use, collected records.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from gpuperf.store.baseline import (VERSION_KEYS, BaselineFile, Change, Entry, baseline_path, check_gpu, load_baseline,
                              version_changes)
from gpuperf.verdict.accounting import GpuAccount, SelectedCase
from gpuperf.verdict.check import entry_from_record
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Status
from gpuperf.wiring.session_options import Options
from gpuperf.wiring.turns import Alone, TurnProtocol


@dataclass
class SessionState:
    options: Options
    records: list[Record] = field(default_factory=list)
    run_infos: dict[str, RunInfo] = field(default_factory=dict)
    changes: dict[str, list[Change]] = field(default_factory=dict)
    devices: dict[int, RunInfo] = field(default_factory=dict)  # GPU index → identity, from the start-up query
    unavailable: dict[int, str] = field(default_factory=dict)  # GPU index → why it could not be queried
    selected: dict[tuple[str, int], SelectedCase] = field(default_factory=dict)  # (node id, GPU) → its test
    accounts: list[GpuAccount] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    #: What follows each check's first record (``turns.py``): confirmed alone, or measured again in rounds, in turns
    #: with the other tree, on a side of an A/B run (``python -m gpuperf ab``).
    turns: TurnProtocol = field(default_factory=Alone)
    _baselines: dict[str, BaselineFile | None] = field(default_factory=dict)

    def baseline_for(self, gpu_slug: str) -> BaselineFile | None:
        """The baseline of a GPU model, loaded once; ``BaselineError`` names the file and entry."""
        if gpu_slug not in self._baselines:
            loaded = load_baseline(baseline_path(self.options.baseline_dir, gpu_slug))
            if loaded is not None:
                check_gpu(loaded, gpu_slug)
            self._baselines[gpu_slug] = loaded
        return self._baselines[gpu_slug]

    def remember_device(self, index: int, run: RunInfo) -> RunInfo:
        """This run's header for GPU ``index`` (``--gpu`` numbering), once per session, with the versions its
        baseline was recorded with (for the results files)."""
        run = replace(run, extra={**run.extra, "baseline_versions": self.baseline_versions(run.gpu_slug)})
        self.devices[index] = run
        return run

    def forget_baselines(self) -> None:
        """Load the baseline files again on next use (after ``--update-baselines`` wrote them)."""
        self._baselines.clear()

    def version_changes(self, gpu_slug: str, versions: dict[str, str]) -> tuple[str, ...]:
        """``("driver 570.86.15 → 580.159.04", …)`` between this GPU model's baseline header and ``versions``."""
        baseline = self.baseline_for(gpu_slug)
        return tuple(version_changes(baseline.header, versions)) if baseline else ()

    def baseline_versions(self, gpu_slug: str) -> dict[str, str]:
        """The versions the baseline of this GPU model was recorded with (for the results files)."""
        baseline = self.baseline_for(gpu_slug)
        header = baseline.header if baseline else {}
        return {key: str(header[key]) for key in VERSION_KEYS if key in header}

    def entry(self, gpu_slug: str, case_id: str) -> Entry | None:
        """The case's baseline entry; none on a side of an A/B run (``turns.round_band`` set), whose only verdict is
        the paired one: a side judged against its tree's baseline would print verdicts nobody reads and fail tests
        the A/B run does not fail."""
        if self.turns.round_band is not None:
            return None
        baseline = self.baseline_for(gpu_slug)
        return baseline.entries.get(case_id) if baseline else None

    def add(self, record: Record, run: RunInfo | None, test_failed: bool = False) -> None:
        """Collect a record; one whose test failed (an assertion after the check) is never recorded as a
        baseline entry, and its row says so."""
        if test_failed and record.status == Status.UPDATED:
            record = replace(record, status=Status.NOT_RECORDED,
                             note="; ".join(n for n in (record.note, "not recorded: its test failed") if n))
        self.records.append(record)
        if run is not None:
            self.run_infos.setdefault(run.gpu_slug, run)

    def observe(self, case: SelectedCase) -> None:
        """What one phase of a selected perf test said; the first problem (skip, error) is kept."""
        key = (case.nodeid, case.gpu_index)  # with xdist --dist each, one node id runs on every GPU
        known = self.selected.get(key)
        if known is None or (not known.problem and case.problem):
            self.selected[key] = case

    def updates(self) -> dict[str, dict[str, Entry]]:
        """Per GPU slug, the entries ``--update-baselines`` writes: every UPDATED record of this run."""
        by_slug: dict[str, dict[str, Entry]] = defaultdict(dict)
        for record in self.records:
            if record.status == Status.UPDATED:
                by_slug[record.gpu][record.case_id] = entry_from_record(record)
        return dict(by_slug)

