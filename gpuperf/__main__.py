"""``python -m gpuperf``: ``device``, ``baseline diff A B``, ``baseline check FILE...``, ``baseline seal FILE``
and ``plot PATH``.

Each command prints what it did; an error prints one line naming the cause and the fix and exits 1
(2 for a malformed command line, as argparse does).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuperf.argtypes import non_negative_float, non_negative_int
from gpuperf.baseline import BaselineError, BaselineFile, Integrity, drop_entries, load_baseline, seal_baseline
from gpuperf.records import Record
from gpuperf.results import RESULTS_JSON, ResultsError, format_delta, format_value, load_run

EXIT_OK = 0
EXIT_ERROR = 1


class CliError(Exception):
    """A user-facing failure: the message names the cause and the fix."""


# --- device --------------------------------------------------------------------------------------------


def cmd_device(args: argparse.Namespace) -> int:
    try:
        from gpuperf.device import query_device
        from gpuperf.peaks import device_peaks
    except ImportError as exc:
        raise CliError(f"cannot load gpuperf's device module ({exc}): reinstall with "
                       "pip install -e '.[cuda13]'") from exc
    try:
        queried = query_device(args.gpu)
    except ImportError as exc:
        raise CliError(f"CuPy is not importable ({exc}): pip install -e '.[cuda13]' (or '.[cuda12]')") from exc
    except Exception as exc:  # NoGpuError and CUDA runtime errors already name their cause
        raise CliError(f"cannot query GPU {args.gpu}: {exc}") from exc
    info: Any = queried[0] if isinstance(queried, tuple) else queried  # (DeviceInfo, Nvml) or DeviceInfo
    if args.slug:
        print(info.slug)
        return EXIT_OK
    try:
        peaks: dict[str, Any] | None = device_peaks(info).to_dict()
        peaks_error = ""
    except ValueError as exc:  # an architecture missing from the peaks table
        peaks, peaks_error = None, str(exc)
    if args.json:
        data = dict(info.to_dict()) if hasattr(info, "to_dict") else dict(vars(info))
        data["peaks"] = peaks
        print(json.dumps(data, indent=2, default=str))
        return EXIT_OK
    print(describe_device(info, peaks, peaks_error))
    return EXIT_OK


def describe_device(info: Any, peaks: Mapping[str, Any] | None, peaks_error: str = "") -> str:
    """The ``device`` command's text: identity, versions, clocks, peaks (fields read defensively)."""

    def get(name: str, default: Any = None) -> Any:
        return getattr(info, name, default)

    def mib(nbytes: Any) -> str:
        return f"{nbytes / 2**20:.1f} MiB" if nbytes else "?"

    title = f"GPU {get('index', '?')}: {get('name', '?')}"
    lines = [f"{title} ({get('arch', '?')}, compute capability {get('compute_capability', '?')})"]
    rows: list[tuple[str, str, Any]] = [
        ("identity", "baseline file", f"baselines/{get('slug', '?')}.yaml"),
        ("identity", "SMs", get("sm_count")),
        ("identity", "L2 cache", mib(get("l2_bytes"))),
        ("identity", "memory", f"{mib(get('total_memory_bytes'))}, {get('bus_width_bits', '?')}-bit bus"),
        ("identity", "PCI bus id", get("pci_bus_id")),
        ("versions", "driver", get("driver")),
        ("versions", "CUDA runtime", get("cuda_runtime")),
        ("versions", "CUDA driver API", get("cuda_driver_api")),
        ("versions", "cuBLAS", get("cublas")),
        ("versions", "CuPy", get("cupy")),
        ("clocks", "SM max", _mhz(get("sm_clock_max_mhz"))),
        ("clocks", "SM now", _mhz(get("sm_clock_mhz"))),
        ("clocks", "memory", _mhz(get("mem_clock_mhz"))),
        ("clocks", "clock events", ", ".join(get("clock_events") or ()) or "none"),
        ("clocks", "temperature", f"{get('temperature_c')} °C" if get("temperature_c") is not None else None),
        ("clocks", "power", f"{get('power_w'):.1f} W" if get("power_w") is not None else None),
    ]
    if peaks:
        rows.append(("peaks", "memory", f"{float(peaks['memory_gbps']):.1f} GB/s"))
        rows += [("peaks", name, f"{float(value):.1f} TFLOPS" if value else "no such unit")
                 for name, value in (peaks.get("compute_tflops") or {}).items()]
    else:
        rows.append(("peaks", "unknown", peaks_error or "no peak table for this GPU"))
    section = ""
    for group, name, value in rows:
        if value in (None, ""):
            continue
        if group != section:
            lines.append(group)
            section = group
        lines.append(f"  {name:<16} {value}")
    missing = get("missing") or ()
    lines += [f"note: {reason}" for reason in missing]
    return "\n".join(lines)


def _mhz(value: Any) -> str | None:
    return f"{value} MHz" if value else None


# --- baseline diff -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseFigure:
    """One case's gated figure in a baseline or a results file."""

    metric: str
    value: float
    unit: str


@dataclass(frozen=True)
class DiffRow:
    case: str
    metric: str
    old: float | None
    new: float | None
    delta_pct: float | None
    change: str  # "", "added", "removed", "metric changed"


def load_figures(path: Path) -> dict[str, CaseFigure]:
    """``{case id: CaseFigure}`` from a baseline YAML, a ``results.json`` or a results directory."""
    if path.is_dir() or path.suffix == ".json":
        _, records = load_run(path)
        return {r.case_id: CaseFigure(r.metric, float(r.value), r.unit) for r in records if _finite(r.value)}
    if path.suffix in (".yaml", ".yml"):
        baseline = load_baseline(path)
        if baseline is None:
            raise CliError(f"{path}: no such baseline file; check the path (baselines/<gpu-slug>.yaml, see "
                           "python -m gpuperf device --slug) or record it with pytest perf_tests "
                           "--update-baselines")
        return {case: CaseFigure(e.metric, float(e.value), e.unit) for case, e in baseline.entries.items()}
    if not path.exists():
        raise CliError(f"{path}: no such file or directory; pass a baselines/*.yaml or a results/<timestamp>/ "
                       "directory")
    raise CliError(f"{path}: not a baseline (.yaml) or results file (.json or a results directory); pass one "
                   "of those")


def diff_figures(old: Mapping[str, CaseFigure], new: Mapping[str, CaseFigure]) -> list[DiffRow]:
    rows = []
    for case in sorted(set(old) | set(new)):
        a, b = old.get(case), new.get(case)
        if a is None and b is not None:
            rows.append(DiffRow(case, b.metric, None, b.value, None, "added"))
        elif b is None and a is not None:
            rows.append(DiffRow(case, a.metric, a.value, None, None, "removed"))
        elif a is not None and b is not None:
            if a.metric != b.metric:
                rows.append(DiffRow(case, f"{a.metric} → {b.metric}", a.value, b.value, None, "metric changed"))
            else:
                delta = 100.0 * (b.value - a.value) / a.value if a.value else None
                rows.append(DiffRow(case, a.metric, a.value, b.value, delta, ""))
    return rows


def format_diff(rows: Sequence[DiffRow], markdown: bool = False) -> str:
    header = ("case", "metric", "old", "new", "Δ %")
    cells = [(r.case, r.metric, format_value(r.old), format_value(r.new),
              r.change or format_delta(r.delta_pct)) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "| --- | --- | ---: | ---: | ---: |"]
        lines += ["| " + " | ".join([f"`{c[0]}`", *c[1:]]).replace("\n", " ") + " |" for c in cells]
    else:
        widths = [max(len(str(row[i])) for row in [header, *cells]) for i in range(len(header))]
        lines = ["  ".join(str(h).ljust(w) if i < 2 else str(h).rjust(w)
                           for i, (h, w) in enumerate(zip(header, widths)))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths))) for row in cells]
    return "\n".join(lines)


def diff_summary(rows: Sequence[DiffRow], threshold_pct: float) -> str:
    compared = [r for r in rows if r.delta_pct is not None]
    faster = sum(r.delta_pct > threshold_pct for r in compared if r.delta_pct is not None)
    slower = sum(r.delta_pct < -threshold_pct for r in compared if r.delta_pct is not None)
    counts = {change: sum(r.change == change for r in rows) for change in ("added", "removed", "metric changed")}
    parts = [f"{len(compared)} compared", f"{faster} higher and {slower} lower by more than {threshold_pct:g} %"]
    parts += [f"{n} {change}" for change, n in counts.items() if n]
    return "; ".join(parts)


def cmd_baseline_diff(args: argparse.Namespace) -> int:
    old = load_figures(Path(args.old))
    new = load_figures(Path(args.new))
    rows = diff_figures(old, new)
    old_name, new_name = args.names or (args.old, args.new)
    shown = [r for r in rows if r.change or r.delta_pct is None or abs(r.delta_pct) >= args.min_delta]
    if args.markdown:
        print(f"**{old_name} → {new_name}**: {diff_summary(rows, args.threshold)}\n")
        print(format_diff(shown, markdown=True) if shown else "_no differences_")
    else:
        print(f"{old_name} → {new_name}")
        print(format_diff(shown) if shown else "no differences")
        print(diff_summary(rows, args.threshold))
    return EXIT_OK


# --- baseline check and seal ---------------------------------------------------------------------------


def describe_sealed(baseline: BaselineFile) -> str:
    """``N entries, digest 1a2b3c4d5e6f…``: what a good file's seal covers."""
    integrity = Integrity.of(baseline.entries)
    noun = "entry" if integrity.entries == 1 else "entries"
    return f"{integrity.entries} {noun}, digest {integrity.sha256[:12]}…"


def check_baseline_file(path: Path) -> tuple[bool, str]:
    """Whether ``path`` loads as a baseline, and its line for ``baseline check`` (the problem if not)."""
    try:
        baseline = load_baseline(path)
    except BaselineError as exc:
        return False, str(exc)
    except OSError as exc:
        return False, f"{path}: cannot be read ({exc.strerror or exc}); pass a baselines/<gpu-slug>.yaml file"
    if baseline is None:
        return False, f"{path}: no such baseline file; check the path (baselines/<gpu-slug>.yaml)"
    return True, f"{path}: ok ({describe_sealed(baseline)})"


def cmd_baseline_check(args: argparse.Namespace) -> int:
    damaged = 0
    for name in args.files:
        ok, line = check_baseline_file(Path(name))
        print(line)
        damaged += not ok
    if damaged:
        print(f"gpuperf: error: {damaged} of {len(args.files)} baseline file(s) cannot be used; each line above "
              "names the problem and the fix", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def cmd_baseline_seal(args: argparse.Namespace) -> int:
    path = Path(args.file)
    written = seal_baseline(path)
    baseline = load_baseline(path)
    if baseline is None:
        raise CliError(f"{path}: disappeared while it was being sealed; restore it from version control "
                       f"(git checkout -- {path})")
    if written:
        print(f"{path}: sealed ({describe_sealed(baseline)}); only the header's integrity field was added: "
              f"review with git diff {path} and commit it")
    else:
        print(f"{path}: already sealed ({describe_sealed(baseline)}); nothing written")
    return EXIT_OK


def cmd_baseline_drop(args: argparse.Namespace) -> int:
    path = Path(args.file)
    dropped = drop_entries(path, list(args.cases))
    for case in dropped:
        print(f"{path}: dropped {case}")
    print(f"{path}: {len(dropped)} entr{'y' if len(dropped) == 1 else 'ies'} dropped and the file re-sealed; review "
          f"with git diff {path} and commit it")
    return EXIT_OK


# --- plot ----------------------------------------------------------------------------------------------


def cmd_plot(args: argparse.Namespace) -> int:
    from gpuperf.plot import plot_roofline, plot_throughput, records_from_baseline

    path = Path(args.path)
    records: list[Record]
    if path.is_dir() or path.suffix == ".json":
        run, records = load_run(path)
        peaks = run.extra.get("peaks") if isinstance(run.extra.get("peaks"), dict) else None
        gpu = run.gpu_name
        default_out = path if path.is_dir() else path.parent
    elif path.suffix in (".yaml", ".yml"):
        baseline = load_baseline(path)
        if baseline is None:
            raise CliError(f"{path}: no such baseline file; check the path or record it with "
                           "pytest perf_tests --update-baselines")
        records = records_from_baseline(baseline.header, baseline.entries)
        peaks = baseline.header.get("peaks") if isinstance(baseline.header.get("peaks"), dict) else None
        gpu = str(baseline.header.get("gpu", ""))
        default_out = path.parent / f"{path.stem}-plots"
    elif not path.exists():
        raise CliError(f"{path}: no such file or directory; pass results/<timestamp>/, its {RESULTS_JSON}, "
                       "or a baselines/*.yaml")
    else:
        raise CliError(f"{path}: not a results directory, {RESULTS_JSON} or baseline .yaml; pass one of those")
    if not any(r.flops and r.bytes for r in records):
        raise CliError(f"{path}: no case carries FLOP/byte counts (ratio entries only, or ids without a "
                       "shape such as 4096x4096x4096), so there is nothing to plot")
    out = Path(args.out) if args.out else default_out
    written = plot_throughput(records, out, gpu=gpu, peaks=peaks)
    written.append(plot_roofline(records, peaks, out, gpu=gpu))
    if peaks is None:
        print(f"note: {path} records no peaks, so the plots have no ceilings", file=sys.stderr)
    for png in written:
        print(png)
    return EXIT_OK


def cmd_readme(args: argparse.Namespace) -> int:
    from gpuperf import readme, results

    run, records = results.load_run(Path(args.results))
    readme_path = Path(args.readme)
    try:
        text = readme_path.read_text()
    except FileNotFoundError as exc:
        raise CliError(f"{readme_path} does not exist: pass --readme PATH") from exc
    section = readme.results_section(run, records, args.images, str(args.results))
    try:
        readme_path.write_text(readme.replace_section(text, section))
    except readme.ReadmeError as exc:
        raise CliError(f"{readme_path}: {exc}") from exc
    print(f"{readme_path}: results section rewritten from {args.results} ({len(records)} cases)")
    return EXIT_OK


# --- entry point ---------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gpuperf", description="gpuperf: GPU identity and peaks, baseline diffs, plots.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    device = commands.add_parser("device", help="GPU identity, versions, clocks and theoretical peaks")
    device.add_argument("--gpu", type=non_negative_int, default=0, help="CUDA device index (default 0)")
    output = device.add_mutually_exclusive_group()
    output.add_argument("--slug", action="store_true", help="print only the baseline slug (e.g. nvidia-h200)")
    output.add_argument("--json", action="store_true", help="print everything as JSON")
    device.set_defaults(func=cmd_device)

    baseline = commands.add_parser("baseline", help="work with baseline files")
    baseline_commands = baseline.add_subparsers(dest="baseline_command", required=True, metavar="COMMAND")
    diff = baseline_commands.add_parser(
        "diff", help="old → new table of two baselines, or of a results file against a baseline",
        description="A and B are each a baselines/*.yaml, a results.json or a results/<timestamp>/ directory.")
    diff.add_argument("old", metavar="A", help="the old figures")
    diff.add_argument("new", metavar="B", help="the new figures")
    diff.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request body)")
    diff.add_argument("--min-delta", type=non_negative_float, default=0.0, metavar="PCT",
                      help="hide cases whose |Δ| is below PCT percent (default: show all)")
    diff.add_argument("--threshold", type=non_negative_float, default=5.0, metavar="PCT",
                      help="count changes beyond ±PCT percent in the summary line (default 5)")
    diff.add_argument("--names", nargs=2, metavar=("OLD", "NEW"),
                      help="how to call A and B in the output (e.g. 'baselines/x.yaml@HEAD' for a temporary copy)")
    diff.set_defaults(func=cmd_baseline_diff)
    check = baseline_commands.add_parser(
        "check", help="validate baseline files (CPU only): schema, values, units, duplicate keys, encoding, "
                      "integrity",
        description="Runs the checks of loading on each FILE and prints one line per file; exits 1 when any "
                    "cannot be used.")
    check.add_argument("files", nargs="+", metavar="FILE", help="baselines/*.yaml files")
    check.set_defaults(func=cmd_baseline_check)
    seal = baseline_commands.add_parser(
        "seal", help="add the integrity field to a baseline recorded before gpuperf wrote one (legacy files "
                     "only)",
        description="Checks everything else, then writes the header's integrity field atomically, changing no "
                    "measured figure. A file that is already sealed is left as it is; a damaged one is refused. "
                    "New and re-recorded files are sealed by pytest perf_tests --update-baselines.")
    seal.add_argument("file", metavar="FILE", help="a baselines/*.yaml file without an integrity field")
    seal.set_defaults(func=cmd_baseline_seal)
    drop = baseline_commands.add_parser(
        "drop", help="remove entries: stale ones (no test produces them) or ones that can no longer be recorded",
        description="Removes the named entries under the file's lock, atomically, and re-seals the file; every "
                    "other entry is kept as it is. A name that is not an entry is refused.")
    drop.add_argument("file", metavar="FILE", help="a baselines/*.yaml file")
    drop.add_argument("cases", nargs="+", metavar="CASE", help="entry keys (case ids, with #ratio where it has one)")
    drop.set_defaults(func=cmd_baseline_drop)

    plot = commands.add_parser("plot", help="throughput and roofline PNGs from a run or a baseline")
    plot.add_argument("path", metavar="PATH", help="results/<timestamp>/, its results.json, or a baselines/*.yaml")
    plot.add_argument("--out", metavar="DIR",
                      help="where the PNGs go (default: the results directory, or <baseline>-plots/ beside "
                           "a baseline file)")
    plot.set_defaults(func=cmd_plot)

    section = commands.add_parser("readme", help="rewrite the README's generated results section from a run")
    section.add_argument("results", metavar="RESULTS", help="results/<timestamp>/ or its results.json")
    section.add_argument("--readme", default="README.md", help="the README to rewrite (default README.md)")
    section.add_argument("--images", nargs="*", default=[], metavar="PNG", help="plots to show, as README paths")
    section.set_defaults(func=cmd_readme)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (CliError, ResultsError, BaselineError) as exc:
        print(f"gpuperf: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


if __name__ == "__main__":
    sys.exit(main())
