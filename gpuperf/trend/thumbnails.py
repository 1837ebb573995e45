"""The index's small multiples as PNG images drawn by matplotlib when the site is built.

The index shows every case at once, so its charts need no interaction: a picture per case, linked to the
case's interactive page, opens at once in a browser (no charting library to parse, no figure to lay out)
and keeps the index small whatever the number of runs. Each picture shows the figures in run order with a
colour per host, the baseline as a dashed step line, ◆ on the runs that recorded a baseline, ✕ on failing
runs, change points as red lines with their size, and version, kernel and method changes as dotted lines.

``thumbnail`` turns a series into plain arrays (``Thumbnail``, picklable); ``thumbnails_drawn`` draws them
in other processes while the caller writes the pages, so a large site is built on every core. One matplotlib
figure per process is reused from picture to picture: making a figure and its axis ticks costs more than
drawing a few lines on it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import io
import math
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuperf.trend.data import DRAWN_DELTA, Annotation, CaseSeries, SeriesPoint, TrendData
from gpuperf.store.processes import end_pool, forking, pooled, quiet_worker
from gpuperf.store.atomic import write_atomically
from gpuperf.vocabulary import Status

#: The picture's size in CSS pixels (the index's grid cell) and how many image pixels per CSS pixel.
WIDTH_PX, HEIGHT_PX, PIXEL_RATIO = 340, 150, 1.0
#: Up to this many runs a picture marks every run (a host that ran once is a dot); past it, each host is a line.
SMALL_MARKER_RUNS = 200
#: A site with fewer pictures than this is drawn in this process (starting workers would cost more).
PARALLEL_FROM = 24
#: Pictures handed to a worker at a time: small enough that the workers and this process finish together.
CHUNK = 6
CHANGE_POINT_COLOUR = "#d62728"
ANNOTATION_COLOURS = {"version": "#9467bd", "kernel": "#ff7f0e", "method": "#8c564b", "basis": "#17becf"}
BASELINE_COLOUR = "#2ca02c"
RECORDING_STATUSES = frozenset({Status.UPDATED, Status.NOT_RECORDED})
#: The experiments' runs (``TrendRun.experiment``): drawn apart, as open grey markers, under this name.
EXPERIMENTS = "experiment (not the fleet's baseline)"
EXPERIMENT_COLOUR = "#888888"
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Thumbnail:
    """What one small multiple draws, as arrays in run numbers (x) and the series' unit (y)."""

    path: Path
    hosts: tuple[tuple[str, Floats, Floats], ...]  # (colour, x, y) per host
    baseline: tuple[Floats, Floats]  # the steps of the baseline each run was judged against
    recording: tuple[Floats, Floats]
    failing: tuple[Floats, Floats]
    experiments: tuple[Floats, Floats]  # the experiments' runs (``EXPERIMENTS``)
    change_points: tuple[tuple[float, str], ...]  # (x, label)
    changes: tuple[tuple[float, str], ...]  # (x, colour)
    x_range: tuple[float, float]
    markers: bool


def _xy(data: TrendData, points: Sequence[SeriesPoint], values: Sequence[float | None]) -> tuple[Floats, Floats]:
    x = np.array([data.run_number(p.run_id) for p in points], dtype=np.float64)
    return x, np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def _baseline_steps(points: Sequence[SeriesPoint]) -> list[SeriesPoint]:
    """The points where the baseline changes, and the last one: enough for a step line."""
    return [p for i, p in enumerate(points)
            if i in (0, len(points) - 1) or p.baseline != points[i - 1].baseline]


def thumbnail(data: TrendData, series: CaseSeries, colours: dict[str, str], marks: Sequence[Annotation],
              path: Path) -> Thumbnail:
    """The arrays of ``series``' small multiple, to be drawn into ``path``: on the basis its chart draws
    (``CaseSeries.drawn``), a line per host in its class's colour, the experiments' runs apart."""
    delta = series.drawn == DRAWN_DELTA
    valued = series.drawn_points
    per_host: dict[str, list[tuple[SeriesPoint, float]]] = {}
    trials: list[tuple[SeriesPoint, float]] = []
    for point, y in valued:
        run = data.run(point.run_id)
        (trials if run.experiment else per_host.setdefault(run.host, [])).append((point, y))
    hosts = tuple((colours[host], *_xy(data, [p for p, _ in members], [y for _, y in members]))
                  for host, members in per_host.items())
    steps = _baseline_steps([p for p in series.points if p.baseline is not None and (not delta or p.delta is not None)
                             and not data.is_experiment(p)])  # an experiment's baseline is not the fleet's
    recording = [(p, y) for p, y in valued if p.status in RECORDING_STATUSES and not data.is_experiment(p)]
    failing = [(p, y) for p, y in valued if p.status in Status.FAILING and not data.is_experiment(p)]
    numbers = [data.run_number(p.run_id) for p in series.points] or [1]
    return Thumbnail(
        path=path, hosts=hosts,
        baseline=_xy(data, steps, [0.0 if delta else p.baseline for p in steps]),
        recording=_xy(data, [p for p, _ in recording], [y for _, y in recording]),
        failing=_xy(data, [p for p, _ in failing], [y for _, y in failing]),
        experiments=_xy(data, [p for p, _ in trials], [y for _, y in trials]),
        change_points=tuple((data.run_number(cp.run_id) - 0.5, f"{cp.relative * 100:+.1f} %")
                            for cp in series.change_points),
        changes=tuple((data.run_number(m.run_id) - 0.5, ANNOTATION_COLOURS.get(m.kind, "#444")) for m in marks),
        x_range=(min(numbers) - 0.5, max(numbers) + 0.5), markers=len(series.points) <= SMALL_MARKER_RUNS)


@functools.lru_cache(maxsize=1)
def _canvas() -> tuple[Any, Any]:
    """This process's one figure and axes (matplotlib's object API: no pyplot, no global backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(WIDTH_PX / 100, HEIGHT_PX / 100), dpi=100 * PIXEL_RATIO)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.14, 0.15, 0.84, 0.75), facecolor="#fafafa")
    axes.tick_params(labelsize=6.5, length=2, pad=1.5)
    axes.yaxis.set_major_locator(MaxNLocator(4))
    axes.xaxis.set_major_locator(MaxNLocator(6, integer=True))
    axes.ticklabel_format(axis="y", useOffset=False, style="plain")
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    return figure, axes


def _y_limits(picture: Thumbnail) -> tuple[float, float]:
    values = np.concatenate([y for _, _, y in picture.hosts] + [picture.baseline[1], picture.experiments[1],
                                                                  np.array([math.nan])])
    values = values[np.isfinite(values)]
    if not values.size:
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    pad = (high - low) * 0.08 or abs(high) * 0.02 or 1.0
    return low - pad, high + pad * 2.2  # room above for a change point's label


def _vertical_lines(axes: Any, picture: Thumbnail) -> Any:
    """The change lines (dotted) and change points (red) as one collection, from the axes' bottom to its top."""
    from matplotlib.collections import LineCollection

    marks = [(x, colour, ":", 0.9) for x, colour in picture.changes]
    marks += [(x, CHANGE_POINT_COLOUR, "-", 1.4) for x, _ in picture.change_points]
    return LineCollection([[(x, 0.0), (x, 1.0)] for x, _, _, _ in marks], colors=[m[1] for m in marks],
                          linestyles=[m[2] for m in marks], linewidths=[m[3] for m in marks],
                          transform=axes.get_xaxis_transform())


def render_png(picture: Thumbnail) -> bytes:
    """The picture as PNG bytes. Artists are made directly and added without updating the data limits
    (``plot`` and ``axvline`` cost more than drawing here); the limits are set from the picture."""
    from matplotlib.lines import Line2D

    figure, axes = _canvas()
    for artist in [*axes.lines, *axes.texts, *axes.collections]:
        artist.remove()
    lines = []
    if picture.baseline[0].size:
        lines.append(Line2D(*picture.baseline, drawstyle="steps-post", color=BASELINE_COLOUR, linestyle="--",
                            linewidth=0.9))
    lines += [Line2D(runs, values, color=colour, linewidth=0.9, marker="o" if picture.markers else None,
                     markersize=2.2) for colour, runs, values in picture.hosts]
    lines.append(Line2D(*picture.recording, linestyle="none", marker="D", markersize=4, markerfacecolor="none",
                        markeredgecolor="#111", markeredgewidth=0.9))
    lines.append(Line2D(*picture.failing, linestyle="none", marker="x", markersize=4, color="#b00",
                        markeredgewidth=0.9))
    lines.append(Line2D(*picture.experiments, linestyle="none", marker="o", markersize=3, markerfacecolor="none",
                        markeredgecolor=EXPERIMENT_COLOUR, markeredgewidth=0.8))
    for artist in [*lines, _vertical_lines(axes, picture)]:
        axes.add_artist(artist)
    for where, label in picture.change_points:
        axes.text(where, 1.0, label, transform=axes.get_xaxis_transform(), color=CHANGE_POINT_COLOUR, fontsize=6.5,
                  ha="right", va="top")
    axes.set_xlim(*picture.x_range)
    axes.set_ylim(*_y_limits(picture))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None}, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def _write(pictures: Sequence[Thumbnail]) -> int:
    for picture in pictures:
        write_atomically(picture.path, render_png(picture), durable=False)
    return len(pictures)


def _spare_cores() -> int:
    """The cores this process may use, less the one that goes on writing the pages."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores - 1


@contextmanager
def thumbnails_drawn(pictures: Sequence[Thumbnail], workers: int | None = None) -> Iterator[None]:
    """Draw every picture into its file while the body runs: in ``workers`` other processes (default: every
    core but this one's) for a site of ``PARALLEL_FROM`` pictures or more, else here before the body. On
    leaving, this process draws the pictures no worker has started yet, then waits for the others; a failure
    to draw one is raised."""
    workers = _spare_cores() if workers is None else workers
    if workers < 1 or len(pictures) < PARALLEL_FROM:
        _write(pictures)
        yield
        return
    chunks = [pictures[i:i + CHUNK] for i in range(0, len(pictures), CHUNK)]
    _canvas()  # matplotlib imported and the figure made once, before the workers fork from this process
    with ProcessPoolExecutor(max_workers=workers, initializer=quiet_worker) as pool:
        pooled(pool)
        with forking():  # the submits fork the workers
            drawing = [(chunk, pool.submit(_write, chunk)) for chunk in chunks]
        try:
            yield
            for chunk, future in reversed(drawing):
                if future.cancel():
                    _write(chunk)
            for _, future in drawing:
                if not future.cancelled():
                    future.result()
        except BaseException:  # Ctrl-C, SIGTERM (processes.interruptible), a failed page: no worker outlives it
            end_pool(pool)
            raise
