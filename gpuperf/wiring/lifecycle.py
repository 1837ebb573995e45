"""The run-wide hooks: start-up checks, what was collected and selected, the device header before the first
measurement, the records and phases of every test report (from xdist workers too), then the end of the run
(``run_end.py``) and its summary. Registered once per session by the plugin.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from gpuperf.measure.device import NoGpuError
from gpuperf.store.baseline import BaselineError
from gpuperf.store.records import Record, RunInfo
from gpuperf.verdict.accounting import CollectedTests, SelectedCase
from gpuperf.wiring import containment
from gpuperf.wiring.fixtures import case_id_of, run_info_from
from gpuperf.wiring.foreign_plugins import leave_out_unused_hypothesis
from gpuperf.wiring.roles import is_worker, keeps_baselines
from gpuperf.wiring.run_end import RunEnd
from gpuperf.wiring.session_options import DEFAULT_GPUS
from gpuperf.wiring.stash import (CASE_PROPERTY, COLLECTED, COLLECTED_OUTPUT, GPU_OF, PINNED, POOL, RECORD_PROPERTY,
                                  RUN_PROPERTY, STATE)

#: ``--gpu`` spec → the GPU indices it selects (the plugin's, which asks CUDA how many there are for ``all``).
SelectGpus = Callable[[str], list[int]]


def _check_gpu_selection(spec: str, pool: Any) -> None:
    """``--gpu`` must name devices that exist; checked at start-up against what CUDA reports. ``all`` and the
    default name only devices that exist whenever there is one, so they cost no device query."""
    if spec in ("all", DEFAULT_GPUS):
        return
    try:
        devices = pool.devices()
    except NoGpuError:
        return  # no GPU at all: every GPU test skips with that reason (and gate mode fails the run)
    absent = [index for index in map(int, spec.split(",")) if index >= len(devices)]
    if absent:
        found = ", ".join(f"{index}: {name}" for index, name in devices)
        raise pytest.UsageError(f"gpuperf: --gpu {spec}: no GPU {', '.join(map(str, absent))} on this machine; it "
                                f"has {len(devices)} ({found}): use --gpu 0..{len(devices) - 1} or --gpu all")


class SessionHooks:
    """The run-wide hooks, registered once per session with the state they append to and report from."""

    def __init__(self, config: pytest.Config, select_gpus: SelectGpus) -> None:
        self.config = config
        self.state = config.stash[STATE]
        self.select_gpus = select_gpus
        self.started = False
        self.collected: list[CollectedTests] = []
        self.skipped_files: dict[str, str] = {}
        self.end = RunEnd(config)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.start_up()

    def start_up(self) -> None:
        """The start-up checks: ``--gpu`` names devices that exist, ``--history`` a history that can be opened.
        Called at the session's start, or when the plugin arms later (``arming.py``)."""
        if not is_worker(self.config) and not self.config.option.collectonly:
            _check_gpu_selection(self.state.options.gpus, self.config.stash[POOL])
            if self.state.options.dry_run:
                return  # a dry run appends nothing to a history
            from gpuperf.store.history_target import HistoryError, resolve_target

            try:
                self.end.history_url = resolve_target(self.config.getoption("--history"), os.environ,
                                                      Path(self.config.rootpath))
            except HistoryError as exc:
                raise pytest.UsageError(f"gpuperf: --history: {exc}") from exc

    # -- collection: what exists (before -k/-m) and what is selected --------------------------------------

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A perf test file skipped at collection (no CuPy, say) measures nothing: remember why."""
        if report.skipped and report.nodeid.endswith(".py") and self._in_suite(report.nodeid) \
                and keeps_baselines(self.config):
            self.skipped_files[report.nodeid] = _skip_reason(report)  # type: ignore[arg-type]

    def _in_suite(self, nodeid: str) -> bool:
        suites = [str(path).rstrip("/") + "/" for path in self.config.getini("testpaths")]
        return any(nodeid.startswith(suite) for suite in suites)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Every collected case id, before -k, -m and slow deselect any: what exists, for stale entries."""
        config.stash[COLLECTED] = CollectedTests(
            case_ids=frozenset(case_id_of(item.nodeid) for item in items),
            whole_files=frozenset() if _drops_tests_that_passed(config) else
            frozenset(item.nodeid.split("::", 1)[0] for item in items) - _partly_collected(config),
            flush_modes=self.state.options.flush_modes,
            skipped_files=dict(self.skipped_files))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Tag the selected perf tests for the accounting, then print the device header (and any version change)
        before the first measurement."""
        perf_items = [item for item in session.items if "perf" in getattr(item, "fixturenames", ())]
        default_gpu = self._default_gpu() if perf_items else 0
        for item in perf_items:
            callspec = getattr(item, "callspec", None)
            params = callspec.params if callspec is not None else {}
            item.stash[GPU_OF] = int(params["gpu_index"]) if "gpu_index" in params else default_gpu
            item.user_properties.append((CASE_PROPERTY, {"case_id": case_id_of(item.nodeid),
                                                         "gpu_index": item.stash[GPU_OF]}))
        if perf_items:
            leave_out_unused_hypothesis(self.config)
        if perf_items and not is_worker(self.config):
            self._start(sorted({item.stash[GPU_OF] for item in perf_items}))

    def _default_gpu(self) -> int:
        """The GPU of a test not parametrized over GPUs: a pinned worker's, else the first selected."""
        if PINNED in self.config.stash:
            return self.config.stash[PINNED]
        try:
            return self.select_gpus(self.state.options.gpus)[0]
        except NoGpuError:
            return 0

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """xdist controller: the workers have collected; announce the devices before they measure."""
        if ids and not self.started and keeps_baselines(self.config):
            try:
                indices = self.select_gpus(self.state.options.gpus)
            except NoGpuError as exc:
                self.state.unavailable[0] = str(exc)
                return
            self._start(indices)

    def _start(self, indices: Sequence[int]) -> None:
        from gpuperf.output import report
        from gpuperf.output.fleet_report import resolution_banner

        self.started = True
        state = self.state
        writer = self.config.pluginmanager.get_plugin("terminalreporter")
        changed = []
        if state.options.dry_run and writer is not None:
            from gpuperf.wiring.dry_run import HEADER

            writer.write_line(HEADER)
        announced: set[Path] = set()
        for index, described in _describe_devices(self.config, indices).items():
            if isinstance(described, str):
                state.unavailable[index] = described
                continue
            try:
                run = state.remember_device(index, run_info_from(described, state.options.flush_modes))
                baseline = state.baseline_for(run.gpu_slug)
            except BaselineError as exc:
                pytest.exit(f"gpuperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
            lines = report.header_lines(run)
            changes = state.version_changes(run.gpu_slug, run.versions)
            if changes and baseline is not None:
                changed.append(f"GPU {index} ({run.gpu_slug})")
                lines += report.version_banner(baseline.path, changes)
            if baseline is not None and not state.options.update and baseline.path not in announced:
                announced.add(baseline.path)  # once a run, however many GPUs of the model it measures
                lines += resolution_banner(baseline.path, baseline.entries, state.options.gate.must_catch)
            if writer is not None:
                for line in lines:
                    writer.write_line(line)
        if changed and state.options.fail_on_version_change:
            pytest.exit(f"gpuperf: --fail-on-version-change: {', '.join(changed)} runs other versions than its "
                        "baseline (banner above); stopped before measuring", returncode=pytest.ExitCode.TESTS_FAILED)

    # -- running --------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before the terminal and the session count it: a record that fails fails it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect records from every test report (on the controller, from xdist workers too), and what each
        selected perf test's phases said, for the accounting. A record that cannot be read back, shown, written or
        recorded is its case's ``ERROR`` row, and the test fails with its line (``containment``): nothing a test
        reported ends the session."""
        properties = [(name, cast(dict[str, Any], value)) for name, value in report.user_properties]
        case = next((value for name, value in properties if name == CASE_PROPERTY), None)
        if report.when == "call":
            self._collect(report, properties, case)
        if case is not None:
            self.state.observe(SelectedCase(report.nodeid, case["case_id"], int(case["gpu_index"]),
                                            _problem(report)))

    def _collect(self, report: pytest.TestReport, properties: list[tuple[str, dict[str, Any]]],
                 case: dict[str, Any] | None) -> None:
        from gpuperf.verdict.gate import failure_line

        run = None
        try:
            run = next((RunInfo.from_dict(value) for name, value in properties if name == RUN_PROPERTY), None)
        except Exception as exc:  # the records are still collected (a run header comes with every other test)
            if not containment.contained(exc):
                raise
        fallback = {"nodeid": report.nodeid, **(case or {})}
        errors = []
        for name, value in properties:
            if name != RECORD_PROPERTY:
                continue
            record, line = containment.read_back(value, fallback)
            if not line:
                record, line = self._screened(record, run)
            try:
                self.state.add(record, run, test_failed=report.failed)
            except Exception as exc:
                if not containment.contained(exc):
                    raise
                record = containment.failed(record, containment.Stage.COLLECT, exc)
                line = record.note
                self.state.records.append(record)
                if run is not None:
                    self.state.run_infos.setdefault(run.gpu_slug, run)
            if line:
                errors.append(failure_line(record))
        if errors and not report.failed:
            report.outcome = "failed"
            report.longrepr = "\n".join(errors)

    def _screened(self, record: Record, run: RunInfo | None) -> tuple[Record, str]:
        """``record``, or its ``ERROR`` row and the line why, where the table, the results files, the history or
        (with ``--update-baselines``) its baseline entry would refuse it."""
        stages: list[tuple[str, containment.Probe]] = [(containment.Stage.TABLE, containment.table_probe)]
        if run is not None:
            stages.append((containment.Stage.RESULTS, containment.results_probe(run)))
            if self.end.history_url is not None:
                stages.append((containment.Stage.HISTORY, containment.history_probe(run)))
        if self.state.options.update:
            stages.append((containment.Stage.BASELINE, containment.entry_probe(self.state.options.baseline_dir)))
        for stage, probe in stages:
            try:
                probe([record])
            except Exception as exc:
                if not containment.contained(exc):
                    raise
                error = containment.failed(record, stage, exc)
                return error, error.note
        return record, ""

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: a worker's view of what exists, for stale entries."""
        data = getattr(node, "workeroutput", {}).get(COLLECTED_OUTPUT)
        if data:
            self.collected.append(CollectedTests.from_dict(data))

    # -- the end --------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Controller: the end of the run (``RunEnd.finish``). A worker hands its collection to the controller."""
        if is_worker(self.config):
            collected = self.config.stash.get(COLLECTED, None)
            if collected is not None:
                self.config.workeroutput[COLLECTED_OUTPUT] = collected.to_dict()  # type: ignore[attr-defined]
            return
        self.end.finish(session, self.collected, self.skipped_files)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if is_worker(self.config):
            return
        if terminalreporter.stats.get("skipped"):  # before pytest's short summary, which runs after every hook
            from gpuperf.output.skips import fold_by_reason

            terminalreporter.stats["skipped"] = fold_by_reason(terminalreporter.stats["skipped"])
        lines = self.end.summary_lines()
        if lines:
            terminalreporter.section("gpuperf")
            for line in lines:
                terminalreporter.write_line(line)


def _describe_devices(config: pytest.Config, indices: Sequence[int]) -> dict[int, dict[str, Any] | str]:
    """Each selected GPU's description, or why there is none (the run goes on and reports its cases as not
    measured)."""
    pool = config.stash[POOL]
    isolated = config.pluginmanager.get_plugin("dsession") is not None  # an xdist controller
    described: dict[int, dict[str, Any] | str] = {}
    for index in indices:
        try:
            described[index] = pool.describe(index, isolated=isolated)
        except Exception as exc:  # NoGpuError, or a CUDA or NVML failure, already naming its cause
            described[index] = str(exc) if isinstance(exc, NoGpuError) else f"{type(exc).__name__}: {exc}"
    return described


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "skipped")


def _problem(report: pytest.TestReport) -> str:
    """Why a test did not run to its verdict, in one line ("" when it did)."""
    if report.skipped:
        return f"skipped: {_skip_reason(report)}"
    if report.failed:
        first = next((line for line in report.longreprtext.splitlines() if line.strip()), "")
        phase = "test failed" if report.when == "call" else f"error in {report.when}"
        return f"{phase}: {first.strip()[:200]}"
    return ""


def _drops_tests_that_passed(config: pytest.Config) -> bool:
    """``--lf`` and ``--sw`` collect files in part: no file tells which of its tests are gone."""
    return bool(config.getoption("lf", False) or config.getoption("stepwise", False))


def _partly_collected(config: pytest.Config) -> set[str]:
    """Test files named with a node id (``file.py::test``) on the command line: only part of them was collected."""
    partial = set()
    for arg in config.args:
        if "::" in arg:
            path = (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
            try:
                partial.add(path.relative_to(config.rootpath).as_posix())
            except ValueError:
                continue
    return partial
