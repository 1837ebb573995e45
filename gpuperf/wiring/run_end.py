"""The end of a run, on the controller: the baseline updates written, the evidence accounted for, the results
files and the history appended, and the lines of the end-of-session summary.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuperf.store.baseline import BaselineError, baseline_path, update_baseline
from gpuperf.verdict.accounting import CollectedTests, account, merge_collected, stale_entries
from gpuperf.verdict.check import baseline_header
from gpuperf.verdict.accounting import run_failures
from gpuperf.wiring.stash import COLLECTED, STATE


class RunEnd:
    """What the end of a run wrote and found, for the summary and the exit status."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state = config.stash[STATE]
        self.results_dir: Path | None = None
        self.results_text: str | None = None
        self.failures: list[str] = []  # why gate mode fails the run
        self.update_failures: list[str] = []  # why --update-baselines wrote nothing
        self.history_url: str | None = None
        self.history_lines: list[str] = []
        self.history_failures: list[str] = []
        self.results_failures: list[str] = []  # why the results files were not written

    def finish(self, session: pytest.Session, collected: list[CollectedTests], skipped_files: dict[str, str]) -> None:
        """Write the baseline updates and the results files, account for the evidence and append the run to the
        history; a run that lacks evidence, or whose files could not be written, fails."""
        origin = self._provenance()
        self._write_updates()
        self._account(collected, skipped_files)
        run = self._run(origin)
        self._write_results(run)
        self._append_history(run, origin)
        failed = self.failures or self.update_failures or self.history_failures or self.results_failures
        if failed and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write_updates(self) -> None:
        state = self.state
        self.update_failures = []
        if not state.options.update:
            return
        recorded = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for gpu_slug, entries in state.updates().items():
            header = baseline_header(state.run_infos[gpu_slug], state.records, recorded)
            path = baseline_path(state.options.baseline_dir, gpu_slug)
            try:
                state.changes[str(path)] = update_baseline(path, header, entries)
            except BaselineError as exc:
                self.update_failures.append(str(exc))
        state.forget_baselines()  # account against the files as written

    def _run(self, origin: Any) -> Any:
        """The run header the results file and the history get: the first GPU's, with its provenance."""
        if not self.state.run_infos:
            return None
        run = next(iter(self.state.run_infos.values()))
        if origin is None:
            return run
        from gpuperf.wiring.history_append import with_provenance

        return with_provenance(run, origin)

    def _write_results(self, run: Any) -> None:
        state = self.state
        if not state.records or state.options.results_dir is None or run is None:
            return
        from gpuperf.output import results
        from gpuperf.store.results import ResultsError

        directory = results.timestamped_dir(state.options.results_dir)
        summary_history = None
        if self.history_url is not None:
            from gpuperf.output.trend_paths import DEFAULT_SITE
            from gpuperf.output.trend_source import summary_history as read_recent

            summary_history = read_recent(self.history_url, run, state.records,
                                          Path(self.config.rootpath) / DEFAULT_SITE)
        try:
            files = results.write_run(directory, run, state.records, history=summary_history)
        except ResultsError as exc:  # what its own reader would refuse is not written
            self.results_failures.append(str(exc))
            return
        self.results_dir, self.results_text = files.directory, files.results_text

    def _provenance(self) -> Any:
        """Where this run's figures came from (``None`` when it has none), taken before baselines are rewritten."""
        state = self.state
        if not state.records or not state.run_infos:
            return None
        from gpuperf.wiring import history_append

        run = next(iter(state.run_infos.values()))
        try:
            baseline = state.baseline_for(run.gpu_slug)
        except BaselineError:
            baseline = None
        return history_append.session_provenance(Path(self.config.rootpath), state.options,
                                                 self.config.invocation_params.args, baseline)

    def _append_history(self, run: Any, origin: Any) -> None:
        if origin is None or self.history_url is None:
            return
        from gpuperf.wiring import history_append

        source = str(self.results_dir / "results.json") if self.results_dir is not None else "pytest session"
        try:
            self.history_lines.append(history_append.append_run(self.history_url, run, self.state.records, source,
                                                                self.results_text))
        except history_append.HistoryError as exc:
            self.history_failures.append(str(exc))

    def _account(self, workers: list[CollectedTests], skipped_files: dict[str, str]) -> None:
        state = self.state
        own = self.config.stash.get(COLLECTED, None)
        collected = merge_collected([*workers, *([own] if own is not None else [])])
        skipped = {**collected.skipped_files, **skipped_files}
        slugs = {index: run.gpu_slug for index, run in state.devices.items()}
        try:
            baselines = {slug: state.baseline_for(slug) for slug in set(slugs.values())}
        except BaselineError:
            return  # the run already stopped on it, naming the file and the fix
        state.accounts = account(list(state.selected.values()), state.records, slugs, baselines, state.unavailable)
        state.stale = sorted({key for baseline in baselines.values() if baseline is not None
                              for key in stale_entries(baseline, collected,
                                                       lambda path: (self.config.rootpath / path).exists())})
        self.failures = run_failures(state.accounts, state.stale, state.options.gate_mode, state.options.allow_stale,
                                     _nothing_measured(skipped))

    def summary_lines(self) -> list[str]:
        """The end-of-session section: the table, the counts, the accounting, what was written and why a file
        was not, and why gate mode failed the run; empty when the run measured and wrote nothing."""
        state = self.state
        if not (state.records or state.accounts or state.stale or state.changes or self.results_dir is not None
                or self.history_lines or self.history_failures or self.update_failures or self.failures):
            return []  # before the report's modules load: a session without perf tests never needs them
        from gpuperf.output import report

        lines = []
        if state.records:
            lines += [report.format_table(state.records),
                      f"gpuperf: {len(state.records)} cases: {report.status_counts(state.records)}",
                      *report.kernel_change_lines(state.records)]
        lines += report.accounting_lines(state.accounts, state.stale, state.options.gate_mode)
        for path, changes in state.changes.items():
            lines += [f"gpuperf: updated {path} (old → new):", report.format_changes(changes)]
        if self.results_dir is not None:
            lines.append(f"gpuperf: results in {self.results_dir}")
        lines += self.history_lines
        lines += [f"gpuperf: RESULTS NOT WRITTEN: {reason}" for reason in self.results_failures]
        lines += [f"gpuperf: HISTORY NOT APPENDED: {reason}" for reason in self.history_failures]
        lines += [f"gpuperf: baseline not updated: {reason}" for reason in self.update_failures]
        lines += [f"gpuperf: GATE FAILED: {reason}" for reason in self.failures]
        if not lines:
            return []
        return [line for run in state.run_infos.values() for line in report.header_lines(run)] + lines


def _nothing_measured(skipped: dict[str, str]) -> str:
    """Why nothing could be measured: the perf test files that collected nothing, grouped by reason. A GPU that
    could not be queried counts only through the accounts of the perf tests selected for it: a session that
    selected none (the harness's own tests of a suite's repository, under ``$CI``) has nothing to gate."""
    by_reason: dict[str, list[str]] = {}
    for path, reason in sorted(skipped.items()):
        by_reason.setdefault(reason, []).append(path)
    return "; ".join(f"{', '.join(paths)} collected nothing: {reason}" for reason, paths in by_reason.items())
