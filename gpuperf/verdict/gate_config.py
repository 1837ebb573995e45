"""The gate's configuration: the band's tolerance and its noise factor and cap, the outcome policy of a test, and
gate mode from ``$CI``: what the command line sets, with the defaults. The rule that uses them is ``gate.py``; they
live apart from it so that the plugin declares its options (``wiring/options.py``) without loading the baseline
store and PyYAML, which the rule needs.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass

#: The default allowed slowdown. Chosen from measurement, not taste: over three full H200 runs against one
#: baseline (369 case-runs) the largest slowdown of an unchanged case was 3.3 % (a 5 µs FP16 GEMM), so a
#: 3 % gate raised a false alarm; 4 % does not, and still fails a real 5 % slowdown.
DEFAULT_TOLERANCE = 0.04
DEFAULT_NOISE_K = 2.0
#: The slowdown a gate run is expected to catch on every host: a run says at its start which entries of its
#: baseline cannot (``Entry.resolution``, ``--must-catch``).
DEFAULT_MUST_CATCH = 0.05
#: The cap on the effective tolerance, as a multiple of the tolerance, when ``--max-tolerance`` is not given.
DEFAULT_CAP_FACTOR = 2.0


@dataclass(frozen=True)
class GateConfig:
    tolerance: float = DEFAULT_TOLERANCE
    noise_k: float = DEFAULT_NOISE_K
    max_tolerance: float | None = None  # None: DEFAULT_CAP_FACTOR × tolerance
    strict: bool = False
    must_catch: float = DEFAULT_MUST_CATCH  # the slowdown whose misses the run and the notes name

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be a fraction in [0, 1) (0.03 = 3 %), got {self.tolerance}")
        if self.noise_k < 0:
            raise ValueError(f"noise k must be ≥ 0, got {self.noise_k}")
        if not 0 <= self.must_catch < 1:
            raise ValueError(f"must catch must be a fraction in [0, 1) (0.05 = 5 %), got {self.must_catch}")
        if self.max_tolerance is not None and not self.tolerance <= self.max_tolerance < 1:
            raise ValueError(f"max tolerance must be a fraction in [tolerance, 1) (tolerance {self.tolerance}), "
                             f"got {self.max_tolerance}")

    @property
    def cap(self) -> float:
        return self.cap_for(self.tolerance)

    def cap_for(self, tolerance: float) -> float:
        """The cap of a band whose tolerance is ``tolerance`` (an entry's hand-set one, or ``--tolerance``):
        ``--max-tolerance``, or twice that tolerance."""
        return DEFAULT_CAP_FACTOR * tolerance if self.max_tolerance is None else self.max_tolerance


@dataclass(frozen=True)
class Policy:
    """How a test ends for the statuses that are not failures by themselves (local defaults)."""

    on_unreliable: str = "skip"  # skip | fail | pass
    missing: str = "skip"  # skip | fail | pass
    strict: bool = False


#: ``$CI`` values that do not switch gate mode on.
_CI_OFF = frozenset({"", "0", "false", "no", "off"})


def gate_mode_from_env(ci: str | None) -> bool:
    """Gate mode is on when ``$CI`` is set to anything but an empty, ``0`` or ``false``-like value."""
    return (ci or "").strip().lower() not in _CI_OFF
