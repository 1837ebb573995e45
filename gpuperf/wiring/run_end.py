"""The end of a run, on the controller: the baseline updates written, the evidence accounted for, the results
files and the history appended, and the lines of the end-of-session summary.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuperf.store.baseline import BaselineError, baseline_path, update_baseline
from gpuperf.verdict.accounting import CollectedTests, account, merge_collected, stale_entries
from gpuperf.verdict.check import baseline_header
from gpuperf.verdict.accounting import run_failures
from gpuperf.wiring import containment
from gpuperf.wiring.stash import COLLECTED, STATE


class RunEnd:
    """What the end of a run wrote and found, for the summary and the exit status."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state = config.stash[STATE]
        self.results_dir: Path | None = None
        self.step_summary_problem = ""  # why $GITHUB_STEP_SUMMARY was not appended to (the results were written)
        self.results_text: str | None = None
        self.failures: list[str] = []  # why gate mode fails the run
        self.level_failures: list[str] = []  # the slowdowns found with the run's memory level taken out
        self.update_failures: list[str] = []  # why --update-baselines wrote nothing
        self.history_url: str | None = None
        self.history_lines: list[str] = []
        self.history_failures: list[str] = []
        self.results_failures: list[str] = []  # why the results files were not written
        #: The cases a stage of the run's end could not take, made ERROR rows there (``containment``), one line each.
        self.case_errors: list[str] = []
        self.table_lines: list[str] = []  # the end-of-session table and its counts

    def _contained(self, stage: str, probe: containment.Probe, attempt: Callable[[], None],
                   expected: tuple[type[Exception], ...] = ()) -> str:
        """``attempt()``; where it fails, the records ``probe`` refuses become their ``ERROR`` rows and it is tried
        once more without them. ``""``, or why the stage failed as a whole: an ``expected`` error's own line, any
        other's with the stage named."""
        failure = _failure_of(attempt)
        if failure is None:
            return ""
        lines: list[str] = []

        def screen() -> None:
            nonlocal lines
            self.state.records, lines = containment.screened(self.state.records, stage, probe)

        if _failure_of(screen) is None and lines:
            self.case_errors += lines
            failure = _failure_of(attempt)
            if failure is None:
                return ""
        return str(failure) if isinstance(failure, expected) else containment.failure_line(stage, failure)

    def finish(self, session: pytest.Session, collected: list[CollectedTests], skipped_files: dict[str, str]) -> None:
        """Write the baseline updates and the results files, account for the evidence and append the run to the
        history; a run that lacks evidence, or whose files could not be written, fails."""
        origin = self._provenance()
        self._level()
        self._table()  # first: a record the table cannot show is neither recorded nor written
        self._write_updates()
        self._account(collected, skipped_files)
        run = self._run(origin)
        self._write_results(run)
        self._append_history(run, origin)
        if self.case_errors:
            self._table()  # again: the stages after it made ERROR rows
        failed = (self.failures or self.level_failures or self.update_failures or self.history_failures
                  or self.results_failures or self.case_errors)
        if failed and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _level(self) -> None:
        """A fleet's levelled entries judged again with the run's memory level taken out (``memory_level``): a
        slowdown found only there fails the run, its row and note saying why."""
        state = self.state
        if state.options.update or state.options.dry_run or state.turns.round_band is not None:
            return
        from gpuperf.verdict.gate import failure_line
        from gpuperf.verdict.memory_level import levelled_records
        from gpuperf.vocabulary import Status

        # each GPU its own level: two GPUs of one model in a run read memory apart
        for slug, device in dict.fromkeys((record.gpu, record.gpu_index) for record in state.records):
            try:
                baseline = state.baseline_for(slug)
            except BaselineError:
                continue  # the run already stopped on it, naming the file and the fix
            if baseline is None:
                continue
            at = [index for index, record in enumerate(state.records)
                  if (record.gpu, record.gpu_index) == (slug, device)]
            judged = levelled_records([state.records[index] for index in at], baseline.entries, state.options.gate)
            for index, record in zip(at, judged):
                if record.status == Status.REGRESSED and state.records[index].status != Status.REGRESSED:
                    self.level_failures.append(failure_line(record))
                state.records[index] = record

    def _table(self) -> None:
        """The end-of-session table's lines, made here so that a record it cannot show fails the run."""
        if not self.state.records:
            return
        from gpuperf.output import report

        def make() -> None:
            records = self.state.records
            self.table_lines = [report.format_table(records),
                                f"gpuperf: {len(records)} cases: {report.status_counts(records)}",
                                *report.kernel_change_lines(records)]

        failure = self._contained(containment.Stage.TABLE, containment.table_probe, make)
        if failure:
            self.table_lines = [f"gpuperf: TABLE NOT SHOWN: {failure}"]

    def _write_updates(self) -> None:
        state = self.state
        self.update_failures = []
        if not state.options.update:
            return
        recorded = datetime.now(timezone.utc).isoformat(timespec="seconds")
        probe = containment.entry_probe(state.options.baseline_dir)
        updates: dict[str, Any] = {}

        def entries() -> None:
            updates.clear()
            updates.update(state.updates())

        failure = self._contained(containment.Stage.BASELINE, probe, entries)
        if failure:
            self.update_failures.append(failure)
        for gpu_slug in list(updates):
            path = baseline_path(state.options.baseline_dir, gpu_slug)

            def write() -> None:  # a bad record is never written: the file is re-made without it
                header = baseline_header(state.run_infos[gpu_slug], state.records, recorded)
                state.changes[str(path)] = update_baseline(path, header, state.updates().get(gpu_slug, {}),
                                                           keep_fleet=True)

            failure = self._contained(containment.Stage.BASELINE, probe, write, (BaselineError,))
            if failure:
                self.update_failures.append(failure)
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
            from gpuperf.trend.paths import DEFAULT_SITE
            from gpuperf.trend.source import summary_history as read_recent

            summary_history = read_recent(self.history_url, run, state.records,
                                          Path(self.config.rootpath) / DEFAULT_SITE)
        def write() -> None:  # what its own reader would refuse is not written
            files = results.write_run(directory, run, state.records, history=summary_history)
            self.results_dir, self.results_text = files.directory, files.results_text
            self.step_summary_problem = files.step_summary_problem

        failure = self._contained(containment.Stage.RESULTS, containment.results_probe(run), write, (ResultsError,))
        if failure:
            self.results_failures.append(failure)

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
        url = self.history_url
        written = self.results_text

        def append() -> None:
            text = written if written is not None and not self.case_errors else None  # the file's, unless changed
            self.history_lines.append(history_append.append_run(url, run, self.state.records, source, text))

        failure = self._contained(containment.Stage.HISTORY, containment.history_probe(run), append,
                                  (history_append.HistoryError,))
        if failure:
            self.history_failures.append(failure)

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
        state.accounts = account(list(state.selected.values()), state.records, slugs, baselines, state.unavailable,
                                 dry=state.options.dry_run)
        state.stale = sorted({key for baseline in baselines.values() if baseline is not None
                              for key in stale_entries(baseline, collected,
                                                       lambda path: (self.config.rootpath / path).exists())})
        self.failures = run_failures(state.accounts, state.stale, state.options.gate_mode, state.options.allow_stale,
                                     _nothing_measured(skipped))

    def summary_lines(self) -> list[str]:
        """The end-of-session section: the table, the counts, the accounting, what was written and why a file
        was not, and why gate mode failed the run; empty when the run measured and wrote nothing."""
        state = self.state
        if not (state.records or self.table_lines or state.accounts or state.stale or state.changes
                or self.results_dir is not None or self.history_lines or self.history_failures or self.update_failures
                or self.failures or self.level_failures or self.case_errors):
            return []  # before the report's modules load: a session without perf tests never needs them
        from gpuperf.output import report
        from gpuperf.output.fleet_report import held_lines

        lines: list[str] = [*self.table_lines, *self.case_errors]
        lines += report.accounting_lines(state.accounts, state.stale, state.options.gate_mode)
        for path, changes in state.changes.items():
            written = [change for change in changes if not change.held]
            if written:
                lines += [f"gpuperf: updated {path} (old → new):", report.format_changes(written)]
            lines += held_lines(path, [change for change in changes if change.held])
        if self.results_dir is not None:
            lines.append(f"gpuperf: results in {self.results_dir}")
        if self.step_summary_problem:
            lines.append(f"gpuperf: job summary not appended: {self.step_summary_problem}")
        lines += self.history_lines
        lines += [f"gpuperf: RESULTS NOT WRITTEN: {reason}" for reason in self.results_failures]
        lines += [f"gpuperf: HISTORY NOT APPENDED: {reason}" for reason in self.history_failures]
        lines += [f"gpuperf: baseline not updated: {reason}" for reason in self.update_failures]
        lines += [f"gpuperf: GATE FAILED: {reason}" for reason in [*self.level_failures, *self.failures]]
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


def _failure_of(attempt: Callable[[], None]) -> Exception | None:
    """``attempt()``; the contained exception it raised, or ``None`` (one that is not contained goes on up)."""
    try:
        attempt()
    except Exception as exc:
        if not containment.contained(exc):
            raise
        return exc
    return None
