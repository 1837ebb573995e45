"""``python -m gpuperf ab --base REV [--head REV] [SELECTION…]``: the pull request against its base, on one GPU,
in turns, judged on paired rounds.

The base commit (and the head, when ``--head`` names one; else the working tree as it is) is checked out in a
worktree of its own, so the caller's checkout is never touched. Each tree's selected perf tests run in a pytest
process of their own (``pytest perf_tests`` by default, with the measuring harness of this gpuperf on both sides:
the trees differ in their kernels, tests and cases, never in how they are timed). The two processes take turns on
the GPU (``ab/schedule.py`` decides, ``ab/side.py`` is the processes' end): only one runs at a time, and
each checked figure is measured in rounds, A B B A …, until the paired rule (``ab/paired.py``) has enough.
Each process's NVML contention check leaves out its sibling (``$GPUPERF_GPU_SIBLINGS``).

Out (``--out``, default ``results/ab-<timestamp>/``): ``base/`` and ``head/`` (each side's ``results.json``,
``results.csv``, ``summary.md`` and its pytest log; ``confirm/base`` and ``confirm/head`` for a pass that measured
the failing cases again in a fresh pair of processes), ``ab.json`` (every case's rounds and verdict) and
``summary.md`` (also appended to ``$GITHUB_STEP_SUMMARY``). With ``--history`` both sides' runs are appended to
the history with their commits (kind ``ab``).

Exit status: 0 no case slower; 1 a case slower; 2 missing evidence (a case measured on one side only, too noisy
to judge, or no case at all); 3 the run could not be made (a bad revision, a side that crashed or stalled); 4 a
usage error (an option's value, or an --out folder that already holds files), refused before either side starts.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import gpuperf
from gpuperf.ab.messages import HELLO, NO_GPU_CHECK_ENV, ONLY_ENV, SIDE_ENV, SOCKET_ENV, THRESHOLD_ENV
from gpuperf.ab.paired import CaseVerdict, Verdict
from gpuperf.ab.report import (EXIT_FAILED, AbRow, ab_json_text, exit_code, summary_markdown, terminal_table,
                               verdict_line)
from gpuperf.ab.schedule import BASE, HEAD, SIDES, Case, Schedule
from gpuperf.gitrepo import GitError, git, is_dirty, resolve_commit, top_level, worktree
from gpuperf.measure.device import SIBLINGS_ENV, usable_gpu_problem
from gpuperf.measure.kernel_records import describe_change
from gpuperf.store.processes import end_group
from gpuperf.output.results import STEP_SUMMARY_ENV, append_step_summary
from gpuperf.store.atomic import write_atomically
from gpuperf.store.history_target import mask_args
from gpuperf.untrusted import terminal
from gpuperf.verdict.gate import valid_figure
from gpuperf.wiring.selection_guard import refusal

#: A malformed command line or an option refused before either side starts: not 2, which is missing evidence here
#: (a CI step that passes 2 through must not read a typo as a verdict); pytest's own usage code.
EXIT_USAGE = 4
#: pytest's exit codes that are a finished session (tests passed, failed or none collected); any other is a crash.
_PYTEST_FINISHED = frozenset({0, 1, 5})
#: The default selection: the suite's perf tests, as a gate run takes them.
DEFAULT_SELECTION = ("perf_tests",)
_POLL_S = 0.5
#: The longest a side may hold the GPU between two requests (one test's set-up and body up to its first check,
#: or one round) before it is taken to be hung and stopped: the slowest default case with its compilation fits
#: in it many times over.
DEFAULT_TURN_TIMEOUT_S = 1800.0
#: How long after a side's process exited its connection may still be waiting to be accepted.
_CONNECT_GRACE_S = 2.0
#: The plugin that makes a pytest process a side: its turns taken from this coordinator (``side.py``).
SIDE_PLUGIN = "gpuperf.ab.side"


@dataclass(frozen=True)
class Tree:
    side: str
    path: Path
    commit: str
    dirty: bool = False


@dataclass
class SideProcess:
    tree: Tree
    process: subprocess.Popen[bytes]
    log: Path
    results: Path
    connection: socket.socket | None = None
    granted_at: float | None = None  # when it was last given the GPU (none yet: starting up)
    exited_at: float = 0.0


def side_command(selection: list[str], results: Path) -> list[str]:
    """pytest in the tree (the current directory) with this gpuperf's harness: the harness's ``gpuperf`` is
    imported first, then its folder is taken off ``sys.path`` again, so the tree's own modules (``kernels``) and
    tests are what runs. pytest-randomly, where installed, is kept off: both sides run their tests in file order,
    so their cases meet. The results folder is given as one ``--results-dir=PATH`` word: pytest takes every
    existing path among its arguments as a place to look for its rootdir and ini file, so a separate path word
    would let a ``pytest.ini`` above ``--out`` configure a side (and make its rootdir, its case ids) in a tree
    that has none of its own."""
    harness = str(Path(gpuperf.__file__).resolve().parent.parent)
    prelude = (f"import sys; sys.path.insert(0, {harness!r}); import gpuperf; sys.path.remove({harness!r}); "
               "import pytest; sys.exit(pytest.main(sys.argv[1:]))")
    return [sys.executable, "-c", prelude, *selection, "-p", SIDE_PLUGIN, "-p", "no:cacheprovider",
            "-p", "no:randomly", f"--results-dir={results}"]


def _side_env(side: str, address: Path, siblings: Path, threshold: float, extra: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != STEP_SUMMARY_ENV}
    return {**env, **extra, SOCKET_ENV: str(address), SIDE_ENV: side, SIBLINGS_ENV: str(siblings),
            THRESHOLD_ENV: repr(threshold),
            "GPUPERF_HISTORY": "none", "CI": ""}


class Coordinator:
    """Runs both sides and answers their requests as ``Schedule`` decides, until both are finished."""

    def __init__(self, schedule: Schedule, scratch: Path, turn_timeout_s: float,
                 side_env: dict[str, dict[str, str]] | None = None) -> None:
        self.schedule = schedule
        self.side_env = side_env or {}
        self.scratch = scratch
        self.turn_timeout_s = turn_timeout_s
        self.sides: dict[str, SideProcess] = {}
        self.selector = selectors.DefaultSelector()
        self.buffers: dict[socket.socket, bytes] = {}  # what each connection sent past its last whole line
        self.owners: dict[socket.socket, str] = {}  # each connection's side, from its hello

    def run(self, trees: dict[str, Tree], selection: list[str], out: Path) -> None:
        address = self.scratch / "turns.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(address))
        server.listen(len(SIDES))
        self.selector.register(server, selectors.EVENT_READ, None)
        siblings = self.scratch / "pids"
        with ExitStack() as stack:
            stack.callback(server.close)
            for side, tree in trees.items():
                results = out / side
                results.mkdir(parents=True, exist_ok=True)
                log = results / "pytest.log"
                handle: IO[bytes] = stack.enter_context(log.open("wb"))
                process = subprocess.Popen(side_command(selection, results), cwd=tree.path, stdout=handle,
                                           stderr=subprocess.STDOUT, start_new_session=True,
                                           env=_side_env(side, address, siblings, self.schedule.threshold,
                                                         self.side_env.get(side, {})))
                stack.callback(self._ended, process)
                self.sides[side] = SideProcess(tree, process, log, results)
            write_atomically(siblings, "".join(f"{s.process.pid}\n" for s in self.sides.values()))
            while not self.schedule.finished:
                self._step(server)
            for name, started in self.sides.items():
                self._stop(started.process, grace_s=60)
                code = started.process.returncode
                state = self.schedule.sides[name]
                if code not in _PYTEST_FINISHED and not state.lost:
                    state.lost = f"ended its pytest session with exit code {code} (see {started.log})"

    def _step(self, server: socket.socket) -> None:
        for key, _ in self.selector.select(_POLL_S):
            if key.fileobj is server:
                connection, _ = server.accept()
                self.selector.register(connection, selectors.EVENT_READ, None)
                self.buffers[connection] = b""
            else:
                self._read(key.fileobj)  # type: ignore[arg-type]
        now = time.monotonic()
        for name, side in self.sides.items():
            if self.schedule.sides[name].finished:
                continue
            code = side.process.poll()
            if code is not None and side.connection is None:
                side.exited_at = side.exited_at or now
                if now - side.exited_at > _CONNECT_GRACE_S:
                    self.schedule.lose(name, f"exited with code {code} without taking a turn: is the gpuperf "
                                             "plugin loaded in that tree, and does the selection exist? "
                                             f"(see {side.log})")
            elif name in self.schedule.running() and side.granted_at is not None and \
                    now - side.granted_at > self.turn_timeout_s:
                side.process.kill()
                self.schedule.lose(name, f"held the GPU for more than {self.turn_timeout_s:g} s without a "
                                         f"request: stopped (see {side.log}; raise --turn-timeout for longer tests)")
        grant = self.schedule.next_grant()
        if grant is not None:
            name, answer = grant
            granted = self.sides[name]
            granted.granted_at = time.monotonic()
            try:
                assert granted.connection is not None
                granted.connection.sendall((json.dumps({"answer": answer}) + "\n").encode())
            except OSError:
                self.schedule.lose(name, f"went away while its turn was given (see {granted.log})")

    def _read(self, connection: socket.socket) -> None:
        """Take in what a connection sent: whole lines are messages (the first, ``hello``, names the side); an
        end of stream before ``end`` is a side that crashed."""
        try:
            chunk = connection.recv(1 << 20)
        except OSError:
            chunk = b""
        *lines, self.buffers[connection] = (self.buffers[connection] + chunk).split(b"\n")
        for line in lines:
            message = json.loads(line)
            if message.get("kind") == HELLO and str(message.get("side")) in self.sides:
                self.owners[connection] = str(message["side"])
                self.sides[self.owners[connection]].connection = connection
            if connection in self.owners:
                self.schedule.receive(self.owners[connection], message)
        if chunk:
            return
        self.selector.unregister(connection)
        connection.close()
        name = self.owners.get(connection)
        if name is not None and not self.schedule.sides[name].finished:
            side = self.sides[name]
            try:
                code: int | str = side.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = "unknown (still running)"
            self.schedule.lose(name, f"exited with code {code} before finishing (see {side.log})")

    @staticmethod
    def _ended(process: subprocess.Popen[bytes]) -> None:
        """A side still running when the run stops early (an error, Ctrl-C, SIGTERM) is ended with its whole
        process group (it runs in a session of its own, so Ctrl-C reaches it only through here)."""
        if process.poll() is None:
            end_group(process)

    @staticmethod
    def _stop(process: subprocess.Popen[bytes], grace_s: float = 5) -> None:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _median(records: list[Any]) -> float | None:
    values = [r.value for r in records if valid_figure(r.value)]
    return statistics.median(values) if values else None


def _kernel_names(records: list[Any]) -> str:
    return " + ".join(kernel.name for kernel in records[0].kernels) if records else ""


def case_row(case: Case, verdict: CaseVerdict) -> AbRow:
    base, head = case.measured[BASE], case.measured[HEAD]
    unit = (base or head)[0].unit if base or head else ""
    change = describe_change(base[0].kernels, head[0].kernels) if base and head else ""
    return AbRow(case=case.key, status=verdict.status, unit=unit, base=_median(base), head=_median(head),
                 delta_pct=verdict.delta_pct, low_pct=verdict.low_pct, high_pct=verdict.high_pct,
                 rounds=verdict.rounds, basis=verdict.basis, kernels=change, base_kernels=_kernel_names(base),
                 head_kernels=_kernel_names(head), note=verdict.note)


def _results_file(side_out: Path) -> str | None:
    """The ``results.json`` a side's session wrote under its folder (in ``<timestamp>/``), if it wrote one."""
    found = sorted(side_out.rglob("results.json"))
    return str(found[-1]) if found else None


def _gpu(results: str | None) -> str | None:
    """The GPU a side measured on (its results.json's UUID), so that ab.json says which GPU its verdicts are of."""
    try:
        uuid = json.loads(Path(results).read_text(encoding="utf-8"))["run"]["extra"].get("uuid") if results else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return uuid if isinstance(uuid, str) else None


def _append_history(target: str, trees: dict[str, Tree], out: Path, base: str, head: str) -> list[str]:
    from gpuperf.history.database import History
    from gpuperf.history.rows import KIND_AB, PROVENANCE, Provenance, read_results_document

    appended = []
    with History(target) as history:
        for side, tree in trees.items():
            found = _results_file(out / side)
            if found is None:
                continue
            document = read_results_document(Path(found))[0]
            provenance = Provenance(kind=KIND_AB, git_commit=tree.commit, git_dirty=tree.dirty,
                                    options={"ab": {"base": base, "head": head, "side": side}},
                                    baseline_digest=None)
            run = {**document["run"], "extra": {**(document["run"].get("extra") or {}),
                                                PROVENANCE: provenance.to_dict()}}
            history.append({**document, "run": run}, f"ab {side} {tree.commit[:12]}")
            appended.append(side)
    return appended


def _history_target(args: argparse.Namespace) -> str | None:
    """The ``--history`` target, checked before either side starts: a real database kind, not in memory, one
    that can be appended to (``database.check_appendable``). ``None`` without ``--history`` (or with none)."""
    if not args.history:
        return None
    from gpuperf.store.history_target import resolve_target

    target = resolve_target(args.history, {}, Path.cwd())
    if target is not None:
        from gpuperf.history.guard import check_appendable

        check_appendable(target)
    return target


def _appended(target: str | None, trees: dict[str, Tree], out: Path, base: str, head: str) -> str:
    """Both sides' runs appended to the history (before ``ab.json`` is written, so that a failure is in it):
    the line that says so, or the reason it failed, which makes the run one that could not be completed."""
    if target is None:
        return ""
    from gpuperf.history.database import HistoryError
    from gpuperf.history.schema import SchemaError

    try:
        appended = _append_history(target, trees, out, base, head)
    except (HistoryError, SchemaError) as exc:
        return f"error: {exc}"
    return f"gpuperf ab: appended the {' and '.join(appended) or 'no'} side's run to the history"


class UsageError(Exception):
    """An option that the command line parsed but that cannot be used: refused before either side starts, exit 4."""


def _resolved(path: str | Path, option: str) -> Path:
    """``path`` made absolute, links followed; a loop of links is a usage error naming the option (Python raises
    ``RuntimeError`` for one, or ``OSError`` on a newer version)."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError):
        raise UsageError(f"{option} {path}: leads through a symbolic link back to itself (a loop of links); fix the "
                         "link or pass a real folder") from None


def refuse_used_out(out: Path) -> None:
    """``--out`` must be a new or empty folder: a run's outputs are found by their place (each side's
    ``results.json`` under ``base/`` and ``head/``), so files of an earlier run there would be reported, and
    appended to the history, as this run's. Nothing is deleted for the user: they choose what goes."""
    try:
        held = sorted(entry.name for entry in out.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return  # made (or refused as a file) by the caller
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise UsageError(f"--out {out}: already holds {shown} (an earlier run's?): this run's files would mix with "
                         "them and be reported with them; pass a new or empty folder (the default, "
                         "results/ab-<timestamp>/, is new each run), or remove that one first")


def _confirm(schedule: Schedule, trees: dict[str, Tree], selection: list[str], out: Path, work: Path,
             args: argparse.Namespace) -> Schedule | None:
    """The failing cases (SLOWER, NOISY) measured again in a fresh pair of processes (``out/confirm/``), and
    settled (``Schedule.settle``); the confirming pass's schedule, or ``None`` when there was none to confirm."""
    pending = schedule.unconfirmed()
    if not pending:
        return None
    print(f"gpuperf ab: {len(pending)} failing case(s) measured again in a fresh pair of processes", flush=True)
    only = {ONLY_ENV: json.dumps(sorted({case.test for case in pending}))}
    confirming = Schedule(threshold=schedule.threshold, rounds_max=schedule.rounds_max)
    (work / "confirm").mkdir()
    Coordinator(confirming, work / "confirm", args.turn_timeout,
                {BASE: only, HEAD: {**dict(args.head_env), **only}}).run(trees, selection, out / "confirm")
    schedule.settle(confirming)
    return confirming


def run(args: argparse.Namespace) -> int:
    refused = refusal("ab", args.selection)  # before anything runs: a writing option would write past ab
    if refused:
        raise UsageError(refused)
    repo = top_level(_resolved(args.repo, "--repo"))
    base = resolve_commit(repo, args.base, "--base")
    head = resolve_commit(repo, args.head, "--head") if args.head else git(repo, "rev-parse", "HEAD")
    selection = list(args.selection) or list(DEFAULT_SELECTION)
    history = _history_target(args)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = _resolved(args.out or Path.cwd() / "results" / f"ab-{stamp}", "--out")
    refuse_used_out(out)
    problem = "" if os.environ.get(NO_GPU_CHECK_ENV) else usable_gpu_problem(repo)
    if problem:
        print(f"gpuperf: error: no usable GPU, so neither side was started: {problem}; run the A/B gate on a GPU "
              "runner", file=sys.stderr)
        return EXIT_FAILED
    out.mkdir(parents=True, exist_ok=True)
    schedule = Schedule(threshold=args.threshold, rounds_max=args.rounds_max)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpuperf-ab-") as scratch, ExitStack() as stack:
        work = Path(scratch)
        trees = {BASE: Tree(BASE, stack.enter_context(worktree(repo, base, work / BASE)), base)}
        trees[HEAD] = Tree(HEAD, stack.enter_context(worktree(repo, head, work / HEAD)), head) if args.head \
            else Tree(HEAD, repo, head, is_dirty(repo))
        dirty = " (the working tree, with changes)" if trees[HEAD].dirty else ""
        print(f"gpuperf ab: base {base[:12]} against head {head[:12]}{dirty}: {' '.join(selection)} (logs in "
              f"{out}/base, {out}/head)", flush=True)
        Coordinator(schedule, work, args.turn_timeout, {HEAD: dict(args.head_env)}).run(trees, selection, out)
        confirming = _confirm(schedule, trees, selection, out, work, args)
    rows = [case_row(case, verdict) for case, verdict in schedule.verdicts()]
    lost = [f"the {side.name} side {side.lost}" for s in (schedule, confirming) if s is not None
            for side in s.sides.values() if side.lost]
    appended = _appended(history, trees, out, base, head)
    if appended.startswith("error: "):
        lost.append(f"the runs were not appended to the history ({appended.removeprefix('error: ')})")
    code = exit_code(rows, lost)
    line = verdict_line(rows, lost, code)
    unmeasured = schedule.unmeasured_tests()
    header = {"gpu": _gpu(_results_file(out / BASE)), "base": {"commit": base, "results": _results_file(out / BASE)},
              "head": {"commit": head, "dirty": trees[HEAD].dirty, "results": _results_file(out / HEAD)},
              "selection": mask_args(selection), "head_env": dict(args.head_env), "threshold": args.threshold,
              "rounds_max": args.rounds_max, "wall_s": round(time.monotonic() - started, 1), "exit_code": code,
              "verdict": line, "lost": lost, "unmeasured_tests": unmeasured}
    write_atomically(out / "ab.json", ab_json_text(header, rows))
    summary = summary_markdown(rows, f"A/B: {head[:12]} against {base[:12]}", line)
    write_atomically(out / "summary.md", summary)
    step = os.environ.get(STEP_SUMMARY_ENV, "").strip()
    problem = append_step_summary(summary, Path(step), out / "summary.md") if step else ""
    print(terminal_table(rows))
    for side, tests in unmeasured.items():
        if tests:
            print(f"gpuperf ab: {len(tests)} test(s) of the {side} side gave no figure (skipped, or failed before "
                  f"their check): see {out / side / 'pytest.log'}")
    if appended and not appended.startswith("error: "):
        print(appended)
    if problem:
        print(terminal(f"gpuperf ab: job summary not appended: {problem}", None))
    print(f"gpuperf ab: {line} ({out / 'ab.json'})")
    return code


__all__ = ["run", "UsageError"]  # its command line: commands/ab.py
