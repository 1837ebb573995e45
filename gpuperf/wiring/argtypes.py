"""Command-line value types shared by the pytest options and ``python -m gpuperf``.

Each raises ``argparse.ArgumentTypeError`` with the fix, so a bad value fails at start-up with a message.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gpuperf.vocabulary import Flush


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from exc
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from exc


def fraction(text: str) -> float:
    value = _number(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in [0, 1): write 0.04 for 4 %")
    return value


def positive_fraction(text: str) -> float:
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in (0, 1]: write 0.25 for a quarter")
    return value


def positive_float(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be zero or positive")
    return value


def positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; indices start at 0")
    return value


@dataclass(frozen=True)
class AtMost:
    """A value type (``positive_int``, ``positive_float``, …) with an upper bound and the reason for it: a value
    past it would crash or hang the run (a float too large for a count of calls, a warm-up of days), so it is
    refused as it is parsed."""

    parse: Callable[[str], float]
    most: float
    why: str

    @property
    def __name__(self) -> str:  # argparse names a type by it
        return getattr(self.parse, "__name__", "value")

    def __call__(self, text: str) -> float:
        value = self.parse(text)
        if value > self.most:
            raise argparse.ArgumentTypeError(f"{text!r} is more than {self.most:g}: {self.why}")
        return value


def gpu_selection(text: str) -> str:
    """``--gpu``: an index, a comma list of distinct indices, or ``all``."""
    if text == "all":
        return text
    parts = [part.strip() for part in text.split(",")]
    if not parts or not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"--gpu {text!r}: use an index (0), a list (0,1) or 'all'")
    indices = [int(part) for part in parts]
    twice = sorted({index for index in indices if indices.count(index) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"--gpu {text!r} names GPU {', '.join(map(str, twice))} more than once: "
                                         "name each device once")
    return ",".join(map(str, indices))


def flush_modes(text: str) -> tuple[str, ...]:
    """``--flush-modes``: ``cold``, ``hot`` or both, in the order given."""
    modes = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    bad = [mode for mode in modes if mode not in Flush.MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"--flush-modes {text!r}: use cold, hot or cold,hot")
    return modes


def existing_folder(text: str) -> str:
    """A folder that exists (``--baseline-dir``): a file or a missing folder would silently mean "no
    baselines", every case NO_BASELINE."""
    path = Path(text)
    if path.is_dir():
        return text
    if path.exists():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder; pass the folder that holds the "
                                         "<gpu-slug>.yaml baselines")
    raise argparse.ArgumentTypeError(f"no folder {text!r}; create it (mkdir -p {text}) or fix the path")


def iso_date(text: str) -> str:
    """A ``--since`` value: an ISO date or date-time, compared with the runs' start times (UTC)."""
    try:
        datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO date; use e.g. 2026-11-30 or "
                                         "2026-11-30T12:00") from exc
    return text
