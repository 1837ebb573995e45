"""``python -m gpuperf``: ``device``, ``compare A B``, ``baseline diff|check|seal|drop``, ``plot``, ``readme``,
``history ingest|show|changes`` (``cli_history.py``) and ``bisect`` (``bisect.py``).

Argument parsing and thin commands: each reads its inputs, calls the pure modules (``diff``, ``report``,
``table``, ``gate``) and prints. Each command prints what it did; an error prints one line naming the cause
and the fix and exits 1 (2 for a malformed command line, as argparse does); so does a file-system error
(a path that cannot be read or written: ``describe_os_error``), and output cut short by a closed pipe
(``... | head -1``) ends the command quietly with 1. ``compare`` also exits 1 when a case fails as it would
fail its test in the gate.
"""

from __future__ import annotations

import argparse
import errno
import importlib.metadata
import json
import os
import sys
from datetime import datetime, timezone
from collections.abc import Sequence
from pathlib import Path

import gpuperf
from gpuperf.bisect import BisectError, add_bisect_command
from gpuperf.cli_history import add_history_commands
from gpuperf.measure.device import DeviceInfo, query_device
from gpuperf.measure.peaks import DevicePeaks, device_peaks
from gpuperf.output import diff, report
from gpuperf.output.results import load_figures
from gpuperf.output.results import Figures
from gpuperf.store.atomic import write_atomically
from gpuperf.store.reading import MIB, InputError, read_text
from gpuperf.store.results import RESULTS_JSON, ResultsError, load_run, refuse_repeated_runs
from gpuperf.output.table import peaks_line
from gpuperf.store.history import HistoryError
from gpuperf.store.history_rows import HistoryInputError
from gpuperf.store.history_schema import SchemaError
from gpuperf.store.baseline import (BaselineError, BaselineFile, Integrity, drop_entries, load_baseline,
                                      seal_baseline, update_baseline, version_changes)
from gpuperf.verdict.check import baseline_header
from gpuperf.verdict.false_alarms import false_alarms
from gpuperf.verdict.fleet import FleetError, Run, entries_from_runs, fleet_spread, with_clock_figures
from gpuperf.verdict.gate import DEFAULT_NOISE_K, DEFAULT_TOLERANCE, GateConfig
from gpuperf.wiring.argtypes import fraction, non_negative_float, non_negative_int

EXIT_OK = 0
EXIT_ERROR = 1
README_LIMIT = 8 * MIB


class CliError(Exception):
    """A user-facing failure: the message names the cause and the fix."""


# --- device --------------------------------------------------------------------------------------------


def cmd_device(args: argparse.Namespace) -> int:
    try:
        info, _ = query_device(args.gpu)
    except Exception as exc:  # NoGpuError (no CuPy, no GPU) and CUDA runtime errors name their cause
        raise CliError(f"cannot query GPU {args.gpu}: {exc}") from exc
    if args.slug:
        print(info.slug)
        return EXIT_OK
    try:
        peaks: DevicePeaks | None = device_peaks(info)
        peaks_error = ""
    except ValueError as exc:  # an architecture missing from the peaks table
        peaks, peaks_error = None, str(exc)
    if args.json:
        print(json.dumps({**info.to_dict(), "peaks": peaks.to_dict() if peaks else None}, indent=2, default=str))
        return EXIT_OK
    print(describe_device(info, peaks, peaks_error))
    return EXIT_OK


def describe_device(info: DeviceInfo, peaks: DevicePeaks | None, peaks_error: str = "") -> str:
    """The ``device`` command's text: identity, versions, clocks, peaks; fields NVML could not read are left out."""
    rows: list[tuple[str, str, object]] = [
        ("identity", "baseline file", f"baselines/{info.slug}.yaml"),
        ("identity", "SMs", info.sm_count),
        ("identity", "L2 cache", _mib(info.l2_bytes)),
        ("identity", "memory", f"{_mib(info.total_memory_bytes)}, {info.bus_width_bits}-bit bus"),
        ("identity", "PCI bus id", info.pci_bus_id),
        ("identity", "UUID", info.uuid),
        ("identity", "serial", info.serial),
        ("versions", "driver", info.driver),
        ("versions", "CUDA runtime", info.cuda_runtime),
        ("versions", "CUDA driver API", info.cuda_driver_api),
        ("versions", "cuBLAS", info.cublas),
        ("versions", "CuPy", info.cupy),
        ("clocks", "SM max", _mhz(info.sm_clock_max_mhz)),
        ("clocks", "SM now", _mhz(info.sm_clock_mhz)),
        ("clocks", "memory", _mhz(info.mem_clock_mhz)),
        ("clocks", "clock events", ", ".join(info.clock_events) or "none"),
        ("clocks", "temperature", None if info.temperature_c is None else f"{info.temperature_c} °C"),
        ("clocks", "power", None if info.power_w is None else f"{info.power_w:.1f} W"),
        ("peaks", "at max clock" if peaks else "unknown",
         peaks_line(peaks.to_dict()) if peaks else peaks_error or "no peak table for this GPU"),
    ]
    lines = [f"GPU {info.index}: {info.name} ({info.arch}, compute capability {info.compute_capability})"]
    section = ""
    for group, name, value in rows:
        if value in (None, ""):
            continue
        if group != section:
            lines.append(group)
            section = group
        lines.append(f"  {name:<16} {value}")
    lines += [f"note: {reason}" for reason in info.missing]
    return "\n".join(lines)


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes else "?"


def _mhz(value: int | None) -> str | None:
    return f"{value} MHz" if value else None


# --- compare and baseline diff -------------------------------------------------------------------------


def cmd_compare(args: argparse.Namespace) -> int:
    try:
        config = GateConfig(tolerance=args.tolerance, noise_k=args.noise_k, max_tolerance=args.max_tolerance)
    except ValueError as exc:
        raise CliError(f"{exc}; pass --max-tolerance at least --tolerance") from exc
    a, b = load_figures(args.a), load_figures(args.b)
    if a.run is not None and b.run is not None:
        refuse_repeated_runs([(args.a, a.run, list(a.records.values())), (args.b, b.run, list(b.records.values()))])
    other_gpu = _other_gpu(a, b, args.allow_other_gpu)
    changed = version_changes(a.versions, b.versions)
    rows = diff.compare_runs(a.entries, b.records, config, changed, _record_command(a, args.b))
    a_name, b_name = args.names or (args.a, args.b)
    gate = (f"tolerance {100 * config.tolerance:g} %, noise k {config.noise_k:g}, "
            f"cap {100 * config.cap:g} %")
    summary = report.comparison_summary(rows)
    if args.markdown:
        print(f"**B ({b_name}) against A ({a_name})**: {summary} ({gate})\n")
        for line in filter(None, (other_gpu, f"Versions differ: {', '.join(changed)}" if changed else "")):
            print(f"{line}\n")
        print(report.format_diff(rows, markdown=True, old="A", new="B", verdicts=True) if rows else "_no cases_")
    else:
        print(f"B ({b_name}) against A ({a_name}): {gate}")
        if other_gpu:
            print(other_gpu)
        if changed:
            print(f"versions differ: {', '.join(changed)}")
        print(report.format_diff(rows, old="A", new="B", verdicts=True) if rows else "no cases")
        print(summary)
    return EXIT_ERROR if diff.failing(rows) else EXIT_OK


def _other_gpu(a: Figures, b: Figures, allowed: bool) -> str:
    """The header line of a comparison across GPU models (``--allow-other-gpu``), ``""`` for one model; a
    comparison across models that was not asked for is refused: its deltas measure the hardware."""
    if not a.gpu_slug or not b.gpu_slug or a.gpu_slug == b.gpu_slug:
        return ""
    models = f"A is {a.gpu or a.gpu_slug} ({a.gpu_slug}), B is {b.gpu or b.gpu_slug} ({b.gpu_slug})"
    if not allowed:
        raise CliError(f"{models}: figures of two GPU models differ by the hardware, not by a change; compare "
                       "runs of one model, or pass --allow-other-gpu to compare them anyway")
    return f"GPU models differ ({models}; --allow-other-gpu): the deltas include the hardware's difference"


def _record_command(a: Figures, b_path: str) -> str:
    """What an IMPROVED row of ``compare`` suggests: re-record the baseline A is, or record one from run B."""
    if a.baseline is not None:
        return "pytest perf_tests --update-baselines"
    slug = a.gpu_slug or "<gpu-slug>"
    return f"python -m gpuperf baseline from-runs baselines/{slug}.yaml {b_path} (if B is the new normal)"


def cmd_baseline_diff(args: argparse.Namespace) -> int:
    old, new = load_figures(args.old), load_figures(args.new)
    other_gpu = _other_gpu(old, new, args.allow_other_gpu)
    rows = diff.diff_entries(old.entries, new.entries)
    old_name, new_name = args.names or (args.old, args.new)
    shown = diff.select_rows(rows, args.min_delta)
    summary = report.diff_summary(rows, args.threshold)
    if other_gpu:
        print(f"{other_gpu}\n" if args.markdown else other_gpu)
    if args.markdown:
        print(f"**{old_name} → {new_name}**: {summary}\n")
        print(report.format_diff(shown, markdown=True) if shown else "_no differences_")
    else:
        print(f"{old_name} → {new_name}")
        print(report.format_diff(shown) if shown else "no differences")
        print(summary)
    return EXIT_OK


# --- baseline check, seal and drop ---------------------------------------------------------------------


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


# --- plot and readme -----------------------------------------------------------------------------------


def cmd_plot(args: argparse.Namespace) -> int:
    from gpuperf.output.plot import plot_roofline, plot_throughput, records_from_baseline

    figures = load_figures(args.path)
    path = figures.path
    if figures.baseline is not None:
        records = records_from_baseline(figures.baseline.header, figures.baseline.entries)
        default_out = path.parent / f"{path.stem}-plots"
    else:
        records = list(figures.records.values())
        default_out = path if path.is_dir() else path.parent
    if not any(r.flops and r.bytes for r in records):
        raise CliError(f"{path}: no case carries FLOP/byte counts (ratio entries only, or ids without a "
                       "shape such as 4096x4096x4096), so there is nothing to plot")
    out = Path(args.out) if args.out else default_out
    if out.exists() and not out.is_dir():
        raise CliError(f"{out}: already exists and is not a folder; --out names the folder the PNGs go into")
    written = plot_throughput(records, out, gpu=figures.gpu, peaks=figures.peaks)
    written.append(plot_roofline(records, figures.peaks, out, gpu=figures.gpu))
    if figures.peaks is None:
        print(f"note: {path} records no peaks, so the plots have no ceilings", file=sys.stderr)
    for png in written:
        print(png)
    return EXIT_OK


def cmd_readme(args: argparse.Namespace) -> int:
    from gpuperf.output import readme

    run, records = load_run(Path(args.results))
    readme_path = Path(args.readme)
    try:
        text = read_text(readme_path, README_LIMIT, "a README", "pass --readme PATH")
    except FileNotFoundError as exc:
        raise CliError(f"{readme_path} does not exist: pass --page PATH") from exc
    except InputError as exc:
        raise CliError(str(exc)) from None
    missing = [image for image in args.images if not Path(image).is_file()]
    if missing:
        raise CliError(f"{', '.join(missing)}: no such image; make it with python -m gpuperf plot, or fix the path")
    images = [os.path.relpath(image, readme_path.parent) for image in args.images]  # as links from the page
    section = readme.results_section(run, records, images, str(args.results))
    try:
        write_atomically(readme_path, readme.replace_section(text, section))
    except readme.ReadmeError as exc:
        raise CliError(f"{readme_path}: {exc}") from exc
    print(f"{readme_path}: results section rewritten from {args.results} ({len(records)} cases)")
    return EXIT_OK


# --- entry point ---------------------------------------------------------------------------------------

FIGURES = "a baselines/*.yaml, a results.json or a results/<timestamp>/ directory"
RESULTS_PAGE = "docs/results-h200.md"
ALLOW_OTHER_GPU = ("compare figures of two GPU models (refused otherwise: the deltas would measure the "
                   "hardware); the header then says so")


def _runs(specs: Sequence[str]) -> list[Run]:
    """``[label=]path`` per run: the label names the host when the results file records no GPU UUID."""
    runs, given = [], []
    for spec in specs:
        label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        info, records = load_run(path)
        given.append((path, info, records))
        runs.append(Run.of(info, records, label or path))
    refuse_repeated_runs(given)
    return runs


def cmd_baseline_from_runs(args: argparse.Namespace) -> int:
    runs = _runs(args.runs)
    path = Path(args.file)
    if args.add_clock_figures:
        existing = load_baseline(path)
        entries = with_clock_figures(existing.entries if existing else {}, runs)
    else:
        entries = entries_from_runs(runs)
    if not entries:
        raise CliError("no case was measured cleanly in any of the runs: nothing to record")
    newest = runs[-1]
    recorded = datetime.now(timezone.utc).isoformat(timespec="seconds")
    header = baseline_header(newest.info, [r for run in runs for r in run.records.values()], recorded)
    changes = update_baseline(path, header, entries)
    hosts = len({run.host for run in runs})
    print(f"{path}: {len(entries)} entries from {len(runs)} runs on {hosts} GPU{'s' if hosts != 1 else ''} "
          "(old → new):")
    print(report.format_changes(changes))
    return EXIT_OK


def cmd_fleet(args: argparse.Namespace) -> int:
    runs = _runs(args.runs)
    baseline = None
    if args.baseline:
        loaded = load_baseline(Path(args.baseline))
        if loaded is None:
            raise CliError(f"{args.baseline}: no such baseline file; pass a baselines/<gpu>.yaml")
        baseline = loaded.entries
    print(report.format_fleet(runs, fleet_spread(runs), markdown=args.markdown))
    cases, selection = false_alarms(runs, baseline, GateConfig())
    print()
    print(report.format_false_alarms(cases, selection, markdown=args.markdown))
    return EXIT_OK


def package_version() -> str:
    """The installed distribution's version, else (an uninstalled checkout) ``gpuperf.__version__``."""
    try:
        return importlib.metadata.version("gpuperf")
    except importlib.metadata.PackageNotFoundError:
        return gpuperf.__version__


def _prog() -> str:
    """How the user called us: the ``gpuperf`` console script, or ``python -m gpuperf``."""
    return "gpuperf" if Path(sys.argv[0]).name == "gpuperf" else "python -m gpuperf"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_prog(),
                                     description="gpuperf: GPU identity and peaks, run comparisons, baseline "
                                                 "files, plots.")
    parser.add_argument("--version", action="version", version=f"gpuperf {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    device = commands.add_parser("device", help="GPU identity, versions, clocks and theoretical peaks")
    device.add_argument("--gpu", type=non_negative_int, default=0, help="CUDA device index (default 0)")
    output = device.add_mutually_exclusive_group()
    output.add_argument("--slug", action="store_true", help="print only the baseline slug (e.g. nvidia-h200)")
    output.add_argument("--json", action="store_true", help="print everything as JSON")
    device.set_defaults(func=cmd_device)

    compare = commands.add_parser(
        "compare", help="judge run B against run A with the gate's rule (two hosts, or before/after a change)",
        description=f"A and B are each {FIGURES}. Every case of B is judged against A's figure as the gate "
                    "judges a run against its baseline (REGRESSED, PASS, IMPROVED, UNRELIABLE when too noisy, "
                    "NOT_COMPARABLE, ...); cases only one side has are listed as such. Exits 1 when a case "
                    "fails as it would fail its test (REGRESSED, ANOMALY, ERROR), 0 otherwise.")
    compare.add_argument("a", metavar="A", help="the reference figures (the baseline's role)")
    compare.add_argument("b", metavar="B", help="the figures judged against A")
    compare.add_argument("--tolerance", type=fraction, default=DEFAULT_TOLERANCE,
                         help=f"allowed slowdown as a fraction, as pytest's --tolerance (default "
                              f"{DEFAULT_TOLERANCE:g}); an entry's own tolerance (A a baseline file) wins")
    compare.add_argument("--noise-k", type=non_negative_float, default=DEFAULT_NOISE_K,
                         help=f"k in max(tolerance, k × A's relative IQR) (default {DEFAULT_NOISE_K:g})")
    compare.add_argument("--max-tolerance", type=fraction, default=None,
                         help="cap on the effective tolerance, whatever the noise (default twice --tolerance)")
    compare.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request body)")
    compare.add_argument("--names", nargs=2, metavar=("A", "B"), help="how to call A and B in the output")
    compare.add_argument("--allow-other-gpu", action="store_true", help=ALLOW_OTHER_GPU)
    compare.set_defaults(func=cmd_compare)

    baseline = commands.add_parser("baseline", help="work with baseline files")
    baseline_commands = baseline.add_subparsers(dest="baseline_command", required=True, metavar="COMMAND")
    diff_command = baseline_commands.add_parser(
        "diff", help="old → new table of two baselines, or of a results file against a baseline",
        description=f"A and B are each {FIGURES}.")
    diff_command.add_argument("old", metavar="A", help="the old figures")
    diff_command.add_argument("new", metavar="B", help="the new figures")
    diff_command.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request body)")
    diff_command.add_argument("--min-delta", type=non_negative_float, default=0.0, metavar="PCT",
                              help="hide cases whose |Δ| is below PCT percent (default: show all)")
    diff_command.add_argument("--threshold", type=non_negative_float, default=5.0, metavar="PCT",
                              help="count changes beyond ±PCT percent in the summary line (default 5)")
    diff_command.add_argument("--names", nargs=2, metavar=("OLD", "NEW"),
                              help="how to call A and B in the output (e.g. 'baselines/x.yaml@HEAD' for a "
                                   "temporary copy)")
    diff_command.add_argument("--allow-other-gpu", action="store_true", help=ALLOW_OTHER_GPU)
    diff_command.set_defaults(func=cmd_baseline_diff)
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
    from_runs = baseline_commands.add_parser(
        "from-runs", help="record entries as the median of several runs (several hosts of one GPU model)",
        description="Each RUN is a results.json or results/<timestamp>/ directory written by a pytest perf_tests "
                    "run on the GPU model of FILE, optionally as LABEL=PATH to name its host when the results do "
                    "not record the GPU's UUID. Per case, the entry's value is the median of the runs' clean "
                    "figures (same method), with runs and run_spread (their relative range), which the gate takes "
                    "as a floor of the band. Written like --update-baselines: locked, atomic, sealed; other "
                    "entries and hand-set tolerances are kept.")
    from_runs.add_argument("file", metavar="FILE", help="the baselines/<gpu>.yaml to write")
    from_runs.add_argument("runs", nargs="+", metavar="RUN", help="[LABEL=]results.json or results directory")
    from_runs.add_argument("--add-clock-figures", action="store_true",
                           help="keep the time figures of the entries FILE has and add to each its figure at max "
                                "clock (cycles per call) from the runs; cases FILE lacks get whole entries")
    from_runs.set_defaults(func=cmd_baseline_from_runs)

    plot = commands.add_parser("plot", help="throughput and roofline PNGs from a run or a baseline")
    plot.add_argument("path", metavar="PATH", help=f"results/<timestamp>/, its {RESULTS_JSON}, or a baselines/*.yaml")
    plot.add_argument("--out", metavar="DIR",
                      help="where the PNGs go (default: the results directory, or <baseline>-plots/ beside "
                           "a baseline file)")
    plot.set_defaults(func=cmd_plot)

    fleet = commands.add_parser(
        "fleet", help="per case, how far the figure moves between hosts and between runs on one host",
        description="RUN as for baseline from-runs. Prints, per case, the hosts and runs, the median, the "
                    "host-to-host spread (relative range of the hosts' medians) and the run-to-run spread (the "
                    "widest relative range of one host's runs), widest host-to-host first.")
    fleet.add_argument("runs", nargs="+", metavar="RUN", help="[LABEL=]results.json or results directory")
    fleet.add_argument("--markdown", action="store_true", help="a Markdown table (docs/fleet.md)")
    fleet.add_argument("--baseline", metavar="FILE",
                       help="also judge every run against this baselines/<gpu>.yaml (the false-alarm rate there)")
    fleet.set_defaults(func=cmd_fleet)

    section = commands.add_parser("readme", help="rewrite a results page's generated section from a run")
    section.add_argument("results", metavar="RESULTS", help="results/<timestamp>/ or its results.json")
    section.add_argument("--page", "--readme", dest="readme", default=RESULTS_PAGE, metavar="PAGE",
                         help=f"the Markdown page to rewrite (default {RESULTS_PAGE})")
    section.add_argument("--images", nargs="*", default=[], metavar="PNG",
                         help="plots to show, as paths from here (the page links them relative to itself)")
    section.set_defaults(func=cmd_readme)
    add_history_commands(commands)
    add_bisect_command(commands)
    return parser


def describe_os_error(exc: OSError) -> str:
    """One line for a file-system error: the path, the cause and the fix."""
    path = exc.filename if exc.filename is not None else "?"
    cause = exc.strerror or type(exc).__name__
    if str(path).endswith(".lock"):
        target = str(path).removesuffix(".lock")
        fix = (f"gpuperf locks {target} by creating this file beside it: make the folder writable, or work on a "
               "copy in a writable folder")
    elif isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
        fix = "make it (and its folder) readable and writable for this user, or work on a copy elsewhere"
    elif isinstance(exc, IsADirectoryError):
        fix = "it is a folder: pass a file"
    elif isinstance(exc, (FileExistsError, NotADirectoryError)):
        fix = "a file stands where a folder is needed: pass another path, or move that file away"
    elif isinstance(exc, FileNotFoundError):
        fix = "check the path (and that its folder exists)"
    elif exc.errno == errno.ENOSPC:
        fix = "free some space on that file system and run it again"
    else:
        fix = "check the path and its permissions"
    return f"{path}: {cause}: {fix}"


def _quiet_broken_pipe() -> int:
    """The reader of our output went away (``| head``): stop without a word, as Python's docs advise, pointing
    stdout at /dev/null so that the interpreter's last flush cannot raise again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (in-process callers)
        pass
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except (CliError, ResultsError, BaselineError, FleetError, InputError, HistoryError, SchemaError,
            HistoryInputError, BisectError) as exc:
        print(f"gpuperf: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"gpuperf: error: {describe_os_error(exc)}", file=sys.stderr)
        return EXIT_ERROR
