"""Render evidence/ab.md's section on the merge gates measured on fresh H200s, from the folders
tools/gpu_host/merge_gate_device.sh filled (one a GPU, committed under evidence/ab/merge-gate/<gpu>/): per GPU, the full
default ``--gate`` (its pytest time, wall time and verdicts) and the A/A run of the same selection timed in the same
call (its wall time, its ratio to the gate's, its verdicts), in the order they ran; then the cases that needed more
than the fewest rounds in any of those A/A runs, with the rounds each took: the per-case budget the round limit
gives.

    python3 tools/evidence/merge_gate_table.py DIR...                      # print the Markdown section
    python3 tools/evidence/merge_gate_table.py DIR... --page evidence/ab.md    # rewrite the page's section

Exit 0 when done, 2 when an input or the page is wrong (the message names the fix).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpuperf.ab.paired import MIN_ROUNDS  # noqa: E402
from gpuperf.output.readme import section_markers  # noqa: E402
from gpuperf.untrusted import markdown_text  # noqa: E402
from tools.evidence import page_section  # noqa: E402

START, END = section_markers("merge-gate", "tools/evidence/merge_gate_table.py")
JUDGED_ON_MEAN = "judged on its mean at the round limit"


class EvidenceError(Exception):
    """A folder that is not what tools/gpu_host/merge_gate_device.sh leaves: the message names the file and the fix."""


def _read(folder: Path, name: str) -> str:
    try:
        return (folder / name).read_text(encoding="utf-8")
    except OSError as exc:
        raise EvidenceError(f"{folder}: no {name} ({exc.strerror}): pass a folder tools/gpu_host/merge_gate_device.sh "
                            "filled") from None


def _json(folder: Path, name: str) -> Any:
    try:
        return json.loads(_read(folder, name))
    except json.JSONDecodeError as exc:
        raise EvidenceError(f"{folder / name}: not JSON ({exc.msg} at line {exc.lineno})") from None


def _number(pattern: str, text: str, where: str) -> float:
    found = re.search(pattern, text, flags=re.MULTILINE)
    if found is None:
        raise EvidenceError(f"{where}: no line matching {pattern!r}: pass a folder "
                            "tools/gpu_host/merge_gate_device.sh filled")
    return float(found.group(1))


def machine(folder: Path) -> dict[str, Any]:
    """What one GPU's folder says: its GPU, its gate's times and verdicts, its A/A run (None where the script
    stopped before it: its log says why)."""
    gate, log = _json(folder, "gate.json"), _read(folder, "merge-gate.log")
    gpu = str(gate["run"]["extra"]["uuid"])
    if gpu not in log:
        raise EvidenceError(f"{folder}: merge-gate.log names another GPU than gate.json's {gpu}")
    found = {"gpu": gpu.removeprefix("GPU-")[:8], "started": str(gate["run"].get("started") or ""),
             "gate_pytest_s": _number(r"^\d+ passed(?:, \d+ \w+)* in ([\d.]+)s",
                                      _read(folder, "durations.txt") + "\n" + log, f"{folder}/durations.txt"),
             "gate_wall_s": _number(r"^gate: rc=\d+ wall=([\d.]+) s", log, f"{folder}/merge-gate.log"),
             "gate": Counter(str(r["status"]) for r in gate["records"]), "aa": None, "rounds": {}}
    if not (folder / "aa.json").exists() and "A/A: exit" not in log:
        return found
    aa = _json(folder, "aa.json")
    return found | {"aa_wall_s": float(aa["wall_s"]), "aa_exit": int(aa["exit_code"]),
                    "aa": Counter(str(c["status"]) for c in aa["cases"]),
                    "on_mean": sum(JUDGED_ON_MEAN in str(c.get("note") or "") for c in aa["cases"]),
                    "rounds": {str(c["case"]): int(c.get("rounds") or 0) for c in aa["cases"]}}


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{count} {status}" for status, count in counter.most_common())


def section(folders: list[Path]) -> str:
    if not folders:
        raise EvidenceError("no folder given: pass each GPU's evidence/ab/merge-gate/<gpu>/ folder")
    machines = sorted((machine(folder) for folder in folders), key=lambda m: m["started"])
    lines = [START, f"From {len(machines)} fresh H200s' folders: "
             + ", ".join(f"`{markdown_text(str(f))}`" for f in folders) + ".", "",
             "| GPU | started (UTC) | `--gate`: pytest time (wall) | its verdicts | A/A wall | A/A ÷ gate (wall) "
             "| A/A verdicts, exit |", "| --- | --- | ---: | --- | ---: | ---: | --- |"]
    for m in machines:
        gate = f"| `{m['gpu']}` | {m['started'][:16].replace('T', ' ')} | {m['gate_pytest_s']:.2f} s ({m['gate_wall_s']:.1f} s) | {_counts(m['gate'])} | "
        if m["aa"] is None:
            lines.append(gate + "– | – | not run (its merge-gate.log shows where the script stopped) |")
            continue
        mean = f" ({m['on_mean']} of them judged on the mean)" if m["on_mean"] else ""
        lines.append(gate + f"{m['aa_wall_s']:.1f} s | {m['aa_wall_s'] / m['gate_wall_s']:.2f} × | "
                     f"{_counts(m['aa'])}{mean}, exit {m['aa_exit']} |")
    machines = [m for m in machines if m["aa"] is not None]
    cases = sorted({case for m in machines for case, rounds in m["rounds"].items() if rounds > MIN_ROUNDS + 1})
    lines += ["", f"The cases that took more than {MIN_ROUNDS + 1} rounds in any of these A/A runs (the round limit is "
              "each case's budget):", "", "| case | " + " | ".join(f"`{m['gpu']}`" for m in machines) + " |",
              "| --- | " + " | ".join("---:" for _ in machines) + " |"]
    for case in cases:
        lines.append(f"| {markdown_text(case)} | "
                     + " | ".join(str(m["rounds"].get(case, "–")) for m in machines) + " |")
    lines.append(END)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = page_section.parser("tools/evidence/merge_gate_table.py", __doc__)
    parser.add_argument("folders", nargs="+", metavar="DIR",
                        help="a GPU's folder tools/gpu_host/merge_gate_device.sh filled")
    return page_section.run(parser, argv, lambda args: section([Path(f) for f in args.folders]), (START, END),
                            (EvidenceError,), lambda args: f"merge-gate section rewritten from {len(args.folders)} GPUs")


if __name__ == "__main__":
    sys.exit(main())
