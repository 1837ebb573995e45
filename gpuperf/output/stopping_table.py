"""The stopping rule's table: per family, what the rule took to judge each case (samples, GPU time) and the
interval it reached relative to the case's band, over the runs of one or more GPUs.

Each record a measurement makes carries what the rule did in ``extra["sampling"]`` (``stats.Sampling``); this module
reads it back from results files, tolerating records without it (a ratio, an error, a run of an older suite), and
makes the Markdown section of evidence/measuring.md between ``START`` and ``END``:
``python3 tools/evidence/stopping_table.py RUN… [--page evidence/measuring.md]``. Pure: reads records, no GPU.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuperf.measure.stats import Stop
from gpuperf.output import table
from gpuperf.output.readme import replace_section, section_markers
from gpuperf.output.table import Column
from gpuperf.store.records import Record, RunInfo
from gpuperf.untrusted import markdown_text
from gpuperf.vocabulary import Basis

START, END = section_markers("stopping", "tools/evidence/stopping_table.py")
#: The ``Record.extra`` key a measurement's stopping data is stored under (``check.case_record``).
SAMPLING_KEY = "sampling"


class StoppingError(ValueError):
    """Runs whose records say nothing of the stopping rule: the message names the fix."""


@dataclass(frozen=True)
class Stopped:
    """What the rule did for one record of one run on one GPU."""

    family: str
    gpu: str
    samples: int
    gpu_s: float
    relative: float | None  # the interval reached ÷ the band (``None``: no band or no interval)
    basis: str
    reason: str


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def stopped(record: Record, gpu: str) -> Stopped | None:
    """The record's stopping data, or ``None`` when it has none or not in the form ``stats.Sampling`` writes."""
    data = record.extra.get(SAMPLING_KEY) if isinstance(record.extra, Mapping) else None
    if not isinstance(data, Mapping):
        return None
    samples, gpu_s = _number(data.get("samples")), _number(data.get("gpu_s"))
    interval, band = _number(data.get("interval")), _number(data.get("band"))
    if samples is None or gpu_s is None:
        return None
    return Stopped(family=record.family, gpu=gpu, samples=int(samples), gpu_s=gpu_s,
                   relative=interval / band if interval is not None and band else None,
                   basis=str(data.get("basis", "")), reason=str(data.get("reason", "")))


@dataclass(frozen=True)
class FamilyRow:
    """One family's records over every run: how many, on how many GPUs, and what the rule took and reached."""

    family: str
    gpus: int
    runs: int
    records: int
    samples: tuple[float, int]  # median, max
    gpu_s: tuple[float, float]  # per record: median, max
    gpu_s_per_run: float  # the family's GPU time in one run, averaged over the runs
    relative: tuple[float | None, float | None]  # interval ÷ band: median, max
    on_cycles: int
    reasons: Mapping[str, int]


def _row(family: str, rows: Sequence[Stopped], runs: int) -> FamilyRow:
    relative = [row.relative for row in rows if row.relative is not None]
    return FamilyRow(
        family=family, gpus=len({row.gpu for row in rows}), runs=runs, records=len(rows),
        samples=(statistics.median(row.samples for row in rows), max(row.samples for row in rows)),
        gpu_s=(statistics.median(row.gpu_s for row in rows), max(row.gpu_s for row in rows)),
        gpu_s_per_run=math.fsum(row.gpu_s for row in rows) / runs,
        relative=(statistics.median(relative), max(relative)) if relative else (None, None),
        on_cycles=sum(row.basis == Basis.CYCLES for row in rows), reasons=Counter(row.reason for row in rows))


def family_rows(runs: Sequence[tuple[RunInfo, Sequence[Record]]]) -> list[FamilyRow]:
    """One row per family, then ``all``, over every record of ``runs`` that carries stopping data."""
    rows: list[Stopped] = []
    for run, records in runs:
        gpu = str((run.extra or {}).get("uuid") or run.gpu_slug)
        rows += [found for record in records if (found := stopped(record, gpu)) is not None]
    if not rows:
        raise StoppingError("no record of these runs says what the stopping rule did (extra.sampling): record them "
                            "with a suite that writes it (python3 -m pytest perf_tests --gate)")
    families = sorted({row.family for row in rows})
    return [*(_row(family, [row for row in rows if row.family == family], len(runs)) for family in families),
            _row("all", rows, len(runs))]


def _pair(pair: tuple[float | None, float | None], form: str = "{:.3g}") -> str:
    return " / ".join(table.MISSING if value is None else form.format(value) for value in pair)


COLUMNS: tuple[Column[FamilyRow], ...] = (
    Column("family", "left", lambda r: r.family),
    Column("GPUs", "right", lambda r: str(r.gpus)),
    Column("records", "right", lambda r: str(r.records)),
    Column("samples median / max", "right", lambda r: _pair((r.samples[0], r.samples[1]), "{:g}")),
    Column("GPU ms median / max", "right", lambda r: _pair((1e3 * r.gpu_s[0], 1e3 * r.gpu_s[1]))),
    Column("GPU s a run", "right", lambda r: f"{r.gpu_s_per_run:.2f}"),
    Column("interval ÷ band median / max", "right", lambda r: _pair(r.relative, "{:.2f}")),
    Column("on cycles", "right", lambda r: str(r.on_cycles)),
    Column("converged / cap / timeout", "right",
           lambda r: " / ".join(str(r.reasons.get(reason, 0)) for reason in (Stop.CONVERGED, Stop.CAP, Stop.TIMEOUT))),
)


def stopping_section(runs: Sequence[tuple[RunInfo, Sequence[Record]]], sources: Sequence[str]) -> str:
    """The page's generated section: which runs, then the table."""
    rows = family_rows(runs)
    gpus = sorted({str((run.extra or {}).get("uuid") or run.gpu_slug) for run, _ in runs})
    return "\n".join([
        START,
        f"From {len(runs)} runs on {len(gpus)} GPUs ({markdown_text(', '.join(gpu[:12] for gpu in gpus))}): "
        f"{markdown_text(', '.join(sources))}.",
        "",
        table.render_markdown(COLUMNS, rows),
        END,
    ])


def replace_stopping_section(page: str, section: str) -> str:
    return replace_section(page, section, START, END)
