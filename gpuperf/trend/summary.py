"""The part of ``summary.md`` that links the picture: each failing or changed case's last runs from the
history, as a text sparkline with its range, and the path of its page in the trend site.

Pure: the caller reads the history (``source.summary_history``) and passes what it found; without a
history (``--history none``) there is no section. Imports no plotting library.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuperf.untrusted import markdown_code, markdown_text, table_cell
from gpuperf.trend.paths import INDEX_HTML, page_name_of
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status

#: Beyond the failing statuses, what counts as changed: a speed-up past the band.
CHANGED_STATUSES = frozenset({Status.IMPROVED})
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class RecentRuns:
    """One case's last figures in the history, oldest first (None: that run had no valid figure), and
    whether the history's detector puts a change point among them."""

    values: tuple[float | None, ...]
    change_point: bool = False


@dataclass(frozen=True)
class SummaryHistory:
    """What the summary needs from the history: recent runs by case id, and where the trend site goes."""

    gpu_model: str
    recent: Mapping[str, RecentRuns]
    site: Path  # the folder ``python -m gpuperf history page --out`` writes


def sparkline(values: Sequence[float | None]) -> str:
    """A text sparkline (``▁▃▅█``) scaled to the series' own range; a missing figure is a space."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    top = len(SPARK_BLOCKS) - 1
    return "".join(" " if v is None else SPARK_BLOCKS[0 if span == 0 else round((v - low) / span * top)]
                   for v in values)


def wanted(record: Record, history: SummaryHistory | None) -> bool:
    """A failing or changed case: failing, improved past its band, or with a change point in its last runs."""
    if record.status in Status.FAILING or record.status in CHANGED_STATUSES:
        return True
    recent = history.recent.get(record.case_id) if history is not None else None
    return recent is not None and recent.change_point


def history_lines(records: Sequence[Record], history: SummaryHistory | None) -> list[str]:
    """The Markdown section; empty without a history or when no case is failing or changed."""
    if history is None:
        return []
    chosen = sorted({r.case_id: r for r in records if wanted(r, history)}.values(), key=lambda r: r.case_id)
    if not chosen:
        return []
    lines = [f"### History of the failing and changed cases ({len(chosen)})", ""]
    index = history.site / INDEX_HTML
    lines += [f"Trend site: {markdown_code(str(index))} (rebuild: "
              f"{markdown_code(f'python -m gpuperf history page --out {history.site}')}).", "",
              "| case | status | last runs | range | change point | page |", "| --- | --- | --- | --- | --- | --- |"]
    for record in chosen:
        recent = history.recent.get(record.case_id)
        values = recent.values if recent is not None else ()
        known = [v for v in values if v is not None]
        spread = f"{min(known):.4g} – {max(known):.4g} {record.unit}" if known else "—"
        runs = f"{markdown_code(sparkline(values))} ({len(values)})" if values else "not in the history"
        page = history.site / page_name_of(history.gpu_model, record.case_id)
        mark = "yes" if recent is not None and recent.change_point else "—"
        cells = (markdown_code(record.case_id), markdown_text(record.status), runs, markdown_text(spread), mark,
                 markdown_code(str(page)))
        lines.append("| " + " | ".join(table_cell(cell) for cell in cells) + " |")
    return lines + [""]
