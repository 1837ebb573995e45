"""The report of the OpInfo sweep: PyTorch's own operator database measured through the installed plugin.

``tools/gpu_host/opinfo_project/`` is a user's project: one test per OpInfo operator (``test_opinfo.py``) and ten
operators at gated sizes (``test_operators.py``). ``tools/gpu_host/opinfo_device.sh`` runs the sweep on the GPU with
``--junitxml`` and ``--results-dir`` and packs each part of it (``junit.xml``, ``results.json``, ``rc``: the session's
exit code, 124 when its time limit stopped it with SIGINT and the rest ran in a second part) into a ``.tar.gz``; this
tool reads the parts and writes the Markdown report:

    python3 tools/evidence/opinfo_sweep.py report evidence/opinfo/sweep-1.tar.gz evidence/opinfo/sweep-2.tar.gz \
        --context evidence/opinfo/gpu.txt > evidence/opinfo-sweep.md

Every operator ends in exactly one outcome: *measured* (a figure), *refused* (the suite's ``ERROR`` row, with its
one line), *skipped* (no CUDA sample, …) or *failed* (the operator itself raised on its sample). The session's exit
code says whether anything crashed it (3: an internal error; 2: interrupted).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

_TEST = re.compile(r"test_opinfo\[(?P<key>.*?)(?:-cold|-hot)?\]$")
#: A refusal's one line, reduced to its cause: what the suite says before the details.
_REASONS = (
    (re.compile(r"launched no kernel"), "launched no kernel on any stream"),
    (re.compile(r"not on the measuring stream"), "kernels off the measuring stream"),
    (re.compile(r"outliv|after the next separator"), "work outlived the call"),
    (re.compile(r"could not be read back|gpuperf defect"), "the record could not be written"),
)
#: The method of a call whose batch could not be held (``timing.py``): the call waits for the GPU inside itself.
UNHELD = "-unheld"
#: The exit code ``timeout -s INT`` gives a session it stopped (pytest still wrote its files).
STOPPED_BY_LIMIT = 124


@dataclass(frozen=True)
class Outcome:
    key: str
    kind: str  # measured | refused | skipped | failed
    reason: str = ""
    figure: float | None = None
    kernels: str = ""
    method: str = ""
    sample_bytes: int = 0
    median_us: float = 0.0


def _reason(note: str) -> str:
    for pattern, reason in _REASONS:
        if pattern.search(note):
            return reason
    return note.removeprefix("no figure; ").split(";")[0].strip()[:120] or "no reason given"


def _key(name: str) -> str | None:
    match = _TEST.search(name)
    return match.group("key") if match else None


@dataclass(frozen=True)
class Part:
    """One session of the sweep, as ``tools/gpu_host/opinfo_device.sh`` packs it."""

    name: str
    exit_code: int
    outcomes: list[Outcome]


def read_part(path: Path) -> Part:
    """A part's outcomes from its ``.tar.gz`` (``junit.xml``, ``results.json``, ``rc``)."""
    with tarfile.open(path) as archive:
        def member(name: str) -> bytes:
            handle = archive.extractfile(name)
            if handle is None:
                raise ValueError(f"{path}: {name} is not a file")
            return handle.read()

        junit = ElementTree.fromstring(member("junit.xml"))
        results = json.loads(member("results.json"))
        exit_code = int(member("rc").decode().strip())
    return Part(path.name, exit_code, outcomes(junit, results))


def outcomes(junit: ElementTree.Element, results: dict[str, Any]) -> list[Outcome]:
    """One outcome per ``test_opinfo`` test of the JUnit file, its figure from the results file's records."""
    records = {}
    for record in results.get("records", []):
        key = _key(str(record.get("case_id", "")))
        if key is not None:
            records[key] = record
    found: list[Outcome] = []
    for case in junit.iter("testcase"):
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
                                 method=str(record.get("method", "")),
                                 sample_bytes=int((record.get("extra") or {}).get("sample_bytes") or 0),
                                 median_us=float(record.get("median_s") or 0.0) * 1e6))
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


def _part_line(part: Part) -> str:
    if part.exit_code == STOPPED_BY_LIMIT:
        how = "stopped by its time limit (SIGINT; pytest wrote its files), the rest run in the next part"
    elif part.exit_code in (0, 1):
        how = f"finished (pytest exit {part.exit_code})"
    else:
        how = f"**pytest exit {part.exit_code}**"
    return f"- `{part.name}`: {len(part.outcomes)} operators, {how}"


def report(parts: Sequence[Part], context: str, trace: str = "") -> str:
    found = [outcome for part in parts for outcome in part.outcomes]
    kinds = Counter(outcome.kind for outcome in found)
    unheld = sum(1 for outcome in found if outcome.kind == "measured" and outcome.method.endswith(UNHELD))
    crashes = [part.name for part in parts if part.exit_code not in (0, 1, STOPPED_BY_LIMIT)]
    measured = [outcome for outcome in found if outcome.kind == "measured"]
    sizes = f"a median of {median([o.sample_bytes for o in measured]):.0f} bytes of tensors" if measured else "-"
    calls = (f"a median call of {median([o.median_us for o in measured]):.2g} µs, the longest "
             f"{max(o.median_us for o in measured):.0f} µs" if measured else "-")
    lines = ["# The OpInfo sweep: every PyTorch operator measured or refused", "",
             "PyTorch's operator database (`op_db`), one test per operator with a CUDA sample in a floating dtype",
             "(float32 first), its largest sample measured through `measure` and `perf.check` as a user's test would,",
             "with no stream code (`tools/gpu_host/opinfo_project/`, on the installed plugin). The samples are "
             "OpInfo's own,",
             f"small by design ({sizes}; {calls}): the sweep shows reach (what is measured and what",
             "is refused, and why), the ten operators below show accuracy. Written by",
             "`python3 tools/evidence/opinfo_sweep.py report evidence/opinfo/sweep-1.tar.gz "
             "evidence/opinfo/sweep-2.tar.gz "
             "--context evidence/opinfo/gpu.txt --trace evidence/opinfo/operators-compare.md`",
             "from the files `tools/gpu_host/opinfo_device.sh sweep` and `trace` (with `OPINFO_AFTER`) brought back; "
             "a test",
             "writes it again from them.", ""]
    if context:
        lines += ["```", context.strip(), "```", ""]
    lines += [_part_line(part) for part in parts]
    lines += ["", f"- operators: **{len(found)}**; sessions that crashed: **{', '.join(crashes) or 'none'}**",
              f"- measured (a figure): **{kinds['measured']}**, of which {unheld} timed unheld (the call waits for "
              "the GPU inside itself, so its launches cannot queue behind the suite's hold kernel: `nonzero`, "
              "`linalg.eigh`, `masked_select`, `unique`, …; its figure is the kernels' span as for any call)",
              f"- refused by the suite (its `ERROR`, one line): **{kinds['refused']}**; skipped: **{kinds['skipped']}**;"
              f" the operator itself raised on its sample: **{kinds['failed']}**", ""]
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
    if trace:
        lines += ["## Ten operators at gated sizes against torch.profiler", "",
                  "`tools/gpu_host/opinfo_project/perf_tests/test_operators.py`: one operator of each kind at a size "
                  "a user "
                  "gates, right",
                  "against float64, measured, then traced by `tools/gpu_host/profiler_check.py` in a process of its "
                  "own "
                  "(`evidence/opinfo/`:",
                  "`operators-results.json`, `operators-profile.json`); `layer_norm` and `softmax` are kernels of "
                  "anonymous namespaces.", "", trace.strip(), ""]
    lines += ["## Every operator", "", "| operator | outcome | GB/s | method | kernels / reason |",
              "| --- | --- | ---: | --- | --- |"]
    for outcome in sorted(found, key=lambda o: o.key):
        figure = f"{outcome.figure:.4g}" if outcome.figure is not None else ""
        detail = outcome.kernels if outcome.kind == "measured" else outcome.reason
        lines.append(f"| {_cell(outcome.key)} | {outcome.kind} | {figure} | {outcome.method} | "
                     f"{_cell(detail[:160])} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="opinfo_sweep.py", description=(__doc__ or "").split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("report", help="the Markdown report of one sweep, from its parts")
    made.add_argument("parts", type=Path, nargs="+", help="each part's .tar.gz (junit.xml, results.json, rc)")
    made.add_argument("--context", type=Path, default=None, help="a file of lines shown at the top (GPU, versions)")
    made.add_argument("--trace", type=Path, default=None,
                      help="the Markdown of profiler_check.py compare for the ten operators, shown in its section")
    args = parser.parse_args(argv)
    try:
        parts = [read_part(path) for path in args.parts]
        context = args.context.read_text() if args.context else ""
        trace = args.trace.read_text() if args.trace else ""
    except (OSError, ValueError, KeyError, tarfile.TarError, ElementTree.ParseError) as exc:
        print(f"opinfo_sweep.py: {exc}", file=sys.stderr)
        return 1
    if not any(part.outcomes for part in parts):
        print("opinfo_sweep.py: no test_opinfo test in the parts' JUnit files: nothing to report", file=sys.stderr)
        return 1
    sys.stdout.write(report(parts, context, trace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
