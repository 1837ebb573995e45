"""A case page's chart as a plotly figure: the series with its spread, baseline and gate band, hosts, the
figure the gate judges (at max clock for a case judged on cycles, the measured one beside it), change points and
every version, kernel, method and basis change.

The figure is written as plotly's JSON figure spec (traces and layout as plotly.js takes them) and handed to
the page, which only calls ``Plotly.newPlot`` on it. It is built as plain data rather than through plotly's
graph objects, whose validation of every property costs more than the rest of the site's build; the tests
hand every figure to ``plotly.graph_objects.Figure``, which rejects a property plotly does not know. The x
axis of every chart of a GPU model is the run number among that model's runs, so the charts of one model
line up (the small multiples of ``thumbnails`` use the same numbers); the date is in the tooltip.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import plotly.io as pio
from plotly.colors import qualitative

from gpuperf.trend.data import Annotation, CaseSeries, SeriesPoint, TrendData
from gpuperf.trend.thumbnails import ANNOTATION_COLOURS, CHANGE_POINT_COLOUR, RECORDING_STATUSES
from gpuperf.untrusted import plotly_text
from gpuperf.vocabulary import Status

#: Enough distinct colours for a fleet; a larger fleet reuses them in order.
HOST_PALETTE: tuple[str, ...] = tuple(qualitative.Dark24) + tuple(qualitative.Light24)
#: Longest kernel or version text drawn on a chart's axis; the case page lists every change in full.
AXIS_TEXT_CHARS = 60
#: A plotly trace, as plotly.js takes it.
Trace = dict[str, Any]


def host_colours(hosts: Sequence[str]) -> dict[str, str]:
    return {host: HOST_PALETTE[i % len(HOST_PALETTE)] for i, host in enumerate(hosts)}


def _numbers(data: TrendData, points: Sequence[SeriesPoint]) -> npt.NDArray[np.int32]:
    return np.array([data.run_number(point.run_id) for point in points], dtype=np.int32)



def _values(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def _scatter(x: npt.NDArray[Any], y: npt.NDArray[Any], **properties: Any) -> Trace:
    return {"type": "scatter", "x": x, "y": y, **properties}


def _steps(points: Sequence[SeriesPoint]) -> list[SeriesPoint]:
    """The points where the baseline or its band changes, and the last one: enough for a step line."""
    return [p for i, p in enumerate(points)
            if i == 0 or i == len(points) - 1
            or (p.baseline, p.tolerance) != (points[i - 1].baseline, points[i - 1].tolerance)]


def _baseline_traces(data: TrendData, series: CaseSeries) -> list[Trace]:
    """The baseline each run was judged against, as a step line, and the gate's band around it."""
    judged = _steps([p for p in series.points if p.baseline is not None])
    if not judged:
        return []
    x = _numbers(data, judged)
    base = _values([p.baseline for p in judged])
    traces = []
    if all(p.tolerance is not None for p in judged):
        band = _values([p.tolerance for p in judged])
        traces.append(_scatter(x, base * (1 - band), mode="lines", line={"width": 0, "shape": "hv"},
                               hoverinfo="skip", showlegend=False, legendgroup="band"))
        traces.append(_scatter(x, base * (1 + band), mode="lines", line={"width": 0, "shape": "hv"},
                               fill="tonexty", fillcolor="rgba(44,160,44,0.12)", name="gate band",
                               legendgroup="band", hoverinfo="skip"))
    traces.append(_scatter(x, base, mode="lines", name="baseline", hoverinfo="y",
                           line={"color": "#2ca02c", "dash": "dash", "width": 1.5, "shape": "hv"}))
    return traces


def _spread_trace(data: TrendData, series: CaseSeries) -> Trace | None:
    """The sample spread around each figure (± half the IQR), as one shaded band."""
    spread = [p for p in series.points if p.value is not None and p.spread is not None]
    if not spread:
        return None
    x = _numbers(data, spread)
    value = _values([p.value for p in spread])
    half = _values([p.spread for p in spread]) / 2
    return _scatter(np.concatenate([x, x[::-1]]), np.concatenate([value * (1 + half), (value * (1 - half))[::-1]]),
                    fill="toself", mode="lines", line={"width": 0}, fillcolor="rgba(31,119,180,0.15)",
                    name="spread (IQR)", hoverinfo="skip")


def _tooltip(data: TrendData, series: CaseSeries, point: SeriesPoint) -> str:
    run = data.run(point.run_id)
    commit = (run.commit[:12] + (" (dirty)" if run.dirty else "")) if run.commit else "unknown"
    spread = f" ± {point.spread * 50:.2f} %" if point.spread is not None else ""
    value = "—" if point.value is None else f"{point.value:.4g}"
    if point.measured is not None:
        value += f" at max clock (measured {point.measured:.4g})"
    shown = plotly_text  # every field comes from a results file: text, never markup (a branch may be "fix<br>PASS")
    return (f"run {data.run_number(run.run_id)} · {shown(run.started)}<br>{value} {shown(series.unit)}{spread} · "
            f"{shown(point.status)}<br>host {shown(run.host)}<br>commit {shown(commit)} · branch "
            f"{shown(run.branch or '—')}<br>CI job {shown(run.ci_job or '—')}"
            f"<br>kernels {shown(' + '.join(point.kernels) or '—')}")


def _host_traces(data: TrendData, series: CaseSeries, colours: dict[str, str]) -> list[Trace]:
    """The figures, a marker per run, one trace per host so each host has its colour and its legend entry."""
    per_host: dict[str, list[SeriesPoint]] = {}
    for point in series.points:
        if point.value is not None:
            per_host.setdefault(data.run(point.run_id).host, []).append(point)
    return [_scatter(_numbers(data, points), _values([p.value for p in points]), name=plotly_text(host),
                     legendgroup=host, mode="markers", marker={"color": colours[host], "size": 7},
                     text=[_tooltip(data, series, p) for p in points], hovertemplate="%{text}<extra></extra>")
            for host, points in per_host.items()]


def _status_traces(data: TrendData, series: CaseSeries) -> list[Trace]:
    """Rings around the runs that recorded a baseline and crosses on failing runs."""
    traces = []
    for name, wanted, marker in (
            ("baseline recording run", RECORDING_STATUSES, {"symbol": "diamond-open", "color": "#111", "size": 11}),
            ("failing run", Status.FAILING, {"symbol": "x-thin-open", "color": "#b00", "size": 10})):
        points = [p for p in series.points if p.value is not None and p.status in wanted]
        if points:
            traces.append(_scatter(_numbers(data, points), _values([p.value for p in points]), mode="markers",
                                   name=name, marker={**marker, "line": {"width": 1.5}}, hoverinfo="skip"))
    return traces


def _measured_trace(data: TrendData, series: CaseSeries) -> Trace | None:
    """Where the figure drawn is at max clock (the case is judged on cycles), the measured figure beside it."""
    measured = [p for p in series.points if p.measured is not None]
    if not measured:
        return None
    return _scatter(_numbers(data, measured), _values([p.measured for p in measured]), mode="markers",
                    name="measured (at the host's clock)", marker={"symbol": "circle-open", "color": "#555", "size": 7},
                    hovertemplate="measured %{y:.4g}<extra></extra>")


def _level_trace(data: TrendData, series: CaseSeries) -> Trace:
    """The series in run order, as a thin line under the host markers, so a step reads at a glance."""
    points = [p for p in series.points if p.value is not None]
    return _scatter(_numbers(data, points), _values([p.value for p in points]), mode="lines",
                    line={"color": "rgba(80,80,80,0.45)", "width": 1}, hoverinfo="skip", showlegend=False)


def _short(text: str) -> str:
    return text if len(text) <= AXIS_TEXT_CHARS else text[:AXIS_TEXT_CHARS - 1] + "…"


def _markers(data: TrendData, series: CaseSeries,
             marks: Sequence[Annotation]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Vertical lines and their labels: change points (red, at the top) and what changed (on the axis)."""
    shapes: list[dict[str, Any]] = []
    labels: list[dict[str, Any]] = []
    for cp in series.change_points:
        x = data.run_number(cp.run_id) - 0.5
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": CHANGE_POINT_COLOUR, "width": 2}})
        labels.append({"x": x, "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom", "showarrow": False,
                       "text": f"change point {cp.relative * 100:+.1f} %",
                       "font": {"color": CHANGE_POINT_COLOUR, "size": 11}})
    stacked: dict[str, int] = {}
    for mark in marks:
        x = data.run_number(mark.run_id) - 0.5
        colour = ANNOTATION_COLOURS.get(mark.kind, "#444")
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": colour, "width": 1, "dash": "dot"}})
        level = stacked.get(mark.run_id, 0)
        stacked[mark.run_id] = level + 1
        labels.append({"x": x, "y": 0.02 + 0.07 * level, "xref": "x", "yref": "paper", "xanchor": "left",
                       "yanchor": "bottom", "showarrow": False, "text": plotly_text(_short(mark.text)),
                       "hovertext": plotly_text(mark.text), "font": {"color": colour, "size": 10},
                       "bgcolor": "rgba(255,255,255,0.8)"})
    return shapes, labels


def _x_range(data: TrendData, series: CaseSeries) -> list[float]:
    """The series' own runs, half a run of margin each side (plotly's autorange pads far more)."""
    numbers = [data.run_number(p.run_id) for p in series.points] or [1]
    return [min(numbers) - 0.5, max(numbers) + 0.5]


def case_figure(data: TrendData, series: CaseSeries, colours: dict[str, str], marks: Sequence[Annotation]) -> str:
    """The case page's chart, as plotly's JSON: spread band, gate band, baseline, hosts, max-clock figures,
    every change marked."""
    traces: list[Trace] = []
    spread = _spread_trace(data, series)
    if spread is not None:
        traces.append(spread)
    traces += _baseline_traces(data, series)
    traces.append(_level_trace(data, series))
    traces += _host_traces(data, series, colours)
    traces += _status_traces(data, series)
    measured = _measured_trace(data, series)
    if measured is not None:
        traces.append(measured)
    shapes, labels = _markers(data, series, marks)
    layout = {"height": 520, "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "shapes": shapes,
              "annotations": labels, "xaxis": {"title": {"text": f"run ({series.gpu_model})"},
                                               "range": _x_range(data, series)},
              "yaxis": {"title": {"text": series.unit}}, "legend": {"orientation": "h", "y": -0.15},
              "hovermode": "closest", "plot_bgcolor": "#fafafa"}
    text: str = pio.to_json({"data": traces, "layout": layout}, validate=False, pretty=False)
    return text
