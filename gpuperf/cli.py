"""``python -m gpuperf``: ``device``, ``plot``, ``readme`` here; ``compare A B`` (``cli_compare.py``), ``baseline
diff|check|seal|drop|from-runs`` (``cli_baseline.py``), ``fleet`` (``cli_fleet.py``), ``history
ingest|show|changes|page`` (``cli_history.py``, ``cli_trend.py``) and ``bisect`` (``bisect.py``): each command adds
its own parser (``COMMANDS``).

Argument parsing and thin commands: each reads its inputs, calls the pure modules (``diff``, ``report``,
``table``, ``gate``) and prints. Each command prints what it did; an error prints one line naming the cause
and the fix and exits 1 (2 for a malformed command line, as argparse does); so does a file-system error
(a path that cannot be read or written: ``describe_os_error``), and output cut short by a closed pipe
(``... | head -1``) ends the command quietly with 1. ``compare`` also exits 1 when a case fails as it would
fail its test in the gate.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gpuperf
from gpuperf.cli_common import EXIT_ERROR, EXIT_OK, CliError, CommandParser, require_extra
from gpuperf.store.reading import MIB
from gpuperf.wiring.argtypes import non_negative_int

if TYPE_CHECKING:  # the commands' modules are imported when their command runs (``COMMANDS``)
    from gpuperf.measure.device import DeviceInfo
    from gpuperf.measure.peaks import DevicePeaks

README_LIMIT = 8 * MIB
#: An error line is cut to this many characters: it names a file, a record and a field, never a whole value.
ERROR_WIDTH = 2000
#: ``device --gpu``: the CUDA device queried.
DEFAULT_DEVICE = 0


# --- device --------------------------------------------------------------------------------------------


def cmd_device(args: argparse.Namespace) -> int:
    from gpuperf.measure.device import query_device
    from gpuperf.measure.peaks import device_peaks

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
    from gpuperf.output.table import peaks_line

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


# --- plot and readme -----------------------------------------------------------------------------------


def cmd_plot(args: argparse.Namespace) -> int:
    require_extra("plot", ("matplotlib",), "python -m gpuperf plot")
    from gpuperf.output.plot import plot_roofline, plot_throughput, records_from_baseline
    from gpuperf.output.results import load_figures

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
    from gpuperf.store.atomic import write_atomically
    from gpuperf.store.reading import InputError, read_text
    from gpuperf.store.results import load_run

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
        page = readme.replace_section(text, section)
    except readme.ReadmeError as exc:
        raise CliError(f"{readme_path}: {exc}") from exc
    _check_page(readme_path, page, section)
    write_atomically(readme_path, page)
    print(f"{readme_path}: results section rewritten from {args.results} ({len(records)} cases)")
    return EXIT_OK


def _check_page(path: Path, page: str, section: str) -> None:
    """The page as the next ``readme`` would read it (within ``README_LIMIT``, one pair of markers), before it
    replaces the page on disk: a write that its own reader would refuse is not made."""
    from gpuperf.output import readme

    size = len(page.encode("utf-8", "surrogatepass"))
    if size > README_LIMIT:
        raise CliError(f"{path}: not written: the page would hold {size / MIB:.1f} MiB, more than the "
                       f"{README_LIMIT // MIB} MiB a page may hold for readme to read it again; pass a run with "
                       "fewer cases")
    try:
        readme.replace_section(page, section)
    except readme.ReadmeError as exc:
        raise CliError(f"{path}: not written: the section would break the page's markers, so readme could not "
                       f"rewrite it again ({exc}); pass a results path without them") from None


def package_version() -> str:
    """The installed distribution's version, else (an uninstalled checkout) ``gpuperf.__version__``."""
    import importlib.metadata

    try:
        return importlib.metadata.version("gpuperf")
    except importlib.metadata.PackageNotFoundError:
        return gpuperf.__version__


def _prog() -> str:
    """How the user called us: the ``gpuperf`` console script, or ``python -m gpuperf``."""
    return "gpuperf" if Path(sys.argv[0]).name == "gpuperf" else "python -m gpuperf"


RESULTS_PAGE = "docs/results-h200.md"


def _add_device_command(commands: Any) -> None:
    device = commands.add_parser("device", help="GPU identity, versions, clocks and theoretical peaks")
    device.add_argument("--gpu", type=non_negative_int, default=DEFAULT_DEVICE,
                        help=f"CUDA device index (default {DEFAULT_DEVICE})")
    output = device.add_mutually_exclusive_group()
    output.add_argument("--slug", action="store_true", help="print only the baseline slug (e.g. nvidia-h200)")
    output.add_argument("--json", action="store_true", help="print everything as JSON")
    device.set_defaults(func=cmd_device)


def _add_plot_command(commands: Any) -> None:
    from gpuperf.store.results import RESULTS_JSON

    plot = commands.add_parser("plot", help="throughput and roofline PNGs from a run or a baseline")
    plot.add_argument("path", metavar="PATH", help=f"results/<timestamp>/, its {RESULTS_JSON}, or a baselines/*.yaml")
    plot.add_argument("--out", metavar="DIR",
                      help="where the PNGs go (default: the results directory, or <baseline>-plots/ beside "
                           "a baseline file)")
    plot.set_defaults(func=cmd_plot)


def _add_readme_command(commands: Any) -> None:
    section = commands.add_parser("readme", help="rewrite a results page's generated section from a run")
    section.add_argument("results", metavar="RESULTS", help="results/<timestamp>/ or its results.json")
    section.add_argument("--page", "--readme", dest="readme", default=RESULTS_PAGE, metavar="PAGE",
                         help=f"the Markdown page to rewrite (default {RESULTS_PAGE})")
    section.add_argument("--images", nargs="*", default=[], metavar="PNG",
                         help="plots to show, as paths from here (the page links them relative to itself)")
    section.set_defaults(func=cmd_readme)


#: Each command's name and, in ``--help`` order, the function that adds its parser (and its subcommands') to the
#: CLI's subparsers, by module: a command line that names a command imports that command's module alone.
COMMANDS = (("device", __name__, "_add_device_command"), ("compare", "gpuperf.cli_compare", "add_compare_command"),
            ("baseline", "gpuperf.cli_baseline", "add_baseline_commands"), ("plot", __name__, "_add_plot_command"),
            ("fleet", "gpuperf.cli_fleet", "add_fleet_command"), ("readme", __name__, "_add_readme_command"),
            ("history", "gpuperf.cli_history", "add_history_commands"),
            ("bisect", "gpuperf.bisect", "add_bisect_command"), ("ab", "gpuperf.cli_ab", "add_ab_command"))

#: The errors that name their cause and the fix, by the module that defines each: ``main`` prints one as a line
#: and exits 1. Only a module that was imported can have raised its error, so none is imported to look.
ERRORS = (("gpuperf.cli_common", "CliError"), ("gpuperf.store.reading", "InputError"),
          ("gpuperf.store.results", "ResultsError"), ("gpuperf.store.baseline_entry", "BaselineError"),
          ("gpuperf.verdict.fleet", "FleetError"), ("gpuperf.store.history_target", "HistoryError"),
          ("gpuperf.history.schema", "SchemaError"), ("gpuperf.history.rows", "HistoryInputError"),
          ("gpuperf.bisect", "BisectError"), ("gpuperf.gitrepo", "GitError"),
          ("gpuperf.cli_trend", "PageError"))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser; given a command line that starts with a command, only that command's."""
    parser = CommandParser(prog=_prog(),
                                     description="gpuperf: GPU identity and peaks, run comparisons, baseline "
                                                 "files, plots.")
    parser.add_argument("--version", action="version", version=f"gpuperf {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = argv[0] if argv and argv[0] in {name for name, _, _ in COMMANDS} else None
    version_only = list(argv or ())[:1] == ["--version"]  # answered before any command is parsed
    for name, module, function in COMMANDS:
        if named in (None, name) and not version_only:
            add_command: Callable[[Any], None] = getattr(importlib.import_module(module), function)
            add_command(commands)
    if named is not None:  # what the command line left over is refused by this parser, with the command's code
        parser.usage_exit = getattr(commands.choices[named], "usage_exit", parser.usage_exit)
    return parser


def _known_error(exc: Exception) -> bool:
    return isinstance(exc, tuple(getattr(sys.modules[module], name) for module, name in ERRORS
                                 if module in sys.modules))


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


def _tolerant_streams() -> None:
    """Output that the stream's encoding cannot hold (``Δ`` under ``PYTHONIOENCODING=ascii``, a C locale) is written
    escaped (``\\u0394``) rather than ending the command in a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_streams()
    args = build_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except Exception as exc:
        if _known_error(exc):
            print(f"gpuperf: error: {_one_line(str(exc))}", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(exc, OSError):
            print(f"gpuperf: error: {_one_line(describe_os_error(exc))}", file=sys.stderr)
            return EXIT_ERROR
        raise


def _one_line(message: str) -> str:
    """An error as one terminal line: the ids and paths it quotes are untrusted (``untrusted.terminal``)."""
    from gpuperf.untrusted import terminal

    return terminal(message, ERROR_WIDTH)
