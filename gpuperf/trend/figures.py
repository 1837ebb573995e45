"""A case page's chart as a plotly figure: the series with its spread, baseline and gate band, its hosts
coloured by class, its experiments apart, change points and every version, kernel, method and basis change.
It is drawn on one basis (``CaseSeries.drawn``): the measured figure where every run was judged on time, else
each run's Δ to its baseline entry as the gate judged it, so no point jumps when a run's basis changes.

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

from gpuperf.trend.data import DRAWN_DELTA, DRAWN_FIGURE, Annotation, CaseSeries, SeriesPoint, TrendData
from gpuperf.trend.thumbnails import (ANNOTATION_COLOURS, CHANGE_POINT_COLOUR, EXPERIMENT_COLOUR, EXPERIMENTS,
                                      RECORDING_STATUSES)
from gpuperf.untrusted import plotly_text
from gpuperf.vocabulary import Status

#: Enough distinct colours for a fleet; a larger fleet reuses them in order.
HOST_PALETTE: tuple[str, ...] = tuple(qualitative.Dark24) + tuple(qualitative.Light24)
#: Longest kernel or version text drawn on a chart's axis; the case page lists every change in full.
AXIS_TEXT_CHARS = 60
#: A plotly trace, as plotly.js takes it.
Trace = dict[str, Any]


def host_colours(data: TrendData) -> dict[str, str]:
    """Each host's colour: its class's (``TrendData.host_classes``), so a fleet's forty GPUs of two kinds are
    two colours, not forty."""
    classes = class_colours(data)
    return {host: classes[name] for name, hosts in data.host_classes.items() for host in hosts}


def class_colours(data: TrendData) -> dict[str, str]:
    """Each host class's colour (the legend)."""
    return {name: HOST_PALETTE[i % len(HOST_PALETTE)] for i, name in enumerate(data.host_classes)}


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


def baseline_lines(series: CaseSeries, judged: Sequence[SeriesPoint]) -> tuple[npt.NDArray[np.float64],
                                                                                npt.NDArray[np.float64] | None]:
    """The baseline and the band's half-width at each of ``judged`` on the series' chart: the entry's figure and
    ``figure × tolerance``, or, where the chart draws Δ, 0 and the tolerance in percent."""
    band = _values([p.tolerance for p in judged]) if all(p.tolerance is not None for p in judged) else None
    if series.drawn == DRAWN_DELTA:
        return np.zeros(len(judged)), None if band is None else 100 * band
    base = _values([p.baseline for p in judged])
    return base, None if band is None else base * band


def baseline_points(data: TrendData, series: CaseSeries) -> list[SeriesPoint]:
    """The points whose baseline the chart draws: judged against one (with a Δ, where it draws Δ), but an
    experiment's (its baseline is not the fleet's)."""
    return [p for p in series.points if p.baseline is not None
            and (series.drawn == DRAWN_FIGURE or p.delta is not None) and not data.is_experiment(p)]


def _baseline_traces(data: TrendData, series: CaseSeries) -> list[Trace]:
    """The baseline each run was judged against, as a step line, and the gate's band around it."""
    judged = _steps(baseline_points(data, series))
    if not judged:
        return []
    x = _numbers(data, judged)
    base, half = baseline_lines(series, judged)
    traces = []
    if half is not None:
        traces.append(_scatter(x, base - half, mode="lines", line={"width": 0, "shape": "hv"},
                               hoverinfo="skip", showlegend=False, legendgroup="band"))
        traces.append(_scatter(x, base + half, mode="lines", line={"width": 0, "shape": "hv"},
                               fill="tonexty", fillcolor="rgba(44,160,44,0.12)", name="gate band",
                               legendgroup="band", hoverinfo="skip"))
    traces.append(_scatter(x, base, mode="lines", name="baseline", hoverinfo="y",
                           line={"color": "#2ca02c", "dash": "dash", "width": 1.5, "shape": "hv"}))
    return traces


def _spread_trace(data: TrendData, series: CaseSeries) -> Trace | None:
    """The sample spread around each figure (± half the IQR), as one shaded band."""
    spread = [p for p, _ in series.drawn_points if p.spread is not None]
    if not spread:
        return None
    x = _numbers(data, spread)
    half = _values([p.spread for p in spread]) / 2
    if series.drawn == DRAWN_DELTA:  # the figure's spread, in points of the Δ: (1 + Δ)(1 ± s/2) − 1
        ratio = 1 + _values([p.delta for p in spread])
        low, high = 100 * (ratio * (1 - half) - 1), 100 * (ratio * (1 + half) - 1)
    else:
        value = _values([p.value for p in spread])
        low, high = value * (1 - half), value * (1 + half)
    return _scatter(np.concatenate([x, x[::-1]]), np.concatenate([high, low[::-1]]),
                    fill="toself", mode="lines", line={"width": 0}, fillcolor="rgba(31,119,180,0.15)",
                    name="spread (IQR)", hoverinfo="skip")


class Tooltips:
    """The tooltip of each point: the run's part (its number, date, host, commit, branch, CI job) made once per
    run for every chart of a site, the point's own (figure, Δ, spread, status, kernels) per point. Every field
    comes from a results file: shown as text, never markup (``plotly_text``: a branch may be "fix<br>PASS")."""

    def __init__(self, data: TrendData) -> None:
        self.data = data
        self._runs: dict[str, tuple[str, str]] = {}
        self._texts: dict[str, str] = {}

    def _shown(self, text: str) -> str:
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = plotly_text(text)
        return found

    def _run(self, run_id: str) -> tuple[str, str]:
        found = self._runs.get(run_id)
        if found is None:
            run, shown = self.data.run(run_id), plotly_text
            commit = (run.commit[:12] + (" (dirty)" if run.dirty else "")) if run.commit else "unknown"
            experiment = f"<br>experiment: {shown(run.experiment)}" if run.experiment else ""
            found = self._runs[run_id] = (
                f"run {self.data.run_number(run_id)} · {shown(run.started)}<br>",
                f"<br>host {shown(run.host)} ({shown(run.host_class)})<br>commit {shown(commit)} · branch "
                f"{shown(run.branch or '—')}<br>CI job {shown(run.ci_job or '—')}{experiment}<br>kernels ")
        return found

    def __call__(self, series: CaseSeries, point: SeriesPoint) -> str:
        head, tail = self._run(point.run_id)
        spread = f" ± {point.spread * 50:.2f} %" if point.spread is not None else ""
        value = "—" if point.value is None else f"{point.value:.4g}"
        if point.measured is not None:
            value += f" at max clock (measured {point.measured:.4g})"
        delta = "" if point.delta is None else f" · Δ {100 * point.delta:+.2f} % to its baseline"
        return (f"{head}{value} {self._shown(series.unit)}{spread}{delta} · {self._shown(point.status)}{tail}"
                f"{self._shown(' + '.join(point.kernels) or '—')}")


def _host_traces(data: TrendData, series: CaseSeries, colours: dict[str, str], tip: Tooltips) -> list[Trace]:
    """The figures, a marker per run, one trace per host class (its colour and its legend entry; the tooltip
    names the host), and the experiments' runs apart, as open grey markers."""
    per_class: dict[str, list[tuple[SeriesPoint, float]]] = {}
    for point, y in series.drawn_points:
        run = data.run(point.run_id)
        per_class.setdefault(EXPERIMENTS if run.experiment else run.host_class, []).append((point, y))
    traces = []
    for name, members in per_class.items():
        points = [point for point, _ in members]
        marker = ({"color": EXPERIMENT_COLOUR, "size": 7, "symbol": "circle-open"} if name == EXPERIMENTS else
                  {"color": colours[data.run(points[0].run_id).host], "size": 7})
        traces.append(_scatter(_numbers(data, points), _values([y for _, y in members]), name=plotly_text(name),
                               legendgroup=name, mode="markers", marker=marker,
                               text=[tip(series, p) for p in points], hovertemplate="%{text}<extra></extra>"))
    return traces


def _status_traces(data: TrendData, series: CaseSeries) -> list[Trace]:
    """Rings around the runs that recorded a baseline and crosses on failing runs (not an experiment's)."""
    traces = []
    for name, wanted, marker in (
            ("baseline recording run", RECORDING_STATUSES, {"symbol": "diamond-open", "color": "#111", "size": 11}),
            ("failing run", Status.FAILING, {"symbol": "x-thin-open", "color": "#b00", "size": 10})):
        members = [(p, y) for p, y in series.drawn_points if p.status in wanted and not data.is_experiment(p)]
        if members:
            points = [p for p, _ in members]
            traces.append(_scatter(_numbers(data, points), _values([y for _, y in members]), mode="markers",
                                   name=name, marker={**marker, "line": {"width": 1.5}}, hoverinfo="skip"))
    return traces


def _level_trace(data: TrendData, series: CaseSeries) -> Trace:
    """The series in run order, as a thin line under the host markers, so a step reads at a glance."""
    points = series.drawn_points
    return _scatter(_numbers(data, [p for p, _ in points]), _values([y for _, y in points]), mode="lines",
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


def case_figure(data: TrendData, series: CaseSeries, colours: dict[str, str], marks: Sequence[Annotation],
                tip: Tooltips | None = None) -> str:
    """The case page's chart, as plotly's JSON: spread band, gate band, baseline, hosts by class, experiments,
    every change marked; its y axis names what it draws (``CaseSeries.drawn_basis``)."""
    tip = tip or Tooltips(data)
    traces: list[Trace] = []
    spread = _spread_trace(data, series)
    if spread is not None:
        traces.append(spread)
    traces += _baseline_traces(data, series)
    traces.append(_level_trace(data, series))
    traces += _host_traces(data, series, colours, tip)
    traces += _status_traces(data, series)
    shapes, labels = _markers(data, series, marks)
    layout = {"height": 520, "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "shapes": shapes,
              "annotations": labels, "xaxis": {"title": {"text": f"run ({series.gpu_model})"},
                                               "range": _x_range(data, series)},
              "yaxis": {"title": {"text": plotly_text(series.drawn_basis)}}, "legend": {"orientation": "h", "y": -0.15},
              "hovermode": "closest", "plot_bgcolor": "#fafafa"}
    text: str = pio.to_json({"data": traces, "layout": layout}, validate=False, pretty=False)
    return text
