"""The custom kernels' build tables, made from a results file of the builds selection (``-m builds``).

``perf_tests/test_custom_builds.py`` times every build of a kernel's catalogue on one shape with the suite's own
timer and takes each build's ratio to the cuBLAS reference of that shape measured in the same run; each build's
row carries its kernel's resources in ``extra["build"]``. This module turns those rows into one Markdown table per
shape (fastest first, the suite's default in bold) and puts them between ``START`` and ``END`` in a page:
``python3 tools/evidence/custom_builds.py RESULTS.json [--page evidence/custom-kernels.md]``. Pure: reads records, no
GPU.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuperf.output import table
from gpuperf.output.readme import replace_section, section_markers
from gpuperf.output.table import Column
from gpuperf.store.records import Record, RunInfo
from gpuperf.vocabulary import Metric

START, END = section_markers("custom-builds", "tools/evidence/custom_builds.py")
#: The ``Record.extra`` key the builds selection stores each build's facts under, and the ratio's name.
BUILD_KEY = "build"
RATIO_NAME = "vs_cublas"


class BuildsError(ValueError):
    """A results file that holds no build rows, or a build without its ratio: the message names the fix."""


@dataclass(frozen=True)
class BuildRow:
    """One build on one shape: its figure, its ratio to the run's cuBLAS figure, its kernel's resources."""

    case: str
    build: str
    default: bool
    kernel: str
    registers: int
    shared_bytes: int
    spill_bytes: int
    threads: int
    blocks_per_sm: int | None
    tflops: float
    ratio: float
    status: str

    @property
    def reference_tflops(self) -> float:
        return self.tflops / self.ratio


def _int(facts: dict[str, object], key: str) -> int:
    value = facts.get(key)
    return value if isinstance(value, int) else 0


def build_rows(records: Sequence[Record]) -> list[BuildRow]:
    """Every build row of a run, each joined with its ratio record (``<case id>#vs_cublas``)."""
    ratios = {r.case_id: r for r in records if r.metric == Metric.RATIO}
    rows = []
    for record in records:
        facts = record.extra.get(BUILD_KEY)
        if not isinstance(facts, dict) or record.metric == Metric.RATIO:
            continue
        ratio = ratios.get(f"{record.case_id}#{RATIO_NAME}")
        if ratio is None or not ratio.value or record.tflops is None:
            raise BuildsError(f"{record.case_id}: a build row without its #{RATIO_NAME} ratio or TFLOPS; the file "
                              "is not a complete run of the builds selection: run it again with -m builds")
        blocks = facts.get("blocks_per_sm")
        rows.append(BuildRow(
            case=str(facts.get("case", "")), build=str(facts.get("build", "")), default=facts.get("default") is True,
            kernel=str(facts.get("kernel", "")), registers=_int(facts, "registers"),
            shared_bytes=_int(facts, "shared_bytes"), spill_bytes=_int(facts, "spill_bytes"),
            threads=_int(facts, "threads"), blocks_per_sm=blocks if isinstance(blocks, int) else None,
            tflops=record.tflops, ratio=ratio.value, status=ratio.status))
    if not rows:
        raise BuildsError("the file holds no build rows: it is not a results file of the builds selection "
                          "(python3 -m pytest perf_tests -m builds)")
    return rows


def _build_cell(row: BuildRow) -> str:
    return f"**`{row.build}`** (default)" if row.default else f"`{row.build}`"


COLUMNS: tuple[Column[BuildRow], ...] = (
    Column("build", "left", lambda r: r.build + (" (default)" if r.default else ""), _build_cell),
    Column("kernel", "left", lambda r: r.kernel, lambda r: f"`{r.kernel}`"),
    Column("regs", "right", lambda r: str(r.registers)),
    Column("shared / block", "right", lambda r: f"{r.shared_bytes:,} B".replace(",", " ")),
    Column("spill", "right", lambda r: f"{r.spill_bytes} B"),
    Column("threads, blocks/SM", "left",
           lambda r: f"{r.threads}, {table.MISSING if r.blocks_per_sm is None else r.blocks_per_sm}"),
    Column("TFLOPS", "right", lambda r: f"{r.tflops:.2f}"),
    Column("× cuBLAS", "right", lambda r: f"{r.ratio:.3f}×", lambda r: f"**{r.ratio:.3f}×**" if r.default
           else f"{r.ratio:.3f}×"),
)


def build_tables(rows: Sequence[BuildRow]) -> list[str]:
    """One table per shape, in the order the run measured them, fastest build first."""
    cases: dict[str, list[BuildRow]] = {}
    for row in rows:
        cases.setdefault(row.case, []).append(row)
    lines: list[str] = []
    for case, members in cases.items():
        reference = sorted(r.reference_tflops for r in members)[len(members) // 2]
        ranked = sorted(members, key=lambda r: -r.ratio)
        builds = f"{len(members)} build{'' if len(members) == 1 else 's'}"
        lines += [f"**{case}** (cuBLAS {reference:.2f} TFLOPS in the same run; {builds}):", "",
                  table.render_markdown(COLUMNS, ranked), ""]
    return lines


def builds_section(run: RunInfo, records: Sequence[Record], source: str) -> str:
    """The page's generated section: the run's header and the tables."""
    rows = build_rows(records)
    uuid = run.extra.get("uuid")
    lines = [
        START,
        f"Measured on {run.gpu_name}{f' {uuid}' if uuid else ''} (sm_{run.compute_capability.replace('.', '')}), "
        f"driver {run.driver}, CUDA {run.cuda_runtime}, cuBLAS {run.cublas}, flush {', '.join(run.flush_modes)}, "
        f"run started {run.started}; {len(rows)} builds, from `{source}`. Ratio = the build's TFLOPS ÷ cuBLAS's on "
        "the same shape; registers, shared memory, spills and blocks per SM as the driver reports them for the "
        "build's kernel.",
        "",
        *build_tables(rows),
        END,
    ]
    return "\n".join(lines)


def replace_builds_section(page: str, section: str) -> str:
    return replace_section(page, section, START, END)
