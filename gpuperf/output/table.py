"""One table, two renderings: aligned plain text for the terminal, Markdown for summary.md, the README and
pull-request bodies.

Everything a table needs is spelled here once: the column spec (title, alignment, how a row becomes its
cell), the record columns, the number formatters, the status icons, the status order (the gate's,
``gate.STATUS_ORDER``) and the peaks line. Every cell is untrusted text and leaves through ``untrusted``: escaped and
cut to a width in the terminal; in Markdown, a column's own Markdown (a code span) is made by ``untrusted`` too,
any other cell is escaped as text, and ``|`` is escaped in every cell. The terminal table, ``summary.md`` and the README section each
choose a subset of ``RECORD_COLUMNS``; the old → new tables (``report``) are columns of ``diff.DiffRow`` built
from the same formatters. All render through ``render_text`` or ``render_markdown``. Pure: no I/O.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar

from gpuperf import untrusted
from gpuperf.verdict.gate import Basis, figure_at_max_clock, status_rank
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status

#: The cell of a figure that does not exist (no baseline, no peak) or is not a finite number.
MISSING = "–"
#: Significant figures of a measured or baseline value: far finer than the run-to-run noise.
SIGNIFICANT = 4
#: Below this a value is written with an exponent rather than a run of zeros.
SMALLEST_PLAIN = 1e-3

STATUS_ICONS: dict[str, str] = {
    Status.PASS: "✅", Status.IMPROVED: "⬆️", Status.REGRESSED: "❌", Status.ANOMALY: "❌", Status.ERROR: "❌",
    Status.NO_BASELINE: "❔", Status.UNRELIABLE: "⚠️", Status.NOT_COMPARABLE: "⚠️", Status.NOT_RECORDED: "⚠️",
    Status.UPDATED: "📝", Status.DRY_RUN: "🧪",
}


# --- numbers -------------------------------------------------------------------------------------------


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def format_number(value: float | None, significant: int = SIGNIFICANT) -> str:
    """``significant`` figures, never an exponent for the sizes gpuperf sees: ``4814``, ``45.12``, ``0.5213``;
    large values keep every integer digit (``123457``), tiny ones get an exponent (``1.235e-05``)."""
    if value is None or not math.isfinite(value):
        return MISSING
    if value == 0:
        return "0"
    if abs(value) < SMALLEST_PLAIN:
        return f"{value:.{significant - 1}e}"
    exponent = math.floor(math.log10(abs(value)))
    return f"{value:.{max(0, significant - 1 - exponent)}f}"


def format_delta(pct: float | None) -> str:
    """A signed percentage with one decimal (``+2.5``, ``-9.8``); a change that rounds to zero is ``0.0``."""
    if not _finite(pct):
        return MISSING
    text = f"{pct:+.1f}"
    return "0.0" if float(text) == 0 else text


def format_percent(pct: float | None) -> str:
    """A percentage with one decimal (``67.4``)."""
    return f"{pct:.1f}" if pct is not None and math.isfinite(pct) else MISSING


def format_spread(fraction: float | None) -> str:
    """A relative spread (a fraction, as records hold it) in percent with two decimals: 0.0046 → ``0.46``."""
    return f"{100 * fraction:.2f}" if fraction is not None and math.isfinite(fraction) else MISSING


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the cut marked with ``…``."""
    return untrusted.clip(text, width)


def peaks_line(peaks: Mapping[str, Any] | None) -> str:
    """``TFLOPS fp32 66.9, tf32 535.3, … | memory 4814 GB/s``: the theoretical peaks as a run, a baseline
    header or ``DevicePeaks.to_dict`` holds them; a unit the GPU lacks (``None``) is left out. Empty when
    nothing is known."""
    if not peaks:
        return ""
    compute = peaks.get("compute_tflops") or {}
    parts = []
    known = [f"{name} {float(value):.1f}" for name, value in compute.items() if value]
    if known:
        parts.append("TFLOPS " + ", ".join(known))
    if peaks.get("memory_gbps"):
        parts.append(f"memory {float(peaks['memory_gbps']):.0f} GB/s")
    return " | ".join(parts)


# --- statuses ------------------------------------------------------------------------------------------


def by_status(records: Iterable[Record]) -> list[Record]:
    """Problems first (``gate.STATUS_ORDER``), then by case id."""
    return sorted(records, key=lambda r: (status_rank(r.status), r.case_id))


def count_statuses(statuses: Iterable[str]) -> list[tuple[str, int]]:
    """``[(status, count), …]`` of the statuses present, in ``gate.STATUS_ORDER`` (unknown ones after)."""
    counts = Counter(statuses)
    return sorted(counts.items(), key=lambda item: (status_rank(item[0]), item[0]))


def counts_text(statuses: Iterable[str]) -> str:
    """``1 regressed, 2 pass``: the counts per status, problems first; empty when there are none."""
    return ", ".join(f"{count} {status.lower()}" for status, count in count_statuses(statuses))


def status_with_icon(status: str) -> str:
    return f"{STATUS_ICONS.get(status, '')} {status}".strip()


# --- columns -------------------------------------------------------------------------------------------

Row = TypeVar("Row")
Align = Literal["left", "right"]


@dataclass(frozen=True)
class Column(Generic[Row]):
    """One column: its title, its alignment, how a row becomes its cell, and, where Markdown shows more (a
    code span, an icon), how the row becomes its Markdown cell."""

    title: str
    align: Align
    cell: Callable[[Row], str]
    markdown: Callable[[Row], str] | None = None

    def markdown_cell(self, row: Row) -> str:
        """The row's cell as Markdown: the column's own (made safe where it is made), else its text escaped."""
        return self.markdown(row) if self.markdown is not None else untrusted.markdown_text(self.cell(row))

    def clipped(self, width: int) -> Column[Row]:
        """The same column with its cells cut to ``width`` characters (a long note in a terminal)."""
        cell = self.cell
        return replace(self, cell=lambda row: clip(cell(row), width))


def _at_max_clock(record: Record) -> str:
    free = figure_at_max_clock(record.clock_bound, record.value_at_max_clock)
    if free is None:
        return MISSING
    return format_number(free) + ("*" if record.judged_on == Basis.CYCLES else "")


def short_case(case_id: str) -> str:
    """``perf_tests/test_gemm.py::test_gemm_perf[fp32-4096x4096x4096-cold]`` → ``test_gemm_perf[…]``."""
    return case_id.split("::", 1)[-1]


def code_span(text: str) -> str:
    """``text`` as a Markdown code span it cannot break (``untrusted.markdown_code``)."""
    return untrusted.markdown_code(text)


# The record columns: every table of records (terminal, summary.md, README) is a selection of these.
CASE: Column[Record] = Column("case", "left", lambda r: r.case_id, lambda r: code_span(r.case_id))
TEST: Column[Record] = Column("case", "left", lambda r: short_case(r.case_id),
                              lambda r: code_span(short_case(r.case_id)))
METRIC: Column[Record] = Column("metric", "left", lambda r: r.metric)
MEASURED: Column[Record] = Column("measured", "right", lambda r: format_number(r.value))
UNIT: Column[Record] = Column("unit", "left", lambda r: r.unit)
SPREAD: Column[Record] = Column("spread %", "right", lambda r: format_spread(r.rel_iqr))
BASELINE: Column[Record] = Column("baseline", "right", lambda r: format_number(r.baseline))
DELTA: Column[Record] = Column("Δ %", "right", lambda r: format_delta(r.delta_pct))
PEAK: Column[Record] = Column("% peak", "right", lambda r: format_percent(r.pct_of_peak))
#: The SM clock the calls ran at (from the GPU's counters) and the figure their cycles give at max clock; ``*``
#: marks the figure the verdict compared when it was judged on cycles.
CLOCK: Column[Record] = Column("MHz", "right", lambda r: format_number(r.call_clock_mhz, 4) if r.call_clock_mhz
                               else MISSING)
AT_MAX_CLOCK: Column[Record] = Column("@max clk", "right", lambda r: _at_max_clock(r))
STATUS: Column[Record] = Column("status", "left", lambda r: r.status, lambda r: status_with_icon(r.status))
NOTE: Column[Record] = Column("note", "left", lambda r: r.note)

RECORD_COLUMNS: tuple[Column[Record], ...] = (CASE, TEST, METRIC, MEASURED, UNIT, SPREAD, BASELINE, DELTA, PEAK,
                                              STATUS, NOTE)


# --- rendering -----------------------------------------------------------------------------------------


def render_text(columns: Sequence[Column[Row]], rows: Iterable[Row]) -> str:
    """Aligned columns two spaces apart under a rule of dashes. A left-aligned last column (a note) is not
    padded, and its rule is only as long as its title."""
    table = [[untrusted.terminal(column.title) for column in columns]]
    table += [[untrusted.terminal(column.cell(row)) for column in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    rule = [*widths[:-1], len(columns[-1].title) if columns[-1].align == "left" else widths[-1]]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) if column.align == "left" else cell.rjust(width)
                         for cell, width, column in zip(cells, widths, columns)).rstrip()

    return "\n".join([line(table[0]), "  ".join("-" * width for width in rule), *map(line, table[1:])])


def markdown_cell(text: str) -> str:
    """Untrusted text as one Markdown table cell: escaped as text (``untrusted.markdown_text``), ``|`` escaped."""
    return untrusted.table_cell(untrusted.markdown_text(text))


def render_markdown(columns: Sequence[Column[Row]], rows: Iterable[Row]) -> str:
    """A GitHub-flavoured Markdown table: numbers right-aligned, every cell escaped."""
    lines = ["| " + " | ".join(markdown_cell(column.title) for column in columns) + " |",
             "| " + " | ".join("---:" if column.align == "right" else "---" for column in columns) + " |"]
    lines += ["| " + " | ".join(untrusted.table_cell(column.markdown_cell(row)) for column in columns) + " |"
              for row in rows]
    return "\n".join(lines)
