"""Text for people: the session header, the end-of-session table and the old → new update table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuperf.accounting import GpuAccount
from gpuperf.baseline import Change
from gpuperf.gate import STATUS_ORDER, status_rank
from gpuperf.records import Record, RunInfo
TABLE_COLUMNS = ("case", "metric", "measured", "spread", "baseline", "Δ %", "% peak", "status", "note")


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def header_lines(run: RunInfo) -> list[str]:
    clocks = f"SM max {run.sm_clock_max_mhz} MHz, memory {run.mem_clock_mhz} MHz"
    lines = [
        f"gpuperf: {run.gpu_name} ({run.gpu_slug}, sm_{run.compute_capability.replace('.', '')}) | "
        f"driver {run.driver} | CUDA {run.cuda_runtime} | cuBLAS {run.cublas} | CuPy {run.cupy}",
        f"gpuperf: clocks {clocks} | flush {', '.join(run.flush_modes)}",
    ]
    peaks = run.extra.get("peaks")
    if peaks:
        compute = ", ".join(f"{k} {v:.1f}" for k, v in peaks["compute_tflops"].items() if v is not None)
        lines.append(f"gpuperf: peaks TFLOPS {compute} | memory {peaks['memory_gbps']:.0f} GB/s")
    return lines


def _row(record: Record) -> tuple[str, ...]:
    return (
        record.case_id,
        record.metric,
        _number(record.value),
        "-" if record.rel_iqr is None else f"{100 * record.rel_iqr:.2f}%",
        _number(record.baseline),
        _signed(record.delta_pct),
        _percent(record.pct_of_peak),
        record.status,
        record.note,
    )


def format_table(records: Sequence[Record], max_note: int = 100) -> str:
    """One aligned table, problems first, then by case id."""
    ordered = sorted(records, key=lambda r: (status_rank(r.status), r.case_id))
    rows = [TABLE_COLUMNS] + [_row(r)[:-1] + (_clip(r.note, max_note),) for r in ordered]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS) - 1)]
    lines = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths) + "  ----")
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def status_counts(records: Sequence[Record]) -> str:
    counts = {status: sum(1 for r in records if r.status == status) for status in STATUS_ORDER}
    return ", ".join(f"{count} {status.lower()}" for status, count in counts.items() if count)


def format_changes(changes: Sequence[Change]) -> str:
    """The old → new table ``--update-baselines`` prints for review."""
    rows = [("case", "metric", "old", "new", "Δ %")]
    for change in changes:
        old = change.old.value if change.old else None
        delta = None if old is None else 100 * (change.new.value - old) / old
        rows.append((change.case_id, change.new.metric, _number(old), _number(change.new.value),
                     "new" if old is None else _signed(delta)))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
                               for i, cell in enumerate(row)).rstrip() for row in rows)


def version_banner(baseline: Path, changes: Sequence[str]) -> list[str]:
    """The start-of-run warning that the software under the GPU changed since its baseline was recorded."""
    return [
        f"gpuperf: VERSION CHANGE since {baseline} was recorded: {'; '.join(changes)}",
        "gpuperf:   figures may move for that reason alone; review, then re-record: "
        "pytest perf_tests --update-baselines (--fail-on-version-change stops such a run)",
    ]


def accounting_lines(accounts: Sequence[GpuAccount], stale: Sequence[str], gate_mode: bool,
                     max_reason: int = 160) -> list[str]:
    """Per GPU ``N of M baselined cases measured``, each NOT MEASURED case with its reason, stale entries."""
    lines = [f"gpuperf: {account.summary()}" for account in accounts]
    for account in accounts:
        for unmeasured in account.not_measured:
            lines.append(f"gpuperf: NOT MEASURED {unmeasured.key}: {_clip(unmeasured.reason, max_reason)}")
    if stale:
        effect = "fails the gate (--allow-stale to accept)" if gate_mode else "a warning here, a failure in gate mode"
        lines.append(f"gpuperf: {len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'}, no test "
                     f"produces them any more ({effect}); remove them with python -m gpuperf baseline drop "
                     "<file> <case>...:")
        lines += [f"gpuperf:   {key}" for key in stale]
    return lines
