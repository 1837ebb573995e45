"""The trend site: ``index.html`` (what needs attention, then every case as a small multiple, with filters)
and one page per case, written from a ``TrendData`` with Jinja2 templates, matplotlib pictures and plotly
figures.

The site is static: it works opened from ``file://`` and served by any static host. The index's small
multiples are PNG pictures drawn at build time (``thumbnails``), each linking to its case's page, so
the index loads no charting library. A case page is one interactive plotly chart: plotly.js's basic bundle
(packaged with gpuperf, ``vendor/plotly-basic``) is written once beside the pages with its licence and every
case page refers to it; nothing is fetched from a network.
``trend.js`` draws a case page's figure and applies the index's filters.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2

from gpuperf.trend import data as trend_data
from gpuperf.store.atomic import write_atomically
from gpuperf.trend.data import Annotation, CaseSeries, TrendData
from gpuperf.trend.paths import (CASES_DIR, INDEX_HTML, PLOTLY_JS, PLOTLY_LICENCE, SMALL_DIR, page_name_of,
                                        small_multiple_name_of)
from gpuperf.trend.figures import Tooltips, case_figure, class_colours, host_colours
from gpuperf.trend.thumbnails import HEIGHT_PX, WIDTH_PX, Thumbnail, thumbnail, thumbnails_drawn

#: Files copied verbatim from the templates folder into the site.
STATIC_FILES = ("trend.css", "trend.js")
#: How many of a case's latest runs its page lists as a table (the chart shows them all).
TABLE_RUNS = 25
#: The version, kernel and method changes of each series, by ``CaseSeries.key``: found once, drawn twice.
Marks = Mapping[str, Sequence[Annotation]]
_TEMPLATES = Path(__file__).with_name("templates")
#: Each file of the site, written whole or not at all; not synced to the disk: the site is rebuilt from the history.
_write = functools.partial(write_atomically, durable=False)
#: plotly.js's basic partial bundle (scatter, bar, pie), packaged with gpuperf: see its README.md.
_PLOTLY_BUNDLE = Path(__file__).with_name("vendor") / "plotly-basic"


class TrendPageError(ValueError):
    """The site cannot be written where asked."""


@dataclass(frozen=True)
class Site:
    """What ``write_site`` wrote."""

    directory: Path
    index: Path
    case_pages: int
    charts: int  # small multiples on the index


def case_page_name(series: CaseSeries) -> str:
    return page_name_of(series.gpu_model, series.case_id)


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["figures_json"] = _figures_json
    env.filters["figure"] = _figure_text
    return env


def _figures_json(figures: dict[str, str]) -> str:
    """The figures (each already plotly's JSON) as one object, safe inside a ``<script type="application/json">``
    block: no ``</script>`` in a case id or a note can end it early."""
    body = ",".join(f"{json.dumps(key)}:{spec}" for key, spec in figures.items())
    return ("{" + body + "}").replace("</", "<\\/")


def _figure_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


_TEST_NAME = re.compile(r"^(?P<function>[^\[]+)\[(?P<parameters>.+)\]$")


def card_titles(members: Sequence[CaseSeries]) -> dict[str, str]:
    """Each card's title, by ``CaseSeries.key``: where the cases differ. A family's cases share their test
    function and differ in its parameters (``test_batched_gemm_perf[pointers-fp32-1000x64x64x64-cold]``), which
    a card's width cut off; so a title is the parameters, and the function's name is kept only where two cases
    of the section have the same parameters."""
    named = {series.key: series.case_id.split("::")[-1] for series in members}
    parts = {key: _TEST_NAME.match(name) for key, name in named.items()}
    parameters = [match["parameters"] for match in parts.values() if match]
    shared = {value for value in parameters if parameters.count(value) > 1}
    titles = {}
    for key, name in named.items():
        match = parts[key]
        titles[key] = match["parameters"] if match and match["parameters"] not in shared else name
    return titles


def _card(data: TrendData, series: CaseSeries, title: str) -> dict[str, Any]:
    last = data.last_judged(series)
    return {"series": series, "page": case_page_name(series),
            "picture": small_multiple_name_of(series.gpu_model, series.case_id), "hosts": data.hosts_of(series),
            "last": last[0] if last else None, "title": title}


def _site_summary(data: TrendData, now: datetime) -> dict[str, Any]:
    first, last = data.time_range
    return {"first": first, "last": last, "runs": len(data.runs), "cases": len(data.series),
            "gpu_models": data.gpu_models, "hosts": data.hosts, "families": trend_data.families(data.series),
            "precisions": trend_data.precisions(data.series), "source": data.source,
            "generated": now.strftime("%Y-%m-%d %H:%M UTC")}


def render_index(data: TrendData, colours: dict[str, str], now: datetime) -> tuple[str, int]:
    """The index's HTML and its number of small multiples."""
    sections = []
    for family, members in trend_data.by_family(data.series).items():
        titles = card_titles(members)
        sections.append({"family": family, "cards": [_card(data, series, titles[series.key]) for series in members]})
    attention = {model: [{"item": item, "page": case_page_name(item.series), "hosts": data.hosts_of(item.series),
                          "run": data.run(item.run_id)}
                         for item in items]
                 for model, items in trend_data.attention(data).items()}
    html = _environment().get_template("index.html.j2").render(
        summary=_site_summary(data, now), colours=colours, classes=class_colours(data),
        class_hosts=data.host_classes, experiments=data.experiments, sections=sections, attention=attention,
        figures={}, plotly_js="", root="", recent=trend_data.RECENT_RUNS,
        picture_size=(WIDTH_PX, HEIGHT_PX))
    return html, sum(len(section["cards"]) for section in sections)


def render_case(data: TrendData, series: CaseSeries, colours: dict[str, str], marks: Marks, now: datetime,
                tip: Tooltips | None = None) -> str:
    runs = [(data.run_number(p.run_id), data.run(p.run_id), p) for p in series.points[-TABLE_RUNS:]]
    changes = [(data.run_number(a.run_id), a) for a in marks[series.key]]
    change_points = [(data.run_number(cp.run_id), data.run(cp.run_id), cp) for cp in series.change_points]
    return _environment().get_template("case.html.j2").render(
        summary=_site_summary(data, now), series=series, colours=colours, hosts=data.hosts_of(series),
        figures={"case": case_figure(data, series, colours, marks[series.key], tip)}, runs=list(reversed(runs)),
        changes=changes,
        change_points=change_points, plotly_js=f"../{PLOTLY_JS}", root="../", table_runs=TABLE_RUNS)


def _thumbnails(data: TrendData, out: Path, colours: dict[str, str], marks: Marks) -> list[Thumbnail]:
    return [thumbnail(data, series, colours, marks[series.key], out / small_multiple_name_of(series.gpu_model,
                                                                                           series.case_id))
            for series in data.series]


def write_site(data: TrendData, out: str | Path, now: datetime | None = None) -> Site:
    """Write the site into ``out`` (created if needed; pages already there are replaced, others left alone)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise TrendPageError(f"{out}: exists and is not a directory; pass --out a directory for the site")
    now = now or datetime.now(timezone.utc)
    (out / CASES_DIR).mkdir(parents=True, exist_ok=True)
    colours = host_colours(data)
    tip = Tooltips(data)
    marks = {series.key: trend_data.series_changes(data, series) for series in data.series}
    _write(out / PLOTLY_JS, (_PLOTLY_BUNDLE / "plotly-basic.min.js").read_bytes())
    _write(out / PLOTLY_LICENCE, (_PLOTLY_BUNDLE / "LICENSE").read_bytes())
    for name in STATIC_FILES:
        _write(out / name, (_TEMPLATES / name).read_text(encoding="utf-8"))
    (out / SMALL_DIR).mkdir(exist_ok=True)
    with thumbnails_drawn(_thumbnails(data, out, colours, marks)):
        for series in data.series:
            _write(out / case_page_name(series), render_case(data, series, colours, marks, now, tip))
        index_html, charts = render_index(data, colours, now)
        _write(out / INDEX_HTML, index_html)
    return Site(out, out / INDEX_HTML, len(data.series), charts)
