"""The A/B run's output: its rows as a terminal table, as ``summary.md`` (GitHub Markdown) and as ``ab.json``.

Formatting only: the verdicts come from ``paired.py``. Case ids and kernel names are untrusted text (a
test id, a compiled kernel's name), escaped for each medium (``untrusted``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpuperf.ab.paired import Verdict
from gpuperf.measure.kernel_records import SAME_KERNELS
from gpuperf.output import table
from gpuperf.output.table import Column
from gpuperf.untrusted import markdown_text, terminal

#: ``ab``'s exit codes for a verdict: no case slower, a case slower, evidence missing, the run not completed.
EXIT_SAME, EXIT_SLOWER, EXIT_MISSING, EXIT_FAILED = 0, 1, 2, 3

#: ``ab.json``'s format version.
AB_SCHEMA = 1


@dataclass(frozen=True)
class AbRow:
    """One case of an A/B run: the median figure of each side's rounds, the paired Δ and interval, the verdict."""

    case: str
    status: str
    unit: str = ""
    base: float | None = None
    head: float | None = None
    delta_pct: float | None = None
    low_pct: float | None = None
    high_pct: float | None = None
    rounds: int = 0
    basis: str = ""
    kernels: str = ""  # ``describe_change`` of base → head; empty when unknown
    base_kernels: str = ""
    head_kernels: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def kernel_cell(self) -> str:
        if not self.kernels:
            return "unknown" if not (self.base_kernels or self.head_kernels) else "one side only"
        return "same" if self.kernels == SAME_KERNELS else self.kernels


def _delta(row: AbRow) -> str:
    return f"{row.delta_pct:+.2f} %" if row.delta_pct is not None else table.MISSING


def _interval(row: AbRow) -> str:
    if row.low_pct is None or row.high_pct is None:
        return table.MISSING
    return f"[{row.low_pct:+.2f}, {row.high_pct:+.2f}] %"


def _status_markdown(row: AbRow) -> str:
    return f"**{row.status}**" if row.status != Verdict.SAME else row.status


#: The A/B table's columns, in both renderings (``table.render_text`` and ``table.render_markdown``). Δ and its
#: interval keep two decimals: the rule's threshold is 2 %, finer than the gate's bands.
COLUMNS: tuple[Column[AbRow], ...] = (
    Column("case", "left", lambda r: r.case, lambda r: table.code_span(r.case)),
    Column("base", "right", lambda r: table.format_number(r.base)),
    Column("head", "right", lambda r: table.format_number(r.head)),
    Column("unit", "left", lambda r: r.unit),
    Column("Δ", "right", _delta),
    Column("95 % interval", "left", _interval, _interval),  # numbers of its own: no Markdown to escape
    Column("rounds", "right", lambda r: str(r.rounds)),
    Column("kernels", "left", lambda r: r.kernel_cell),
    Column("status", "left", lambda r: r.status, _status_markdown),
)
NOTE = Column[AbRow]("note", "left", lambda r: r.note)
#: In a terminal, case ids and kernel names are cut to these widths.
TERMINAL_WIDTHS = {"case": 70, "kernels": 60}


def ordered(rows: Sequence[AbRow]) -> list[AbRow]:
    """What needs a person first (``Verdict.ORDER``), then by case id."""
    rank = {status: index for index, status in enumerate(Verdict.ORDER)}
    return sorted(rows, key=lambda row: (rank.get(row.status, len(rank)), row.case))


def terminal_table(rows: Sequence[AbRow]) -> str:
    """The table, then the note of each case that is not SAME."""
    columns = [column.clipped(TERMINAL_WIDTHS[column.title]) if column.title in TERMINAL_WIDTHS else column
               for column in COLUMNS]
    notes = [f"  {row.status} {terminal(row.case, 70)}: {terminal(row.note, 300)}" for row in ordered(rows)
             if row.note and row.status != Verdict.SAME]
    return "\n".join([table.render_text(columns, ordered(rows)), *notes])


def summary_markdown(rows: Sequence[AbRow], heading: str, verdict_line: str) -> str:
    """``summary.md``: the verdict, then the table (Δ is the head's throughput against the base's)."""
    return "\n".join([f"## {markdown_text(heading)}", "", markdown_text(verdict_line), "",
                      table.render_markdown([*COLUMNS, NOTE], ordered(rows))]) + "\n"


def ab_json_text(header: dict[str, Any], rows: Sequence[AbRow]) -> str:
    return json.dumps({"schema": AB_SCHEMA, **header, "cases": [row.to_dict() for row in ordered(rows)]}, indent=2)


def exit_code(rows: list[AbRow], lost: list[str]) -> int:
    if lost:
        return EXIT_FAILED
    if any(row.status == Verdict.SLOWER for row in rows):
        return EXIT_SLOWER
    if not rows or any(row.status in Verdict.FAILING for row in rows):
        return EXIT_MISSING
    return EXIT_SAME


def verdict_line(rows: list[AbRow], lost: list[str], code: int) -> str:
    counts = {status: sum(row.status == status for row in rows) for status in Verdict.ORDER}
    told = ", ".join(f"{count} {status}" for status, count in counts.items() if count) or "no case measured"
    meaning = {EXIT_SAME: "no case slower", EXIT_SLOWER: "a case is slower",
               EXIT_MISSING: "evidence missing: a case not measured on both sides, or too noisy to judge",
               EXIT_FAILED: "the run could not be completed: " + "; ".join(lost)}[code]
    return f"{told} — exit {code}: {meaning}"
