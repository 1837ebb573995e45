"""The option spec: every option of the pytest plugin and every option ``python -m gpuperf`` shares with it or
between its commands, declared once (name, value type, default, help), and the session options built from them.

A default is never written here: each ``Option`` names the value where the code that uses it keeps it (the
gate's tolerance in ``verdict/gate_config.py``, the stopping rule's in ``measure/stats.py``, the warm-up's and the
sample length's in ``measure/measurement.py``, the ones the session owns, which GPU and where baselines are, in
``session_options.py``). A help text shows its default through ``{default}``, formatted from that value.
``tests/test_option_spec.py`` fails when a default is written a second time.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuperf.measure.measurement import DEFAULT_MIN_SAMPLE_S, DEFAULT_WARMUP_CALLS, DEFAULT_WARMUP_TIME_S
from gpuperf.measure.stats import StoppingRule
from gpuperf.suite.cases_dir import DEFAULT_CASES_DIR
from gpuperf.verdict.gate_config import DEFAULT_MUST_CATCH, DEFAULT_NOISE_K, DEFAULT_TOLERANCE, GateConfig, Policy, gate_mode_from_env
from gpuperf.vocabulary import Flush
from gpuperf.wiring.argtypes import (AtMost, existing_folder, flush_modes, fraction, gpu_selection, iso_date,
                                     non_negative_float, positive_float, positive_fraction, positive_int)
from gpuperf.wiring.session_options import (DEFAULT_BASELINES_DIR, DEFAULT_GPUS, MISSING_POLICIES, UNRELIABLE_POLICIES,
                                            Options)

#: Upper bounds of the sampling options: past them a value would crash (a float too large to count calls) or hang
#: the run, so it is refused as it is parsed (``argtypes.AtMost``).
MOST_SAMPLES = 10_000
MOST_SAMPLE_S = 1.0
MOST_WARMUP_CALLS = 100_000
MOST_WARMUP_S = 60.0
#: The pytest group the options are listed under in ``pytest --help``.
PYTEST_GROUP = ("gpuperf", "GPU performance regression (gpuperf)")


def shown(value: Any) -> str:
    """A default as a help text shows it: ``0.04``, ``2``, ``cold,hot``."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return str(value)


@dataclass(frozen=True)
class Option:
    """One command-line option (or positional argument) as both ``pytest.Parser.addoption`` and
    ``argparse.ArgumentParser.add_argument`` take it. ``help`` may hold ``{default}``."""

    flags: tuple[str, ...]
    help: str
    type: Callable[[str], Any] | None = None
    default: Any = None
    action: str | None = None
    choices: Sequence[str] | None = None
    metavar: str | tuple[str, ...] | None = None
    nargs: str | int | None = None

    @property
    def dest(self) -> str:
        """The attribute the value lands on (``--noise-k`` → ``noise_k``)."""
        return self.flags[0].lstrip("-").replace("-", "_")

    @property
    def help_text(self) -> str:
        return self.help.format(default=shown(self.default))

    def kwargs(self) -> dict[str, Any]:
        given = {"type": self.type, "action": self.action, "choices": self.choices, "metavar": self.metavar,
                 "nargs": self.nargs}
        keywords = {name: value for name, value in given.items() if value is not None}
        if self.default is not None:
            keywords["default"] = self.default
        return {**keywords, "help": self.help_text}

    def add_to(self, add: Callable[..., Any]) -> None:
        """Declare it through ``add`` (``parser.addoption`` or ``parser.add_argument``)."""
        add(*self.flags, **self.kwargs())


@dataclass(frozen=True)
class IniKey:
    name: str
    help: str
    default: str

    @property
    def help_text(self) -> str:
        return self.help.format(default=self.default)


def add_all(add: Callable[..., Any], options: Sequence[Option]) -> None:
    for option in options:
        option.add_to(add)


# -- the gate's options: pytest's and ``compare``'s ----------------------------------------------------------

TOLERANCE = Option(("--tolerance",), type=fraction, default=DEFAULT_TOLERANCE,
                   help="allowed slowdown as a fraction (default {default}); an entry's own tolerance in its "
                        "baseline file wins; effective = min(max(this, k × recorded spread, recorded run spread), "
                        "--max-tolerance)")
NOISE_K = Option(("--noise-k",), type=non_negative_float, default=DEFAULT_NOISE_K,
                 help="k in the effective tolerance's k × recorded relative IQR (default {default})")
MAX_TOLERANCE = Option(("--max-tolerance",), type=fraction,
                       help="cap on the effective tolerance, whatever the recorded noise (default twice "
                            "--tolerance)")
MUST_CATCH = Option(("--must-catch",), type=fraction, default=DEFAULT_MUST_CATCH,
                    help="the slowdown the gate must catch on every host, as a fraction (default {default}): a run "
                         "says at its start which baseline entries cannot (their resolution is larger), and their "
                         "notes say it")
GATE_OPTIONS = (TOLERANCE, NOISE_K, MAX_TOLERANCE, MUST_CATCH)


def gate_config(values: Mapping[str, Any] | Callable[[str], Any], strict: bool = False) -> GateConfig:
    """The gate's configuration from the values of ``GATE_OPTIONS`` (a namespace's ``vars`` or pytest's
    ``getoption``); ``ValueError`` names a cap below the tolerance."""
    get = values.get if isinstance(values, Mapping) else values
    given: dict[str, Any] = {option.dest: get(option.dest) for option in GATE_OPTIONS}
    return GateConfig(**given, strict=strict)


# -- the pytest plugin's options, in ``pytest --help`` order -------------------------------------------------

PYTEST_OPTIONS: tuple[Option, ...] = (
    Option(("--update-baselines",), action="store_true",
           help="re-measure the selected cases and rewrite their entries in baselines/<gpu>.yaml"),
    *GATE_OPTIONS,
    Option(("--gate",), action="store_true",
           help="gate mode (also on when $CI is set): every selected baselined case must be measured, a missing "
                "baseline or a stale entry fails the run"),
    Option(("--allow-stale",), action="store_true",
           help="in gate mode, list baseline entries whose test no longer exists without failing the run"),
    Option(("--strict-baselines",), action="store_true",
           help="fail cases that improved beyond tolerance, so stale baselines get refreshed"),
    Option(("--no-flush",), action="store_true", help="hot measurements: no L2 flush (same as --flush-modes hot)"),
    Option(("--flush-modes",), type=flush_modes,
           help=f"comma list of cold,hot; each perf test runs once per mode (default {Flush.COLD})"),
    Option(("--missing-baseline",), choices=MISSING_POLICIES,
           help=f"a case with no baseline entry: skip, fail or pass (default {Policy.missing}, fail in gate mode)"),
    Option(("--on-unreliable",), choices=UNRELIABLE_POLICIES, default=Policy.on_unreliable,
           help="a case measured while throttled or shared: skip, fail or pass (default {default})"),
    Option(("--fail-on-version-change",), action="store_true",
           help="stop before measuring if the driver, CUDA or cuBLAS version differs from the baseline header"),
    Option(("--gpu",), type=gpu_selection, default=DEFAULT_GPUS,
           help="GPU index, comma list or 'all' (one case per device; default {default}); with -n, workers are "
                "pinned round-robin"),
    Option(("--baseline-dir",), type=existing_folder,
           help="directory of <gpu-slug>.yaml files (default: the gpuperf_baselines ini key, "
                f"{DEFAULT_BASELINES_DIR}, under the rootdir)"),
    Option(("--results-dir",),
           help="where results/<timestamp>/ is written (default <rootdir>/results); 'none' disables"),
    Option(("--history",),
           help="where each run is appended: a SQLite file path, sqlite:///PATH, postgresql://… or none (default "
                "$GPUPERF_HISTORY, else <rootdir>/results/history.sqlite)"),
    Option(("--dry-run",), action="store_true",
           help="run the selected perf tests without a GPU, for a CPU CI: case tables, the calls to measure, perf "
                "and the work helpers, the baseline entries and the gate's accounting are checked as on the GPU; "
                "no kernel is launched, no figure measured, nothing written (tests that do not measure are skipped)"),
    Option(("--run-slow",), action="store_true", help="include cases marked slow"),
    Option(("--min-samples",), type=AtMost(positive_int, MOST_SAMPLES, "a case's figure is precise long before "
                                                                       "that, and more samples would outlast "
                                                                       "--case-timeout"),
           default=StoppingRule.min_samples, help="samples per case at least (default {default})"),
    Option(("--min-time",), type=non_negative_float, default=StoppingRule.min_time_s,
           help="without a band (an A/B round), timed GPU seconds per case at least when timing with CUDA events, "
                "the fallback without CUPTI (default {default}; traced calls sample 0.05 s of GPU time, flushes "
                "included)"),
    Option(("--band-fraction",), type=positive_fraction, default=StoppingRule.band_fraction,
           help="stop sampling a case once the 95%% interval half-width of the figure its verdict reads (cycles "
                "per call when judged on cycles, else time) is within this fraction of its band: its entry's "
                "effective tolerance, else --tolerance (default {default}; provisional, docs/measuring.md)"),
    Option(("--max-gpu-time",), type=positive_float, default=StoppingRule.max_gpu_s,
           help="GPU seconds (flushes included) a case's figure may sample at most before the band's precision "
                "is reached (default {default})"),
    Option(("--noise-target",), type=positive_float, default=StoppingRule.noise_target,
           help="without a band (an A/B round): stop once the median's relative 95%% interval half-width is below "
                "this (default {default})"),
    Option(("--min-sample-time",), type=AtMost(positive_float, MOST_SAMPLE_S, "a sample that long leaves a case too "
                                                                            "few samples within --case-timeout"),
           default=DEFAULT_MIN_SAMPLE_S,
           help="seconds of GPU time one sample of a short call covers: a traced sample is the mean kernel time of "
                "that many calls, an event-timed cold sample times them at once over rotated operand copies "
                "(default {default})"),
    Option(("--case-timeout",), type=positive_float, default=StoppingRule.timeout_s,
           help="wall seconds of sampling per case at most (default {default})"),
    Option(("--warmup",), type=AtMost(positive_int, MOST_WARMUP_CALLS, "more calls than any warm-up needs: the "
                                                                      "case would hang"),
           default=DEFAULT_WARMUP_CALLS, help="warm-up calls at least (default {default})"),
    Option(("--warmup-time",), type=AtMost(non_negative_float, MOST_WARMUP_S, "a warm-up longer than a minute per "
                                                                             "case only delays the run"),
           default=DEFAULT_WARMUP_TIME_S, help="warm-up seconds at least (default {default})"),
)

INI_KEYS = (
    IniKey("gpuperf_cases", default=DEFAULT_CASES_DIR,
           help="directory of the case tables (<family>.yaml), relative to the rootdir (default {default})"),
    IniKey("gpuperf_baselines", default=DEFAULT_BASELINES_DIR,
           help="directory of the <gpu-slug>.yaml baselines, relative to the rootdir (default {default}); "
                "--baseline-dir wins"),
)


def add_pytest_options(parser: Any) -> None:
    """The plugin's options and ini keys on pytest's parser (or anything with ``getgroup`` and ``addini``)."""
    add_all(parser.getgroup(*PYTEST_GROUP).addoption, PYTEST_OPTIONS)
    for key in INI_KEYS:
        parser.addini(key.name, default=key.default, help=key.help_text)


def session_options(get: Callable[[str], Any], ini: Callable[[str], Any], root: Path, ci: str | None) -> Options:
    """The session's ``Options`` from the values of ``PYTEST_OPTIONS`` (``get``, by dest) and the ini keys;
    ``ValueError`` names an inconsistent pair (a cap below the tolerance)."""
    modes = (Flush.HOT,) if get("no_flush") else (get("flush_modes") or (Flush.COLD,))
    gate_mode = bool(get("gate")) or gate_mode_from_env(ci)
    results = get("results_dir")
    dry_run = bool(get("dry_run"))
    if dry_run and get("update_baselines"):
        raise ValueError("--dry-run measures nothing, so it cannot record baselines: drop --update-baselines (or "
                         "--dry-run, on a GPU)")
    rule = StoppingRule(min_samples=max(3, get("min_samples")), min_time_s=get("min_time"),
                        noise_target=get("noise_target"), timeout_s=get("case_timeout"),
                        band_fraction=get("band_fraction"), max_gpu_s=get("max_gpu_time"))
    return Options(
        gate=gate_config(get, strict=get("strict_baselines")), rule=rule, update=get("update_baselines"),
        missing=get("missing_baseline") or ("fail" if gate_mode else Policy.missing),
        on_unreliable=get("on_unreliable"),
        baseline_dir=Path(get("baseline_dir") or root / ini("gpuperf_baselines")), flush_modes=modes,
        gpus=get("gpu"), warmup_calls=get("warmup"), warmup_time_s=get("warmup_time"),
        min_sample_s=get("min_sample_time"),
        results_dir=None if results == "none" or dry_run else Path(results or root / "results"),
        fail_on_version_change=get("fail_on_version_change"), gate_mode=gate_mode, allow_stale=get("allow_stale"),
        dry_run=dry_run,
    )


# -- options several commands of ``python -m gpuperf`` share --------------------------------------------------

ALLOW_OTHER_GPU = Option(("--allow-other-gpu",), action="store_true",
                         help="compare figures of two GPU models (refused otherwise: the deltas would measure the "
                              "hardware); the header then says so")
RUNS = Option(("runs",), nargs="+", metavar="RUN",
              help="[LABEL=]results.json or results directory; @FILE for the runs FILE lists, one a line")
HISTORY_TARGET_HELP = ("a SQLite file, sqlite:///PATH or postgresql://… (default $GPUPERF_HISTORY, else "
                       "results/history.sqlite)")
HISTORY_TARGET = Option(("--history",), metavar="TARGET", help=HISTORY_TARGET_HELP)
#: The same option on each ``history`` subcommand, where it is also accepted after the subcommand's name.
HISTORY_TARGET_AFTER = Option(("--history",), metavar="TARGET", default=argparse.SUPPRESS, help=HISTORY_TARGET_HELP)
GPU_MODEL = Option(("--gpu",), metavar="SLUG",
                   help="only runs on this GPU model (python -m gpuperf device --slug, e.g. nvidia-h200)")
SINCE = Option(("--since",), metavar="DATE", type=iso_date,
               help="only runs started on or after DATE (ISO, e.g. 2026-11-30)")
RUN_FILTERS = (GPU_MODEL, SINCE)
