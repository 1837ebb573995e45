"""The A/B run's output: its rows as a terminal table, as ``summary.md`` (GitHub Markdown) and as ``ab.json``.

Formatting only: the verdicts come from ``verdict/paired.py``. Case ids and kernel names are untrusted text (a
test id, a compiled kernel's name), escaped for each medium (``untrusted``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpuperf.measure.kernel_records import SAME_KERNELS
from gpuperf.untrusted import markdown_code, markdown_text, table_cell, terminal
from gpuperf.verdict.paired import Verdict

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


def _figure(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else "—"


def _delta(row: AbRow) -> str:
    return f"{row.delta_pct:+.2f} %" if row.delta_pct is not None else "—"


def _interval(row: AbRow) -> str:
    if row.low_pct is None or row.high_pct is None:
        return "—"
    return f"[{row.low_pct:+.2f}, {row.high_pct:+.2f}] %"


def ordered(rows: Sequence[AbRow]) -> list[AbRow]:
    """What needs a person first (``Verdict.ORDER``), then by case id."""
    rank = {status: index for index, status in enumerate(Verdict.ORDER)}
    return sorted(rows, key=lambda row: (rank.get(row.status, len(rank)), row.case))


def terminal_table(rows: Sequence[AbRow]) -> str:
    header = ("case", "base", "head", "unit", "Δ", "95 % interval", "rounds", "kernels", "status")
    lines = [header] + [(terminal(row.case, 70), _figure(row.base), _figure(row.head), row.unit, _delta(row),
                         _interval(row), str(row.rounds), terminal(row.kernel_cell, 60), row.status)
                        for row in ordered(rows)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
    notes = [f"  {row.status} {terminal(row.case, 70)}: {terminal(row.note, 300)}" for row in ordered(rows)
             if row.note and row.status != Verdict.SAME]
    return "\n".join(text + notes)


def summary_markdown(rows: Sequence[AbRow], heading: str, verdict_line: str) -> str:
    """``summary.md``: the verdict, then the table (Δ is the head's throughput against the base's)."""
    lines = [f"## {markdown_text(heading)}", "", markdown_text(verdict_line), "",
             "| case | base | head | unit | Δ | 95 % interval | rounds | kernels | status | note |",
             "|---|---:|---:|---|---:|---|---:|---|---|---|"]
    for row in ordered(rows):
        cells = (table_cell(markdown_code(row.case)), _figure(row.base), _figure(row.head),
                 table_cell(markdown_text(row.unit)), _delta(row), _interval(row), str(row.rounds),
                 table_cell(markdown_text(row.kernel_cell)), f"**{row.status}**" if row.status != Verdict.SAME
                 else row.status, table_cell(markdown_text(row.note)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def ab_json_text(header: dict[str, Any], rows: Sequence[AbRow]) -> str:
    return json.dumps({"schema": AB_SCHEMA, **header, "cases": [row.to_dict() for row in ordered(rows)]}, indent=2)
