"""Text for people: the session header, the end-of-session table, the old → new tables (``--update-baselines``,
``baseline diff``, ``compare``) and their summary lines. Every table renders through ``gpuperf.output.table``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuperf.output import table
from gpuperf.untrusted import markdown_text, terminal
from gpuperf.verdict.accounting import GpuAccount
from gpuperf.store.baseline import Change
from gpuperf.output.diff import DiffRow, changes_rows
from gpuperf.verdict.false_alarms import CaseAlarms, SelectionAlarms
from gpuperf.verdict.fleet import CaseSpread, Run
from gpuperf.verdict.gate import KERNEL_CHANGE
from gpuperf.store.records import Record, RunInfo
from gpuperf.output.table import Column

#: The end-of-session table: every record column but the README's short case and the unit (the metric says it).
TABLE_COLUMNS: tuple[Column[Record], ...] = (table.CASE, table.METRIC, table.MEASURED, table.SPREAD, table.CLOCK,
                                             table.AT_MAX_CLOCK, table.BASELINE, table.DELTA, table.PEAK, table.STATUS,
                                             table.NOTE)


def header_lines(run: RunInfo) -> list[str]:
    """The session header: GPU, versions, clocks, flush modes, peaks, the kernel timer; each line one terminal line
    (``untrusted.terminal``), whatever the fields hold."""
    clocks = f"SM max {run.sm_clock_max_mhz} MHz, memory {run.mem_clock_mhz} MHz"
    lines = [
        f"gpuperf: {run.gpu_name} ({run.gpu_slug}, sm_{run.compute_capability.replace('.', '')}) | "
        f"driver {run.driver} | CUDA {run.cuda_runtime} | cuBLAS {run.cublas} | CuPy {run.cupy}",
        f"gpuperf: clocks {clocks} | flush {', '.join(run.flush_modes)}",
    ]
    peaks = table.peaks_line(run.extra.get("peaks"))
    if peaks:
        lines.append(f"gpuperf: peaks {peaks}")
    if run.extra.get("kernel_timer"):
        lines.append(f"gpuperf: timing {run.extra['kernel_timer']}")
    return [terminal(line, None) for line in lines]


def format_table(records: Sequence[Record], max_note: int = 100) -> str:
    """One aligned table, problems first, then by case id; notes cut to ``max_note`` characters."""
    columns = [*TABLE_COLUMNS[:-1], table.NOTE.clipped(max_note)]
    return table.render_text(columns, table.by_status(records))


def status_counts(records: Sequence[Record]) -> str:
    return table.counts_text(r.status for r in records)


# --- old → new -----------------------------------------------------------------------------------------


def _change_or_delta(row: DiffRow) -> str:
    return table.format_delta(row.delta_pct) if row.delta_pct is not None else row.change or table.MISSING


def _status_or_change(row: DiffRow) -> str:
    return row.status or row.change


def _status_or_change_with_icon(row: DiffRow) -> str:
    return table.status_with_icon(row.status) if row.status else row.change


def diff_columns(old: str = "old", new: str = "new", verdicts: bool = False,
                 kernels: bool = False) -> tuple[Column[DiffRow], ...]:
    """The columns of an old → new table, the figures titled ``old`` and ``new`` or as given. Without
    ``verdicts`` a case that is not in both says so in the Δ column, and ``kernels`` adds how each case's
    kernels changed; with them (``compare``) the gate's status (or ``only in A`` / ``only in B``) and note
    follow."""
    head: tuple[Column[DiffRow], ...] = (
        Column("case", "left", lambda r: r.case_id, lambda r: table.code_span(r.case_id)),
        Column("metric", "left", lambda r: r.metric),
        Column(old, "right", lambda r: table.format_number(r.old)),
        Column(new, "right", lambda r: table.format_number(r.new)),
    )
    if not verdicts:
        delta = Column("Δ %", "right", _change_or_delta)
        return (*head, delta, Column("kernels", "left", lambda r: r.note)) if kernels else (*head, delta)
    return (*head, Column("Δ %", "right", lambda r: table.format_delta(r.delta_pct)),
            Column("status", "left", _status_or_change, _status_or_change_with_icon),
            Column("note", "left", lambda r: r.note))


def format_diff(rows: Sequence[DiffRow], markdown: bool = False, old: str = "old", new: str = "new",
                verdicts: bool = False) -> str:
    """The old → new table of ``baseline diff``, ``--update-baselines`` and (``verdicts``) ``compare``."""
    render = table.render_markdown if markdown else table.render_text
    return render(diff_columns(old, new, verdicts, kernels=any(r.note for r in rows)), rows)


def format_changes(changes: Sequence[Change]) -> str:
    """The old → new table ``--update-baselines`` prints for review: ``baseline diff``'s table."""
    return format_diff(changes_rows(changes))


def diff_summary(rows: Sequence[DiffRow], threshold_pct: float) -> str:
    """``3 compared; 1 higher and 1 lower by more than 5 %; 1 added``."""
    deltas = [r.delta_pct for r in rows if r.delta_pct is not None]
    higher = sum(delta > threshold_pct for delta in deltas)
    lower = sum(delta < -threshold_pct for delta in deltas)
    parts = [f"{len(deltas)} compared", f"{higher} higher and {lower} lower by more than {threshold_pct:g} %"]
    return "; ".join(parts + _change_counts(rows))


def comparison_summary(rows: Sequence[DiffRow]) -> str:
    """``4 compared: 1 regressed, 1 unreliable, 2 pass; 1 only in A; 1 only in B``."""
    judged = [r.status for r in rows if r.status]
    parts = [f"{len(judged)} compared" + (f": {table.counts_text(judged)}" if judged else "")]
    return "; ".join(parts + _change_counts(rows))


def _change_counts(rows: Sequence[DiffRow]) -> list[str]:
    """``["1 added", "2 removed"]``: the cases not compared, per reason."""
    changes = sorted(r.change for r in rows if r.change)
    return [f"{changes.count(change)} {change}" for change in dict.fromkeys(changes)]


def version_banner(baseline: Path, changes: Sequence[str]) -> list[str]:
    """The start-of-run warning that the software under the GPU changed since its baseline was recorded."""
    return [
        terminal(f"gpuperf: VERSION CHANGE since {baseline} was recorded: {'; '.join(changes)}", None),
        "gpuperf:   figures may move for that reason alone; review, then re-record: "
        "pytest perf_tests --update-baselines (--fail-on-version-change stops such a run)",
    ]


def kernel_change_lines(records: Sequence[Record]) -> list[str]:
    """The end-of-run list of cases whose kernels differ from their baseline entry's (after a driver or cuBLAS
    upgrade, the usual cause of a moved figure)."""
    changed = [(record.case_id, record.extra[KERNEL_CHANGE]) for record in records if record.extra.get(KERNEL_CHANGE)]
    if not changed:
        return []
    return [f"gpuperf: kernels changed since the baseline in {len(changed)} case(s):",
            *(f"gpuperf:   {terminal(case)}: {terminal(str(change))}" for case, change in sorted(changed))]


def accounting_lines(accounts: Sequence[GpuAccount], stale: Sequence[str], gate_mode: bool,
                     max_reason: int = 160) -> list[str]:
    """Per GPU ``N of M baselined cases measured``, each NOT MEASURED case with its reason, stale entries."""
    lines = [f"gpuperf: {terminal(account.summary(), None)}" for account in accounts]
    for account in accounts:
        for unmeasured in account.not_measured:
            lines.append(f"gpuperf: NOT MEASURED {terminal(unmeasured.key)}: {terminal(unmeasured.reason, max_reason)}")
    if stale:
        effect = "fails the gate (--allow-stale to accept)" if gate_mode else "a warning here, a failure in gate mode"
        lines.append(f"gpuperf: {len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'}, no test "
                     f"produces them any more ({effect}); remove them with python -m gpuperf baseline drop "
                     "<file> <case>...:")
        lines += [f"gpuperf:   {terminal(key)}" for key in stale]
    return lines


def _percent_cell(fraction: float) -> str:
    return table.format_percent(100 * fraction)


#: The fleet table's columns (``python -m gpuperf fleet``; docs/fleet.md).
FLEET_COLUMNS: tuple[Column[CaseSpread], ...] = (
    Column("case", "left", lambda s: table.short_case(s.case_id),
           lambda s: table.code_span(table.short_case(s.case_id))),
    Column("hosts", "right", lambda s: str(s.hosts)),
    Column("runs", "right", lambda s: str(s.runs)),
    Column("median", "right", lambda s: table.format_number(s.median)),
    Column("host to host %", "right", lambda s: _percent_cell(s.host_spread)),
    Column("run to run %", "right", lambda s: _percent_cell(s.run_spread)),
    Column("host to host @max clk %", "right", lambda s: _optional_percent(s.host_spread_at_max_clock)),
)


def _optional_percent(fraction: float | None) -> str:
    return table.MISSING if fraction is None else _percent_cell(fraction)


ALARM_COLUMNS: tuple[Column[CaseAlarms], ...] = (
    Column("case", "left", lambda c: table.short_case(c.case_id),
           lambda c: table.code_span(table.short_case(c.case_id))),
    Column("judged on", "left", lambda c: c.basis or table.MISSING),
    Column("run pairs", "right", lambda c: str(c.pairs)),
    Column("false alarms", "right", lambda c: f"{c.pair_alarms} ({100 * c.pair_rate:.1f} %)"),
    Column("vs baseline", "right", lambda c: f"{c.baseline_alarms} of {c.baseline_runs}" if c.baseline_runs
           else table.MISSING),
    Column("catches ≥ %", "right", lambda c: _optional_percent(c.catches)),
)


def format_false_alarms(cases: Sequence[CaseAlarms], selection: SelectionAlarms, markdown: bool = False) -> str:
    """The selection's A/A false-alarm rate, then per case, most alarming first."""
    against = (f"; against the baseline {selection.red_runs} of {selection.baseline_runs} runs red "
               f"({100 * selection.baseline_rate:.1f} %)" if selection.baseline_runs else "")
    caught = [c.catches for c in cases if c.catches is not None]
    sampled = f" (a seeded sample of the {selection.all_pairs})" if selection.all_pairs > selection.pairs else ""
    lines = [f"false alarms over {selection.pairs} ordered run pairs{sampled} ({selection.cases} cases, each run judged "
             f"against each other run as its baseline, single tries): {selection.red_pairs} pairs red "
             f"({100 * selection.pair_rate:.1f} %){against}",
             f"smallest slowdown caught in every judgement: median case {100 * _median(caught):.1f} %, "
             f"widest {100 * max(caught, default=0.0):.1f} %" if caught else "no case was judged"]
    render = table.render_markdown if markdown else table.render_text
    return "\n".join([*lines, "", render(ALARM_COLUMNS, cases)])


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2 if ordered else 0.0


def format_fleet(runs: Sequence[Run], spreads: Sequence[CaseSpread], markdown: bool = False) -> str:
    """Which runs on which GPUs, then per case the host-to-host and run-to-run spread, widest first."""
    hosts: dict[str, int] = {}
    for run in runs:
        hosts[run.host] = hosts.get(run.host, 0) + 1
    lines = [f"{len(runs)} runs on {len(hosts)} {runs[0].info.gpu_name if runs else ''} GPUs: "
             + ", ".join(f"{host} ×{count}" for host, count in hosts.items())]
    if spreads:
        widest = max(spreads, key=lambda s: s.host_spread)
        noisiest = max(spreads, key=lambda s: s.run_spread)
        lines.append(f"widest host to host: {100 * widest.host_spread:.1f} % ({table.short_case(widest.case_id)}); "
                     f"widest run to run on one host: {100 * noisiest.run_spread:.1f} % "
                     f"({table.short_case(noisiest.case_id)})")
    text = (lambda line: markdown_text(line, None)) if markdown else (lambda line: terminal(line, None))
    render = table.render_markdown if markdown else table.render_text
    return "\n".join([*map(text, lines), "", render(FLEET_COLUMNS, spreads)])
