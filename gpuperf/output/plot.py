"""PNG plots of a run or a baseline: throughput vs problem size per family, and a roofline of the GPU.

Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas, never through ``pyplot``: no
global backend switch, no display needed, and nothing left open between calls.

Every point is drawn from what a record (or a baseline entry) says the case is: its kernel, precision,
shape, FLOPs and bytes, written when it was measured. Nothing is guessed from a case id, so a kernel whose
precision its id does not spell (the WMMA kernel is FP16) is drawn against its own peak.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullFormatter

from gpuperf.store.records import Record
from gpuperf.untrusted import terminal
from gpuperf.vocabulary import Family, Metric, Precision

DPI = 150
FIGSIZE = (10.0, 6.0)  # inches: 1500 × 900 px at DPI
#: Throughput figures are wider (×1 panel, ×2 panels): the legend stands beside the axes.
THROUGHPUT_WIDTH = {1: 1.6, 2: 2.4}

#: Human names of the compute ceilings (the keys of ``peaks["compute_tflops"]``).
CEILING_NAMES = {
    Precision.FP32: "FP32 vector", Precision.TF32: "TF32 tensor", Precision.FP16: "FP16 tensor",
    Precision.BF16: "BF16 tensor", Precision.FP64: "FP64 tensor", Precision.FP8: "FP8 tensor",
    Precision.INT8: "INT8 tensor",
}
_MARKERS = "osD^v<>ph*"
#: A shape with one dimension this many times another is drawn as its own (tall/wide/long-K) series.
ASPECT_FACTOR = 4


class EntryLike(Protocol):
    """What a baseline entry offers (``gpuperf.store.baseline.Entry``; ``samples``, ``flush``, ``spread`` if there)."""

    @property
    def metric(self) -> str: ...

    @property
    def value(self) -> float: ...

    @property
    def unit(self) -> str: ...


@dataclass(frozen=True)
class _Point:
    x: float  # FLOPs or bytes per call
    y: float  # TFLOPS or GB/s
    series: str


# --- public API ----------------------------------------------------------------------------------------


#: A label drawn from a case's text (kernel, family, GPU) is one line of at most this many characters.
LABEL_WIDTH = 60
Plotted = TypeVar("Plotted")


def _text_as_written(plot: Callable[..., Plotted]) -> Callable[..., Plotted]:
    """Draw every text as written: kernel names, families and GPU names come from the tests of whoever wrote
    them, and matplotlib would parse ``$…$`` in one as mathtext (a malformed one raises when the figure is
    saved)."""
    @functools.wraps(plot)
    def drawn(*args: Any, **kwargs: Any) -> Plotted:
        with matplotlib.rc_context({"text.parse_math": False}):
            return plot(*args, **kwargs)
    return drawn


_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def decade_label(value: float, _position: object = None) -> str:
    """A log tick as plain text, ``10³`` at a power of ten: matplotlib's are mathtext, off (``_text_as_written``)."""
    exponent = math.log10(value) if value > 0 and math.isfinite(value) else 0.5
    return "10" + str(round(exponent)).translate(_SUPERSCRIPTS) if abs(exponent - round(exponent)) < 1e-9 else ""


def _log_axis(axis: Any) -> None:
    axis.set_major_formatter(FuncFormatter(decade_label))
    axis.set_minor_formatter(NullFormatter())


def plot_label(text: str) -> str:
    """Untrusted text as a plot label: one line, no control character, cut (``untrusted.terminal``)."""
    return terminal(text, LABEL_WIDTH)


@_text_as_written
def plot_throughput(records: Sequence[Record], out_dir: Path, gpu: str = "",
                    peaks: Mapping[str, Any] | None = None) -> list[Path]:
    """One ``throughput-<family>.png`` per family: TFLOPS vs FLOPs (GB/s vs bytes for bandwidth-bound
    cases) on a log x axis, one series per code path, the applicable peaks as dashed lines.

    A family gated on both metrics (e.g. batched GEMM and GEMV) gets two panels in its one PNG. Ratio
    entries (``#vs_cublas``) and records without FLOP/byte counts are left out. Peaks come from each
    record's ``peak`` or, failing that, from ``peaks`` (``{"memory_gbps", "compute_tflops"}``).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    families: dict[str, list[Record]] = {}
    for record in records:
        if record.metric in (Metric.TFLOPS, Metric.GBPS) and _size(record) is not None and _is_number(record.value):
            families.setdefault(record.family or Family.OTHER, []).append(record)
    written = []
    for family in sorted(families):
        group = families[family]
        metrics = [m for m in (Metric.TFLOPS, Metric.GBPS) if any(r.metric == m for r in group)]
        fig = _figure(width=FIGSIZE[0] * THROUGHPUT_WIDTH[len(metrics)])
        axes = fig.subplots(1, len(metrics), squeeze=False)[0]
        for ax, metric in zip(axes, metrics):
            _throughput_panel(ax, [r for r in group if r.metric == metric], metric, peaks)
        fig.suptitle(plot_label(f"{family}: throughput vs problem size" + (f" — {gpu}" if gpu else "")))
        path = out_dir / f"throughput-{_slug(family)}.png"
        fig.savefig(path, dpi=DPI)
        written.append(path)
    return written


@_text_as_written
def plot_roofline(records: Sequence[Record], peaks: Mapping[str, Any] | None, out_dir: Path,
                  gpu: str = "") -> Path:
    """``roofline.png``: log-log, x = arithmetic intensity (FLOP/byte), y = TFLOPS; the memory ceiling
    (slope = peak bandwidth), one compute ceiling per distinct precision peak, every case a point coloured
    by family with a marker per precision. Without ``peaks`` the points are drawn alone and the title says
    so."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for record in records:
        placed = _roofline_point(record)
        if placed is not None:
            points.setdefault((record.family or Family.OTHER, _precision(record)), []).append(placed)
    fig = _figure()
    ax = fig.add_subplot()
    handles = _scatter_points(ax, points)
    intensities = [x for pts in points.values() for x, _ in pts]
    values = [y for pts in points.values() for _, y in pts]
    memory = _positive(peaks.get("memory_gbps")) if peaks else None
    ceilings = _compute_ceilings(peaks)
    ridges = [tflops * 1000.0 / memory for tflops, _ in ceilings] if memory else []
    x_lo = min(intensities + ridges + [1.0]) / 4
    x_hi = max(intensities + ridges + [1.0]) * 4
    if memory:
        x_top = max(ridges) if ridges else x_hi  # the slope ends where the highest compute roof starts
        handles += ax.plot([x_lo, x_top], [memory * x_lo / 1000.0, memory * x_top / 1000.0], color="black",
                           linewidth=1.6, label=f"memory {memory:.0f} GB/s", zorder=2)
    for index, (tflops, name) in enumerate(ceilings):
        start = tflops * 1000.0 / memory if memory else x_lo
        colour = _CEILING_COLOURS[index % len(_CEILING_COLOURS)]
        ax.hlines(tflops, start, x_hi, colors=colour, linestyles="--", linewidth=1.3, zorder=2)
        handles.append(Line2D([], [], color=colour, linestyle="--", label=f"{name} {tflops:.1f} TFLOPS"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_axis(ax.xaxis)
    _log_axis(ax.yaxis)
    ax.set_xlim(x_lo, x_hi)
    y_all = values + [t for t, _ in ceilings] + ([memory * x_lo / 1000.0] if memory else [])
    if y_all:
        ax.set_ylim(min(y_all) / 3, max(y_all) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("throughput (TFLOPS)")
    title = plot_label("roofline" + (f" — {gpu}" if gpu else ""))
    ax.set_title(title if memory or ceilings else title + " (no peaks recorded: ceilings left out)")
    ax.grid(True, which="both", alpha=0.25)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                  title="colour: family · marker: precision", title_fontsize="small")
    path = out_dir / "roofline.png"
    fig.savefig(path, dpi=DPI)
    return path


def _scatter_points(ax: Any, points: Mapping[tuple[str, str], list[tuple[float, float]]]) -> list[Any]:
    """Every case a point, coloured by family with a marker per precision; the legend's handles for both."""
    families = sorted({family for family, _ in points})
    precisions = sorted({precision for _, precision in points}, key=_precision_rank)
    colours = _colours(families)
    markers = {precision: _MARKERS[i % len(_MARKERS)] for i, precision in enumerate(precisions)}
    for (family, precision), pts in sorted(points.items()):
        xs, ys = zip(*pts)
        ax.scatter(xs, ys, s=30, color=colours[family], marker=markers[precision], edgecolors="black",
                   linewidths=0.4, zorder=3)
    counts = {family: sum(len(p) for (f, _), p in points.items() if f == family) for family in families}
    handles: list[Any] = [Line2D([], [], linestyle="", marker="o", color=colours[family], markeredgecolor="black",
                                 label=plot_label(f"{family} ({counts[family]})")) for family in families]
    handles += [Line2D([], [], linestyle="", marker=markers[precision], color="lightgray",
                       markeredgecolor="black", label=plot_label(precision)) for precision in precisions]
    return handles


def records_from_baseline(header: Mapping[str, Any], entries: Mapping[str, EntryLike]) -> list[Record]:
    """Records for plotting from a baseline's header and entries, from each entry's descriptive fields.

    Entries without FLOP/byte counts (recorded before entries carried them, or ratios) are left out of the
    plots.
    """
    peaks = header.get("peaks") if isinstance(header.get("peaks"), Mapping) else None
    return [_baseline_record(case_id, entry, header, peaks) for case_id, entry in entries.items()]


# --- throughput ----------------------------------------------------------------------------------------


def _throughput_panel(ax: Axes, records: Sequence[Record], metric: str,
                      peaks: Mapping[str, Any] | None) -> None:
    series: dict[str, list[_Point]] = {}
    for record in records:
        size = _size(record) or 0.0  # the caller kept only records with a size
        point = _Point(size, float(record.value), _join(series_label(record), shape_class(record)))
        series.setdefault(point.series, []).append(point)
    colours = _colours(sorted(series))
    for index, label in enumerate(sorted(series)):
        pts = sorted(series[label], key=lambda p: (p.x, p.y))
        swept = not label.endswith(IRREGULAR) and "≫" not in label  # only a size sweep is drawn as a line
        ax.plot([p.x for p in pts], [p.y for p in pts], marker=_MARKERS[index % len(_MARKERS)],
                markersize=5, linewidth=1.0 if swept else 0.0, color=colours[label], label=label)
    _label_shapes(ax, records)
    ceilings = _throughput_ceilings(records, metric, peaks)
    for index, (value, name) in enumerate(ceilings):
        ax.axhline(value, linestyle="--", linewidth=1.2, color=_CEILING_COLOURS[index % len(_CEILING_COLOURS)],
                   label=f"{name} peak {value:.1f} {metric}" if metric == Metric.TFLOPS else
                   f"{name} peak {value:.0f} {metric}")
    ax.set_xscale("log")
    _log_axis(ax.xaxis)
    y_values = [p.y for pts in series.values() for p in pts] + [value for value, _ in ceilings]
    if max(y_values) / max(min(y_values), 1e-12) > 30:
        ax.set_yscale("log")  # fp32 next to fp16 tensor ceilings: a linear axis would flatten fp32
        _log_axis(ax.yaxis)
    else:
        ax.set_ylim(0, max(y_values) * 1.08)
    unit = "TFLOPS (10¹² FLOP/s)" if metric == Metric.TFLOPS else "GB/s (10⁹ byte/s)"
    what = "FLOPs per call" if metric == Metric.TFLOPS else "bytes moved per call"
    ax.set_xlabel(f"problem size ({what}, log scale)")
    ax.set_ylabel(unit)
    ax.set_title("compute throughput" if metric == Metric.TFLOPS else "memory bandwidth", fontsize="medium")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              ncols=2 if len(series) > 16 else 1)  # beside the axes: many series would cover the data


#: Sizes are written beside the points only where they stay legible.
MAX_SHAPE_LABELS = 12


def shape_label(sizes: Mapping[str, int]) -> str:
    """A shape for people: ``4096³``, ``1000×3000×2000``, ``4096×64³`` (a batch of 4096 products of 64³),
    ``16384×16384`` (a GEMV's matrix); from the sizes a record carries, ``""`` when it carries none."""
    dims = [sizes[name] for name in ("m", "n", "k") if name in sizes]
    if not dims:
        return ""
    body = f"{dims[0]}³" if len(dims) == 3 and len(set(dims)) == 1 else "×".join(map(str, dims))
    batch = sizes.get("batch", 1)
    return f"{batch}×{body}" if batch > 1 else body


def _label_shapes(ax: Axes, records: Sequence[Record]) -> None:
    """Each distinct shape named once, above its highest point (two shapes of equal size stack their names)."""
    tops: dict[str, tuple[float, float]] = {}
    for record in records:
        label, x = shape_label(record.shape), _size(record)
        if label and x is not None and (label not in tops or float(record.value) > tops[label][1]):
            tops[label] = (x, float(record.value))
    if not tops or len(tops) > MAX_SHAPE_LABELS:
        return
    stacked: dict[float, int] = {}
    for label, (x, y) in sorted(tops.items(), key=lambda item: item[1]):
        row = stacked.get(round(x, -3), 0)
        stacked[round(x, -3)] = row + 1
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(0, 6 + 9 * row), ha="center",
                    fontsize="x-small", color="dimgray")


def _throughput_ceilings(records: Sequence[Record], metric: str,
                         peaks: Mapping[str, Any] | None) -> list[tuple[float, str]]:
    """Distinct peaks that apply to these records, with the precisions that share each."""
    by_value: dict[float, list[str]] = {}
    for record in records:
        name = "memory" if metric == Metric.GBPS else _precision(record)
        value = _positive(record.peak) or _peak_from(peaks, metric, name)
        if value is not None:
            names = by_value.setdefault(round(value, 1), [])
            if name not in names:
                names.append(name)
    return [(value, "/".join(names)) for value, names in sorted(by_value.items())]


def _peak_from(peaks: Mapping[str, Any] | None, metric: str, precision: str) -> float | None:
    if not peaks:
        return None
    if metric == Metric.GBPS:
        return _positive(peaks.get("memory_gbps"))
    return _positive((peaks.get("compute_tflops") or {}).get(precision))


def series_label(record: Record) -> str:
    """The code path of a case: the kernel that ran (the measurement's label), else its family."""
    return plot_label(record.kernel or record.family or "cases")


IRREGULAR = "irregular"


def shape_class(record: Record) -> str:
    """How a case's shape is proportioned, so that tall, wide and square sweeps are separate curves:
    ``""`` for a square, ``"irregular"`` when no dimension is 4× another, else e.g. ``"M≫N"`` (tall GEMV)
    or ``"K≫M,N"``. Only squares are drawn as connected sweeps; the others are points."""
    dims = _shape_dims(record)
    if not dims or len(set(dims.values())) == 1:
        return ""
    if max(dims.values()) < ASPECT_FACTOR * min(dims.values()):
        return IRREGULAR
    top = max(dims.values())
    large = [name for name, size in dims.items() if size * ASPECT_FACTOR > top]
    small = [name for name in dims if name not in large]
    return f"{','.join(large)}≫{','.join(small)}"


def _shape_dims(record: Record) -> dict[str, int]:
    return {name.upper(): size for name, size in record.shape.items() if name in ("m", "n", "k")}


def _join(*parts: str) -> str:
    return " · ".join(part for part in parts if part)


def _size(record: Record) -> float | None:
    return _positive(record.flops if record.metric == Metric.TFLOPS else record.bytes)


# --- roofline ------------------------------------------------------------------------------------------


def _roofline_point(record: Record) -> tuple[float, float] | None:
    """(FLOP/byte, TFLOPS) of a case, from whichever of its figures are there; ``None`` if it has no work."""
    flops, nbytes = _positive(record.flops), _positive(record.bytes)
    if flops is None or nbytes is None:
        return None
    value, seconds = _positive(record.value), _positive(record.median_s)
    tflops = _positive(record.tflops)
    if tflops is None and value is not None and record.metric in (Metric.TFLOPS, Metric.GBPS):
        tflops = value if record.metric == Metric.TFLOPS else value * 1e9 * (flops / nbytes) / 1e12
    if tflops is None and seconds is not None:
        tflops = flops / seconds / 1e12
    if tflops is None:
        return None
    return _positive(record.arithmetic_intensity) or flops / nbytes, tflops


def _compute_ceilings(peaks: Mapping[str, Any] | None) -> list[tuple[float, str]]:
    """``[(TFLOPS, "FP16/BF16 tensor"), ...]`` highest first; precisions with equal peaks share a line."""
    if not peaks:
        return []
    by_value: dict[float, list[str]] = {}
    for precision, value in (peaks.get("compute_tflops") or {}).items():
        if _positive(value) is not None:
            by_value.setdefault(round(float(value), 1), []).append(precision)
    ceilings = []
    for value, names in sorted(by_value.items(), reverse=True):
        described = [CEILING_NAMES.get(name, name) for name in names]
        units = {d.split(" ", 1)[1] for d in described if " " in d}
        if len(units) == 1:  # "FP16 tensor" + "BF16 tensor" → "FP16/BF16 tensor"
            label = "/".join(d.split(" ", 1)[0] for d in described) + " " + units.pop()
        else:
            label = " = ".join(described)
        ceilings.append((value, label))
    return ceilings


# --- baselines → records -------------------------------------------------------------------------------


def _baseline_record(case_id: str, entry: EntryLike, header: Mapping[str, Any],
                     peaks: Mapping[str, Any] | None) -> Record:
    flops, nbytes = _positive(getattr(entry, "flops", None)), _positive(getattr(entry, "bytes", None))
    precision = str(getattr(entry, "precision", "") or "")
    value = float(entry.value)
    tflops = gbps = peak = pct = None
    if flops is not None and nbytes is not None and value > 0 and entry.metric in (Metric.TFLOPS, Metric.GBPS):
        seconds = flops / (value * 1e12) if entry.metric == Metric.TFLOPS else nbytes / (value * 1e9)
        tflops, gbps = flops / seconds / 1e12, nbytes / seconds / 1e9
        peak = _peak_from(peaks, entry.metric, precision)
        pct = 100.0 * value / peak if peak else None
    return Record(
        case_id=case_id, nodeid=case_id, family=str(getattr(entry, "family", "") or Family.OTHER), params={},
        metric=entry.metric, value=value, unit=entry.unit, status="", pct_of_peak=pct, peak=peak, flops=flops,
        bytes=nbytes, arithmetic_intensity=flops / nbytes if flops and nbytes else None, tflops=tflops, gbps=gbps,
        samples=getattr(entry, "samples", None), flush=str(getattr(entry, "flush", "") or ""),
        gpu=str(header.get("gpu", "")), kernel=str(getattr(entry, "kernel", "") or ""), precision=precision,
        shape=dict(getattr(entry, "shape", ()) or ()), extra={"spread": getattr(entry, "spread", None)},
    )


# --- helpers -------------------------------------------------------------------------------------------

_CEILING_COLOURS = ("tab:red", "tab:purple", "tab:brown", "tab:olive", "tab:gray", "tab:pink")


def _figure(width: float = FIGSIZE[0]) -> Figure:
    fig = Figure(figsize=(width, FIGSIZE[1]), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colours(names: Iterable[str]) -> dict[str, Any]:
    names = list(names)
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def _precision(record: Record) -> str:
    return record.precision or "unknown precision"


def _precision_rank(precision: str) -> tuple[int, str]:
    return (Precision.ALL.index(precision) if precision in Precision.ALL else len(Precision.ALL), precision)


def _positive(value: Any) -> float | None:
    return float(value) if _is_number(value) and float(value) > 0 else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "other"

