"""``python -m gpuperf bisect --good REV --bad REV -k CASE``: ``git bisect run`` with the suite as the oracle.

The good and the bad commit are measured first (the bad one must regress against the good one by the gate's
rule, or there is nothing to find). Bisection then runs in a worktree of its own, so the caller's checkout is
never touched; at each step the oracle (``step``) measures the case in that worktree (a ``pytest perf_tests -k
CASE`` run there, read back from its ``results.json``), judges the figure against the good commit's with
``gate.decide``, re-measures when the gate would (``gate.needs_confirmation``, then ``gate.confirm``), records
the step in the history and answers git: 0 good, 1 bad, 125 skip (the commit cannot be measured, or no verdict).

``--measure-command`` (or ``$GPUPERF_BISECT_MEASURE``) replaces the pytest run: a shell command run in the
commit's worktree that writes a results file under ``$GPUPERF_BISECT_RESULTS`` (the CPU tests' fake GPU).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuperf.gitrepo import GitError, git, resolve_commit, worktree
from gpuperf.store.processes import run_group
from gpuperf.history.database import History, describe, resolve_target
from gpuperf.history.guard import check_appendable
from gpuperf.history.rows import KIND_BISECT, PROVENANCE, HistoryInputError, Provenance, read_results_document
from gpuperf.verdict import gate, gate_config
from gpuperf.verdict.check import entry_from_record
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status, case_of_key

MEASURE_ENV = "GPUPERF_BISECT_MEASURE"
RESULTS_ENV = "GPUPERF_BISECT_RESULTS"
CASE_ENV = "GPUPERF_BISECT_CASE"
#: The history URL, password and all, as the oracle gets it: in its environment, never in a file of the bisection.
HISTORY_URL_ENV = "GPUPERF_BISECT_HISTORY"
REFERENCE = "reference.json"
STEPS = "steps.jsonl"
SUMMARY = "bisect.json"
GOOD, BAD, SKIP = 0, 1, 125
MEASURE_TIMEOUT_S = 3600


class BisectError(RuntimeError):
    """The bisection cannot start or finish; the message names the cause and the fix."""


def _commit(repo: Path, rev: str, option: str) -> str:
    try:
        return resolve_commit(repo, rev, option)
    except GitError as exc:
        raise BisectError(str(exc)) from exc


# --- measuring one commit --------------------------------------------------------------------------------


def measure(tree: Path, case: str, scratch: Path, command: str | None,
            timeout_s: float = MEASURE_TIMEOUT_S) -> tuple[dict[str, Any] | None, str]:
    """Measure ``case`` in ``tree``: ``(results document, "")`` or ``(None, why it could not be measured)``. The
    measuring process and all it started are ended after ``timeout_s`` (``processes.run_group``)."""
    results = Path(tempfile.mkdtemp(prefix="measure-", dir=scratch))
    env = {**{key: value for key, value in os.environ.items() if key != HISTORY_URL_ENV}, RESULTS_ENV: str(results),
           CASE_ENV: case, "GPUPERF_HISTORY": "none", "CI": ""}
    if command:
        argv: list[str] | str = command
    else:
        argv = [sys.executable, "-m", "pytest", "perf_tests", "-k", keyword(case), "-q", "-p", "no:cacheprovider",
                "--results-dir", str(results)]
    try:
        done = run_group(argv, timeout=timeout_s, cwd=tree, env=env, shell=bool(command), text=True)
    except subprocess.TimeoutExpired:
        return None, f"the measurement ran past --measure-timeout {timeout_s:g} s (stopped)"
    (results / "measure.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    found = sorted(results.rglob("results.json"))
    if not found:
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        return None, f"no results.json (exit {done.returncode}: {tail[0][:200]})"
    try:
        return read_results_document(found[-1])[0], ""
    except HistoryInputError as exc:
        return None, str(exc)


def keyword(case: str) -> str:
    """The ``pytest -k`` of a case: its test name and parameters (``-k`` matches names, not file paths), without
    a ratio's ``#name`` or a later check's ``@2`` (``vocabulary.case_of_key``: the test that owns the entry)."""
    return case_of_key(case).rsplit("::", 1)[-1]


def case_record(document: dict[str, Any], case: str) -> tuple[Record | None, str]:
    """The one record of ``case`` in a results document: an exact case id, else the one containing it (a
    case's own figure before its ratio entries, ``…#vs_cublas``, unless ``case`` names the ratio)."""
    records = [Record.from_dict(item) for item in document["records"]]
    exact = [record for record in records if record.case_id == case]
    matching = exact or [record for record in records if case in record.case_id]
    if len(matching) > 1 and "#" not in case:
        matching = [record for record in matching if "#" not in record.case_id] or matching
    if len(matching) == 1:
        return matching[0], ""
    if not matching:
        return None, f"no record of {case!r} in the results"
    return None, f"-k {case!r} selects {len(matching)} cases ({matching[0].case_id}, …); bisect one case"


def judge(reference: Record, measured: Record, config: gate.GateConfig) -> Record:
    """The gate's verdict on a figure against the good commit's, as a test of that case would get it."""
    return gate.decide(measured, entry_from_record(reference), config,
                       gate.Context(gpu_slug=measured.gpu, record_command="a bisection"))


def answer(status: str) -> int:
    """What git bisect is told: good for a pass (or an improvement), bad for a regression, else skip."""
    if status in (Status.PASS, Status.IMPROVED):
        return GOOD
    return BAD if status == Status.REGRESSED else SKIP


# --- the oracle: one step of git bisect run ---------------------------------------------------------------


def _record_step(work: Path, reference: dict[str, Any], document: dict[str, Any] | None, step: dict[str, Any],
                 history: str | None) -> None:
    with (work / STEPS).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(step) + "\n")
    if document is None or not history:
        return
    provenance = Provenance(kind=KIND_BISECT, git_commit=step["commit"], git_dirty=False,
                            options={"bisect": {key: reference[key] for key in ("good", "bad", "case")},
                                     "verdict": step["status"]},
                            baseline_digest=None)
    run = {**document["run"], "extra": {**(document["run"].get("extra") or {}), PROVENANCE: provenance.to_dict()}}
    with History(history) as appended:
        appended.append({**document, "run": run}, f"bisect step {step['commit'][:12]}")


def step(work: Path) -> int:
    """Measure and judge the commit checked out in the current directory; git bisect's exit code."""
    reference = json.loads((work / REFERENCE).read_text(encoding="utf-8"))
    tree = Path.cwd()
    commit = git(tree, "rev-parse", "HEAD")
    good = Record.from_dict(reference["record"])
    config = gate.GateConfig(**reference["gate"])
    tries: list[Record] = []
    document: dict[str, Any] | None = None
    why = ""
    for _ in range(2):
        document, why = measure(tree, reference["case"], work, reference.get("command"),
                                reference.get("measure_timeout_s", MEASURE_TIMEOUT_S))
        measured, why = case_record(document, reference["case"]) if document is not None else (None, why)
        if measured is None:
            break
        tries.append(judge(good, measured, config))
        if not gate.needs_confirmation(tries[0]):
            break
    verdict = (tries[0] if len(tries) == 1 else gate.confirm(tries[0], tries[1])) if tries else None
    status = verdict.status if verdict is not None else "cannot run"
    code = answer(status) if verdict is not None else SKIP
    _record_step(work, reference, document, {
        "commit": commit, "status": status, "answer": {GOOD: "good", BAD: "bad", SKIP: "skip"}[code],
        "value": verdict.value if verdict else None, "delta_pct": verdict.delta_pct if verdict else None,
        "measurements": len(tries), "note": verdict.note if verdict else why}, os.environ.get(HISTORY_URL_ENV))
    print(f"gpuperf bisect: {commit[:12]}: {status} → {'good' if code == GOOD else 'bad' if code == BAD else 'skip'}"
          f"{'' if verdict else ': ' + why}")
    return code


# --- the driver ---------------------------------------------------------------------------------------------


def _measure_endpoint(repo: Path, commit: str, work: Path, reference: dict[str, Any], role: str,
                      history: str | None) -> Record:
    """Measure the good or the bad commit in a worktree of its own, recorded like a step."""
    with worktree(repo, commit, work / f"tree-{role}") as tree:
        document, why = measure(tree, reference["case"], work, reference.get("command"),
                                reference["measure_timeout_s"])
    record, why = case_record(document, reference["case"]) if document is not None else (None, why)
    if record is None:
        raise BisectError(f"the {role} commit {commit[:12]} cannot be measured: {why}; see {work}/measure-*/"
                          "measure.log")
    if not gate.valid_figure(record.value):
        raise BisectError(f"the {role} commit {commit[:12]} measured {record.value!r}: not a figure to bisect on")
    _record_step(work, reference, document, {"commit": commit, "status": f"{role} endpoint", "answer": role,
                                             "value": record.value, "delta_pct": None, "measurements": 1,
                                             "note": ""}, history)
    return record


def _first_bad(output: str) -> tuple[str | None, list[str]]:
    """The first bad commit git bisect named, or the candidates it left when skips hid it."""
    lines = output.splitlines()
    for line in lines:
        if line.endswith(" is the first bad commit"):
            return line.split()[0], []
    if any("only 'skip'ped commits left" in line for line in lines):
        candidates = [line.split()[0] for line in lines if len(line.split()) == 1 and len(line) >= 40]
        return None, candidates
    return None, []


def _oracle(work: Path) -> list[str]:
    """The step command git runs in each worktree: this gpuperf's oracle, whatever gpuperf that commit holds."""
    harness = str(Path(__file__).resolve().parents[2])
    code = (f"import sys; sys.path.insert(0, {harness!r}); from pathlib import Path; "
            f"from gpuperf.history.bisect import step; sys.exit(step(Path({str(work)!r})))")
    return [sys.executable, "-c", code]


def _bisect(repo: Path, good: str, bad: str, work: Path, history: str | None) -> tuple[str | None, list[str], str]:
    with worktree(repo, bad, work / "tree") as tree:
        try:
            git(tree, "bisect", "start", bad, good)
            done = run_group(["git", "-C", str(tree), "bisect", "run", *_oracle(work)], text=True,
                             env={**os.environ, HISTORY_URL_ENV: history or ""})
            output = done.stdout + done.stderr
            (work / "bisect.log").write_text(output + "\n" + git(tree, "bisect", "log", check=False),
                                             encoding="utf-8")
            first, candidates = _first_bad(done.stdout)
        finally:
            git(tree, "bisect", "reset", check=False)
    return first, candidates, output


def run_bisect(args: argparse.Namespace) -> int:
    repo = Path(git(Path(args.repo), "rev-parse", "--show-toplevel"))
    good, bad = _commit(repo, args.good, "--good"), _commit(repo, args.bad, "--bad")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = args.out or Path.cwd() / "results" / f"bisect-{stamp}"
    try:
        work = Path(out).resolve()
    except (RuntimeError, OSError):  # a loop of links: RuntimeError, or OSError on a newer Python
        raise BisectError(f"--out {out}: leads through a symbolic link back to itself (a loop of links); fix the "
                          "link or pass a real folder") from None
    work.mkdir(parents=True, exist_ok=True)
    history = resolve_target(args.history, os.environ, Path.cwd())
    if history is not None:  # before the first measurement: each step appends to it
        check_appendable(history)
    config = gate.GateConfig(tolerance=args.tolerance if args.tolerance is not None else gate_config.DEFAULT_TOLERANCE)
    reference: dict[str, Any] = {"good": good, "bad": bad, "case": args.k,
                                 "history": describe(history) if history else None,  # shown: the oracle gets the URL
                                 "command": args.measure_command or os.environ.get(MEASURE_ENV) or None,
                                 "measure_timeout_s": args.measure_timeout,
                                 "gate": {"tolerance": config.tolerance, "noise_k": config.noise_k}}
    good_record = _measure_endpoint(repo, good, work, reference, "good", history)
    reference["record"] = good_record.to_dict()
    bad_verdict = judge(good_record, _measure_endpoint(repo, bad, work, reference, "bad", history), config)
    if bad_verdict.status != Status.REGRESSED:
        raise BisectError(f"the bad commit {bad[:12]} is {bad_verdict.status} against the good one "
                          f"({good_record.value:.4g} → {bad_verdict.value:.4g} {good_record.unit}) by the gate's rule: "
                          "no regression to bisect; check -k and the commits")
    (work / REFERENCE).write_text(json.dumps(reference, indent=2), encoding="utf-8")
    first, candidates, output = _bisect(repo, good, bad, work, history)
    steps = [json.loads(line) for line in (work / STEPS).read_text(encoding="utf-8").splitlines() if line]
    summary = {"case": args.k, "good": good, "bad": bad, "good_value": good_record.value, "unit": good_record.unit,
               "bad_value": bad_verdict.value, "first_bad": first, "candidates": candidates,
               "subject": git(repo, "log", "-1", "--format=%s", first) if first else None, "steps": steps,
               "history": describe(history) if history else None}
    (work / SUMMARY).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    for entry in steps:
        print(f"  {entry['commit'][:12]}  {entry['answer']:<5}  {entry['status']}  {entry['value']}")
    if first is None:
        print(output.strip().splitlines()[-1] if output.strip() else "git bisect said nothing")
        raise BisectError(f"no single first bad commit (skipped commits hide it: {', '.join(c[:12] for c in candidates)})"
                          f"; see {work}/bisect.log")
    print(f"gpuperf bisect: first bad commit {first} {summary['subject']} ({work / SUMMARY})")
    return 0


__all__ = ["BisectError", "run_bisect", "step"]
