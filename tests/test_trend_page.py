"""The trend site as files: one plotly bundle referred to by every page, nothing from a network, one small
multiple per series, figures plotly accepts, and text from the data that cannot break out of its page."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import plotly.graph_objects as go
import pytest

from gpuperf.output.trend_page import (CASES_DIR, INDEX_HTML, PLOTLY_JS, TrendPageError, case_page_name,
                                       write_site)

from trend_synthetic import STEP_CASE, synthetic_trend


def _figures(page: Path) -> dict[str, dict[str, object]]:
    text = page.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="figures">(.*?)</script>', text, re.S)
    assert match, f"{page} has no figures block"
    figures: dict[str, dict[str, object]] = json.loads(match.group(1))
    return figures


def test_the_site_has_one_plotly_bundle_that_every_page_refers_to_and_no_network_reference(tmp_path: Path) -> None:
    data = synthetic_trend(cases=7, runs=15)
    site = write_site(data, tmp_path / "site")
    assert site.case_pages == 7 and site.charts == 7
    bundles = [p for p in (tmp_path / "site").rglob("*.js") if "plotly" in p.name]
    assert bundles == [tmp_path / "site" / PLOTLY_JS] and bundles[0].stat().st_size > 1_000_000
    pages = [site.index, *sorted((tmp_path / "site" / CASES_DIR).glob("*.html"))]
    assert len(pages) == 8
    for page in pages:
        text = page.read_text(encoding="utf-8")
        expected = PLOTLY_JS if page == site.index else f"../{PLOTLY_JS}"
        assert f'<script src="{expected}" defer></script>' in text
        assert not re.search(r'(src|href)="(https?:)?//', text), f"{page.name} refers to the network"


def test_the_index_has_a_card_per_series_grouped_by_family_with_the_filters_values(tmp_path: Path) -> None:
    data = synthetic_trend(cases=10, runs=12, hosts=2)
    site = write_site(data, tmp_path)
    html = site.index.read_text(encoding="utf-8")
    assert html.count('class="card filterable"') == 10
    assert set(re.findall(r'<section class="family" data-family="(\w+)"', html)) == \
        {s.family for s in data.series}
    for series in data.series:
        assert f'href="{case_page_name(series)}"' in html
        assert (tmp_path / case_page_name(series)).is_file()
    assert "12 runs from 2026-01-01T00:00:00+00:00 to 2026-01-03T18:00:00+00:00" in html
    for host in data.hosts:
        assert f"<option>{host}</option>" in html


def test_every_figure_is_one_plotly_accepts(tmp_path: Path) -> None:
    data = synthetic_trend(cases=4, runs=10)
    site = write_site(data, tmp_path)
    pages = [site.index, *(tmp_path / CASES_DIR).glob("*.html")]
    count = 0
    for page in pages:
        for spec in _figures(page).values():
            go.Figure(spec)  # raises on a property plotly does not know
            count += 1
    assert count == 8


def test_the_step_case_page_marks_its_change_point_and_lists_the_kernel_and_version_changes(tmp_path: Path) -> None:
    data = synthetic_trend(cases=3, runs=20)
    write_site(data, tmp_path)
    step = next(s for s in data.series if s.case_id == STEP_CASE)
    page = tmp_path / case_page_name(step)
    (figure,) = _figures(page).values()
    texts = [a["text"] for a in figure["layout"]["annotations"]]  # type: ignore[index]
    assert "change point -6.0 %" in texts
    assert "cuBLAS 13.1.0 → 13.2.1" in texts
    html = page.read_text(encoding="utf-8")
    assert "run 18: kernel sm90_xmma_gemm_f32f32_tilesize128x128x8 → sm90_xmma_gemm_f32f32_tilesize256x128x8" in html
    assert "(-6.0 %)" in html


def test_text_from_the_data_cannot_end_the_figures_script_or_inject_markup(tmp_path: Path) -> None:
    data = synthetic_trend(cases=2, runs=5)
    hostile = "perf_tests/x.py::t[</script><script>alert(1)</script>]"
    series = (replace(data.series[0], case_id=hostile, kernel="<b>k</b>"), data.series[1])
    site = write_site(replace(data, series=series), tmp_path)
    html = site.index.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in html and "<b>k</b>" not in html
    assert len(_figures(site.index)) == 2


def test_a_file_where_the_site_should_go_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "site"
    target.write_text("not a folder")
    with pytest.raises(TrendPageError, match="not a directory"):
        write_site(synthetic_trend(cases=1, runs=2), target)

