"""The trend site as files: one plotly bundle referred to by every case page, an index that loads no charting
library, nothing from a network, one small multiple (a picture) per series showing its hosts, baseline and
change points, figures plotly accepts, and text from the data that cannot break out of its page."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
from matplotlib.image import imread

from gpuperf.trend import data as trend_data
from gpuperf.trend.data import CaseSeries
from gpuperf.trend.figures import class_colours, host_colours
from gpuperf.trend.page import (CASES_DIR, INDEX_HTML, PLOTLY_JS, TrendPageError, card_titles, case_page_name,
                                       write_site)
from gpuperf.trend.paths import PLOTLY_LICENCE, SMALL_DIR, small_multiple_name_of
from gpuperf.trend.thumbnails import (CHANGE_POINT_COLOUR, HEIGHT_PX, WIDTH_PX, render_png, thumbnail,
                                             thumbnails_drawn)

from trend_synthetic import STEP_CASE, synthetic_trend


def _figures(page: Path) -> dict[str, dict[str, object]]:
    text = page.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="figures">(.*?)</script>', text, re.S)
    assert match, f"{page} has no figures block"
    figures: dict[str, dict[str, object]] = json.loads(match.group(1))
    return figures


@pytest.mark.long
def test_the_site_has_one_plotly_bundle_that_every_case_page_refers_to_and_no_network_reference(tmp_path: Path) -> None:
    data = synthetic_trend(cases=7, runs=15)
    site = write_site(data, tmp_path / "site")
    assert site.case_pages == 7 and site.charts == 7
    bundles = [p for p in (tmp_path / "site").rglob("*.js") if "plotly" in p.name]
    assert bundles == [tmp_path / "site" / PLOTLY_JS] and bundles[0].stat().st_size > 1_000_000
    assert "plotly.js (basic - minified) v4." in bundles[0].read_text(encoding="utf-8")[:200]
    assert "MIT License" in (tmp_path / "site" / PLOTLY_LICENCE).read_text(encoding="utf-8")
    cases = sorted((tmp_path / "site" / CASES_DIR).glob("*.html"))
    assert len(cases) == 7
    for page in [site.index, *cases]:
        text = page.read_text(encoding="utf-8")
        assert (f'<script src="../{PLOTLY_JS}" defer></script>' in text) == (page != site.index)
        assert re.findall(r'<script src="([^"]+)"', text) == (["trend.js"] if page == site.index
                                                              else [f"../{PLOTLY_JS}", "../trend.js"])
        assert not re.search(r'(src|href)="(https?:)?//', text), f"{page.name} refers to the network"


@pytest.mark.long
def test_every_series_has_a_small_multiple_picture_on_the_index_linking_to_its_case(tmp_path: Path) -> None:
    data = synthetic_trend(cases=7, runs=15)
    site = write_site(data, tmp_path)
    html = site.index.read_text(encoding="utf-8")
    pictures = re.findall(r'<a href="([^"]+)"><img class="chart" src="([^"]+)"', html)
    assert len(pictures) == 7 and len(list((tmp_path / SMALL_DIR).glob("*.png"))) == 7
    for series in data.series:
        assert (case_page_name(series), small_multiple_name_of(series.gpu_model, series.case_id)) in pictures
    for _, picture in pictures:
        image = imread(tmp_path / picture)
        assert image.shape[:2] == (HEIGHT_PX, WIDTH_PX)


def _colour_columns(png: bytes, colour: str, tmp_path: Path) -> set[int]:
    """The picture's columns holding pixels of ``colour`` (within a little anti-aliasing)."""
    path = tmp_path / "picture.png"
    path.write_bytes(png)
    rgb = imread(path)[:, :, :3]
    wanted = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    close = np.abs(rgb - wanted).max(axis=2) < 0.08
    return set(np.nonzero(close.any(axis=0))[0].tolist())


def test_the_step_s_small_multiple_draws_its_change_point_and_each_host_in_its_class_colour(tmp_path: Path) -> None:
    data = synthetic_trend(cases=3, runs=40, hosts=3)
    colours = host_colours(data)
    # three hosts of two kinds: two colours, the kinds', not one a host
    assert set(colours.values()) == set(class_colours(data).values()) and len(set(colours.values())) == 2
    assert colours[data.hosts[0]] == colours[data.hosts[2]] != colours[data.hosts[1]]
    step = next(s for s in data.series if s.case_id == STEP_CASE)
    steady = next(s for s in data.series if s.case_id != STEP_CASE)
    pictures = {s.case_id: thumbnail(data, s, colours, trend_data.series_changes(data, s), tmp_path / "x.png")
                for s in (step, steady)}
    assert [label for _, label in pictures[STEP_CASE].change_points] == ["-6.0 %"]
    assert {colour for colour, _, _ in pictures[STEP_CASE].hosts} == set(colours.values())
    red = _colour_columns(render_png(pictures[STEP_CASE]), CHANGE_POINT_COLOUR, tmp_path)
    # the change point's line (and its label) lies in the right part of the picture, run 38 of 40
    assert red and min(red) > WIDTH_PX * 0.6
    assert not _colour_columns(render_png(pictures[steady.case_id]), CHANGE_POINT_COLOUR, tmp_path)
    for colour in colours.values():
        assert len(_colour_columns(render_png(pictures[STEP_CASE]), colour, tmp_path)) > WIDTH_PX // 4  # drawn across the runs


@pytest.mark.long
def test_pictures_drawn_in_worker_processes_are_those_drawn_here(tmp_path: Path) -> None:
    data = synthetic_trend(cases=30, runs=20)
    colours = host_colours(data)
    pictures = [thumbnail(data, s, colours, trend_data.series_changes(data, s), tmp_path / f"{i}.png")
                for i, s in enumerate(data.series)]
    with thumbnails_drawn(pictures, workers=2):
        pass
    assert all(p.path.read_bytes() == render_png(p) for p in pictures)


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


@pytest.mark.long
def test_every_figure_is_one_plotly_accepts(tmp_path: Path) -> None:
    data = synthetic_trend(cases=4, runs=10)
    write_site(data, tmp_path)
    count = 0
    for page in (tmp_path / CASES_DIR).glob("*.html"):
        for spec in _figures(page).values():
            go.Figure(spec)  # raises on a property plotly does not know
            count += 1
    assert count == 4


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
    assert html.count('<img class="chart"') == 2
    case_page = (site.directory / case_page_name(series[0])).read_text(encoding="utf-8")
    assert "<script>alert(1)" not in case_page and len(_figures(site.directory / case_page_name(series[0]))) == 1


def test_a_file_where_the_site_should_go_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "site"
    target.write_text("not a folder")
    with pytest.raises(TrendPageError, match="not a directory"):
        write_site(synthetic_trend(cases=1, runs=2), target)



def test_card_titles_are_the_cases_parameters_and_keep_the_test_name_only_where_two_share_them() -> None:
    def series(case_id: str) -> CaseSeries:
        return CaseSeries(case_id, "nvidia-h200", "batched", "fp32", "TFLOPS", "TFLOPS", ())

    cases = [series("perf_tests/test_batched.py::test_batched_gemm_perf[pointers-fp32-1000x64x64x64-cold]"),
             series("perf_tests/test_batched.py::test_batched_gemm_perf[pointers-fp32-1024x256x256x256-cold]"),
             series("perf_tests/test_a.py::test_a_perf[fp32-64-cold]"),
             series("perf_tests/test_b.py::test_b_perf[fp32-64-cold]"), series("perf_tests/test_c.py::test_c")]
    assert list(card_titles(cases).values()) == [
        "pointers-fp32-1000x64x64x64-cold", "pointers-fp32-1024x256x256x256-cold", "test_a_perf[fp32-64-cold]",
        "test_b_perf[fp32-64-cold]", "test_c"]
