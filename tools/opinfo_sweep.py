"""The report of the OpInfo sweep: PyTorch's own operator database measured through the installed plugin.

``tools/opinfo_project/`` is a user's project: one test per OpInfo operator (``test_opinfo.py``) and ten operators
at gated sizes (``test_operators.py``). ``tools/opinfo_device.sh`` runs it on the GPU with ``--junitxml`` and
``--results-dir``; this tool reads the two files and writes the Markdown report (``docs/opinfo-sweep.md``):

    python3 tools/opinfo_sweep.py report JUNIT.xml RESULTS.json --exit-code RC [--context FILE] > docs/opinfo-sweep.md

Every operator ends in exactly one outcome: *measured* (a figure), *refused* (the suite's ``ERROR`` row, with its
one line), *skipped* (no CUDA sample, …) or *failed* (the operator itself raised on its sample). The session's exit
code says whether anything crashed it (3: an internal error; 2: interrupted).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TEST = re.compile(r"test_opinfo\[(?P<key>.*)\]$")
#: A refusal's one line, reduced to its cause: what the suite says before the details.
_REASONS = (
    (re.compile(r"launched no kernel"), "launched no kernel on any stream"),
    (re.compile(r"not on the measuring stream"), "kernels off the measuring stream"),
    (re.compile(r"outliv|after the next separator"), "work outlived the call"),
    (re.compile(r"could not be read back|gpuperf defect"), "the record could not be written"),
)


@dataclass(frozen=True)
class Outcome:
    key: str
    kind: str  # measured | refused | skipped | failed
    reason: str = ""
    figure: float | None = None
    kernels: str = ""
    method: str = ""


def _reason(note: str) -> str:
    for pattern, reason in _REASONS:
        if pattern.search(note):
            return reason
    return note.removeprefix("no figure; ").split(";")[0].strip()[:120] or "no reason given"


def _key(name: str) -> str | None:
    match = _TEST.search(name)
    return match.group("key") if match else None


def outcomes(junit: Path, results: dict[str, Any]) -> list[Outcome]:
    """One outcome per ``test_opinfo`` test of the JUnit file, its figure from the results file's records."""
    records = {}
    for record in results.get("records", []):
        key = _key(str(record.get("case_id", "")))
        if key is not None:
            records[key] = record
    found: list[Outcome] = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        key = _key(case.get("name", ""))
        if key is None:
            continue
        record = records.get(key)
        skipped = case.find("skipped")
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        if record is not None and record.get("status") == "ERROR":
            found.append(Outcome(key, "refused", _reason(str(record.get("note", "")))))
        elif record is not None and isinstance(record.get("value"), (int, float)):
            kernels = " + ".join(k.get("name", "") for k in record.get("kernels") or [])
            found.append(Outcome(key, "measured", figure=float(record["value"]), kernels=kernels,
                                 method=str(record.get("method", ""))))
        elif skipped is not None:
            found.append(Outcome(key, "skipped", (skipped.get("message") or "").removeprefix("Skipped: ")[:160]))
        elif failure is not None:
            message = (failure.get("message") or "").splitlines()
            found.append(Outcome(key, "failed", (message[0] if message else "")[:160]))
        else:
            found.append(Outcome(key, "failed", "passed without a record"))
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report(found: Sequence[Outcome], exit_code: int, context: str) -> str:
    kinds = Counter(outcome.kind for outcome in found)
    lines = ["# The OpInfo sweep: every PyTorch operator measured or refused", "",
             "Written by `tools/opinfo_sweep.py report` from the files of `tools/opinfo_device.sh` (the sweep of",
             "`tools/opinfo_project/`, a user's project on the installed plugin). Reproduce the counts with",
             "`python3 tools/opinfo_sweep.py report docs/opinfo/junit.xml docs/opinfo/results.json`.", ""]
    if context:
        lines += ["```", context.strip(), "```", ""]
    crashed = "none" if exit_code in (0, 1) else f"exit code {exit_code}"
    lines += [f"- operators: **{len(found)}**; session crashes: **{crashed}** (pytest exit {exit_code})",
              f"- measured: **{kinds['measured']}**; refused by the suite: **{kinds['refused']}**; skipped: "
              f"**{kinds['skipped']}**; the operator raised on its sample: **{kinds['failed']}**", ""]
    for kind, title in (("refused", "Refusals (the suite's ERROR, one line each)"), ("skipped", "Skips"),
                        ("failed", "The operator raised")):
        reasons = Counter(outcome.reason for outcome in found if outcome.kind == kind)
        if not reasons:
            continue
        lines += [f"## {title}", "", "| reason | operators | e.g. |", "| --- | ---: | --- |"]
        for reason, count in reasons.most_common():
            examples = [o.key for o in found if o.kind == kind and o.reason == reason][:4]
            lines.append(f"| {_cell(reason)} | {count} | {_cell(', '.join(examples))} |")
        lines.append("")
    lines += ["## Every operator", "", "| operator | outcome | GB/s | kernels / reason |", "| --- | --- | ---: | --- |"]
    for outcome in sorted(found, key=lambda o: o.key):
        figure = f"{outcome.figure:.4g}" if outcome.figure is not None else ""
        detail = outcome.kernels if outcome.kind == "measured" else outcome.reason
        lines.append(f"| {_cell(outcome.key)} | {outcome.kind} | {figure} | {_cell(detail[:160])} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="opinfo_sweep.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("report", help="the Markdown report of one sweep")
    made.add_argument("junit", type=Path)
    made.add_argument("results", type=Path)
    made.add_argument("--exit-code", type=int, default=None,
                      help="the sweep session's exit code (default: read from the results file's folder's rc)")
    made.add_argument("--context", type=Path, default=None, help="a file of lines shown at the top (GPU, versions)")
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
        found = outcomes(args.junit, results)
        context = args.context.read_text() if args.context else ""
        exit_code = args.exit_code
        if exit_code is None:
            rc = args.results.with_name("rc")
            exit_code = int(rc.read_text()) if rc.is_file() else 0
    except (OSError, ValueError, ElementTree.ParseError) as exc:
        print(f"opinfo_sweep.py: {exc}", file=sys.stderr)
        return 1
    if not found:
        print("opinfo_sweep.py: no test_opinfo test in the JUnit file: nothing to report", file=sys.stderr)
        return 1
    sys.stdout.write(report(found, exit_code, context))
    return 0


if __name__ == "__main__":
    sys.exit(main())
