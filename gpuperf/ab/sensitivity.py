"""What a green A/B run means: for each case, the smallest planted slowdown the A/B gate caught.

Each input is the ``ab.json`` of an A/B run whose head side had a genuine slowdown planted
(``tools/gpu_host/slowdown.py``: ``--head-env GPUPERF_SLOWDOWN=F``, which ``ab.json`` records in ``head_env``). Per case
the table shows, for each planted fraction, the Δ the run measured (the planted effect itself: a longer reduction does
not cost every shape the same) and the verdict, then the smallest plant caught (``SLOWER``). Below it, per plant, how
many of the cases whose measured effect reached the plant were caught: the issue's target reads that line (2 %: at least
90 %, 5 %: all). ``python3 tools/evidence/sensitivity_table.py AB_JSON… [--page evidence/ab.md]`` writes the
section of evidence/ab.md between ``START`` and ``END``. Pure: reads JSON documents, no GPU.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuperf.ab.paired import DEFAULT_THRESHOLD, Verdict
from gpuperf.output import table
from gpuperf.output.readme import replace_section, section_markers
from gpuperf.output.table import Column
from gpuperf.untrusted import markdown_text

START, END = section_markers("sensitivity", "tools/evidence/sensitivity_table.py")
#: The environment variable of ``tools/gpu_host/slowdown.py`` that an ``ab.json``'s ``head_env`` records the plant in.
PLANT_ENV = "GPUPERF_SLOWDOWN"


class SensitivityError(ValueError):
    """An input that is not a planted A/B run's ``ab.json``: the message names the file and the fix."""


@dataclass(frozen=True)
class Reading:
    """One case in one planted run: the verdict and the measured Δ (%) with its interval."""

    status: str
    delta_pct: float | None
    low_pct: float | None
    high_pct: float | None


@dataclass(frozen=True)
class PlantedRun:
    plant: float  # the planted fraction (0.02: 2 % more work on the head side)
    gpu: str  # what the run names its GPU by, for the section's header
    cases: dict[str, Reading]
    threshold: float = DEFAULT_THRESHOLD  # the run's --threshold: an effect inside it is SAME by the rule


def planted_run(document: Any, name: str) -> PlantedRun:
    """The planted run an ``ab.json`` document holds, or a ``SensitivityError`` naming ``name`` and the fix."""
    if not isinstance(document, Mapping) or not isinstance(document.get("cases"), list):
        raise SensitivityError(f"{name}: not an ab.json (no list of cases): pass the ab.json of a "
                               "python -m gpuperf ab run")
    head_env = document.get("head_env") or {}
    raw = head_env.get(PLANT_ENV) if isinstance(head_env, Mapping) else None
    try:
        plant = float(str(raw))
    except ValueError:
        raise SensitivityError(f"{name}: no planted slowdown ({PLANT_ENV} in head_env is {raw!r}): pass runs made "
                               f"with --head-env {PLANT_ENV}=F -- … -p tools.gpu_host.slowdown") from None
    if not 0 < plant < 1:
        raise SensitivityError(f"{name}: a planted slowdown of {plant!r} is not a fraction between 0 and 1")
    cases: dict[str, Reading] = {}
    for row in document["cases"]:
        if not isinstance(row, Mapping) or not isinstance(row.get("case"), str) or "status" not in row:
            raise SensitivityError(f"{name}: a case without its id or status: pass an unedited ab.json")
        cases[row["case"]] = Reading(str(row["status"]), _number(row.get("delta_pct")), _number(row.get("low_pct")),
                                     _number(row.get("high_pct")))
    threshold = document.get("threshold")
    return PlantedRun(plant, str(document.get("gpu") or name), cases,
                      float(threshold) if isinstance(threshold, (int, float)) else DEFAULT_THRESHOLD)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def smallest_caught(readings: Mapping[float, Reading]) -> float | None:
    """The smallest plant whose run called the case SLOWER (``None``: no plant was caught)."""
    caught = [plant for plant, reading in readings.items() if reading.status == Verdict.SLOWER]
    return min(caught) if caught else None


@dataclass(frozen=True)
class Coverage:
    """Of the cases whose measured effect reached a plant (Δ ≤ −plant), how many its run caught; of the others,
    those whose effect stayed inside the run's threshold (SAME by the rule: a plant below the threshold) and those
    past it that the run missed."""

    plant: float
    reached: int
    caught: int
    missed: tuple[str, ...]
    inside: tuple[float, ...] = ()  # the effects (Δ %) of the uncaught cases inside the threshold


def coverage(run: PlantedRun) -> Coverage:
    reached = {case: r for case, r in run.cases.items() if r.delta_pct is not None and r.delta_pct <= -100 * run.plant}
    uncaught = {case: r for case, r in reached.items() if r.status != Verdict.SLOWER}
    inside = {case: r.delta_pct for case, r in uncaught.items() if (r.delta_pct or 0.0) > -100 * run.threshold}
    missed = tuple(sorted(case for case in uncaught if case not in inside))
    return Coverage(run.plant, len(reached), len(reached) - len(uncaught), missed,
                    tuple(sorted(d for d in inside.values() if d is not None)))


def sensitivity_section(runs: Sequence[PlantedRun], names: Sequence[str]) -> str:
    """The Markdown section (markers included) for ``runs`` (one per plant), named by ``names``."""
    if not runs:
        raise SensitivityError("no planted run given: pass the ab.json of each planted A/B run")
    plants = sorted({run.plant for run in runs})
    if len(plants) != len(runs):
        raise SensitivityError("two runs planted the same slowdown: pass one run per plant")
    by_plant = {run.plant: run for run in runs}
    rows = []
    for case in sorted({case for run in runs for case in run.cases}):
        readings = {p: by_plant[p].cases[case] for p in plants if case in by_plant[p].cases}
        caught = smallest_caught(readings)
        rows.append([case, *(_cell(readings.get(p)) for p in plants), _pct(caught) if caught is not None else "none"])
    columns: list[Column[list[str]]] = [Column("case", "left", lambda row: row[0])]
    columns += [Column(f"{_pct(p)} plant: Δ, verdict", "left", _nth(i)) for i, p in enumerate(plants, start=1)]
    columns.append(Column("smallest caught", "right", lambda row: row[-1]))
    lines = [START, f"From {len(runs)} planted A/B runs: {', '.join(markdown_text(n) for n in names)}.", "",
             table.render_markdown(columns, rows), ""]
    for run in sorted(runs, key=lambda r: r.plant):
        cover = coverage(run)
        share = f" ({100 * cover.caught / cover.reached:.0f} %)" if cover.reached else ""
        inside = f"; {_inside(cover.inside)}, inside the run's {_pct(run.threshold)} threshold: SAME by the rule" \
            if cover.inside else ""
        missed = f"; missed: {', '.join(markdown_text(c) for c in cover.missed)}" if cover.missed else ""
        lines.append(f"- {_pct(run.plant)} plant: {cover.caught} of the {cover.reached} cases whose measured effect "
                     f"reached it caught{share}{inside}{missed}.")
    lines.append(END)
    return "\n".join(lines)


def _nth(index: int) -> Callable[[list[str]], str]:
    return lambda row: row[index]


def _cell(reading: Reading | None) -> str:
    if reading is None:
        return "not measured"
    if reading.delta_pct is None:
        return reading.status
    interval = f" [{reading.low_pct:+.2f}, {reading.high_pct:+.2f}]" \
        if reading.low_pct is not None and reading.high_pct is not None else ""
    return f"{reading.delta_pct:+.2f} %{interval}, {reading.status}"


def _inside(effects: tuple[float, ...]) -> str:
    """The uncaught effects inside the threshold, ascending (most negative first), as the coverage line says them."""
    if len(effects) == 1:
        return f"the other read {effects[0]:+.2f} %"
    return f"the {len(effects)} others read {effects[-1]:+.2f} to {effects[0]:+.2f} %"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:g} %"


def replace_sensitivity_section(page: str, section: str) -> str:
    return replace_section(page, section, START, END)
