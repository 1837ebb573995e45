"""The A/B verdict: one case measured in both trees, in alternation, judged on its paired differences.

The rule (``python -m gpuperf ab``, docs/ab.md):

- **Rounds.** The base (A) and the head (B) measure a case in turns, A B B A A B …: round *i* is the *i*-th
  figure of each side, and gives one paired log-ratio ln(head / base) of the case's throughput (higher is
  better, as everywhere in the gate). Pairing takes out what drifts between rounds (the host's clock and
  temperature, the other tenants of the machine) and what differs between hosts, which is what limits the
  baseline gate (``gate.py``) to bands of 4 % and more.
- **Basis.** Judged on time, unless a round of either side ran more than ``gate.CLOCK_MOVED`` below the
  maximum SM clock (``gate.own_basis``), every round has a figure at max clock and both trees ran the same
  kernels: then on cycles (the figure at max clock), as the gate judges a power-capped case. A kernel change is
  judged on time: a new kernel that draws more power runs at a lower clock, and that is a real slowdown.
- **Interval.** The mean of the paired log-ratios with its Student t interval (``CONFIDENCE``), both shown as
  percentages of throughput: Δ = exp(mean) − 1.
- **Verdict.** ``SLOWER`` when Δ is below −threshold *and* the interval excludes zero; ``FASTER`` mirrored;
  ``SAME`` when neither holds and the interval is as narrow as the rule needs, or lies wholly inside ±threshold
  (whatever changed is smaller than the threshold: an equivalence test). At the round limit with an interval that
  still reaches past the threshold (a case whose rounds scatter with where its buffers land): ``SAME`` judged on
  its mean when Δ lies within ±threshold, the row saying so and how many rounds would settle it; ``NOISY`` when Δ
  lies past the threshold but the interval reaches zero.
- **Stopping.** Enough rounds once there are ``MIN_ROUNDS`` and the interval's half-width is at most
  ``PRECISION`` × threshold (a slowdown at the threshold then excludes zero by a margin, and an unchanged case
  lies far inside the threshold), or the interval lies wholly inside or wholly past the threshold (the verdict is
  known), or at the round limit.
- **Confirmation.** A ``SLOWER``, ``FASTER`` or ``NOISY`` case is measured again, a fresh series of rounds in a
  fresh pair of processes (``confirm``): a change stands only when it shows twice, the series nearer zero then; a
  change the second series turns round is ``NOISY``; otherwise the second series' verdict stands. What two
  processes differ by repeats in all their rounds, however many: on an H200 an unchanged batched GEMM read −2.15 %
  [−2.26, −2.04] in one pair, its whole interval past −2 %.

A case measured on one side only, or without a figure on a side, is ``UNPAIRED``: never a pass.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpuperf.store.records import Record
from gpuperf.verdict.gate import Basis, own_basis, valid_figure
from gpuperf.verdict.student_t import t_quantile

#: The default slowdown an A/B run fails on. Each round is sampled with it as its band, until its median's 95 %
#: interval is within a quarter of it (0.5 %), so a round's figure is known to a few tenths of a percent on one
#: GPU, while the baseline gate needs 4–7.5 % bands because hosts differ (docs/fleet.md); 2 % is four times a
#: round's noise.
#: A/A runs on H200s measure what it costs in false alarms (evidence/ab.md).
DEFAULT_THRESHOLD = 0.02
#: The two-sided confidence of the paired interval.
CONFIDENCE = 0.95
#: At least this many paired rounds before a verdict (A B B A A B): fewer leave the interval's width itself
#: unknown (a t quantile at one degree of freedom is 12.7).
MIN_ROUNDS = 3
#: The default round limit: a case still too noisy then is ``NOISY``.
DEFAULT_ROUNDS_MAX = 12
#: Enough rounds when the interval's half-width is at most this fraction of the threshold: an unchanged case
#: must then show a mean beyond the threshold, twice the half-width, to be called slower (a chance far below
#: 1 in 10,000 per case), and a slowdown at the threshold excludes zero.
PRECISION = 0.5


class Verdict:
    SLOWER = "SLOWER"
    FASTER = "FASTER"
    SAME = "SAME"
    NOISY = "NOISY"
    UNPAIRED = "UNPAIRED"  # measured on one side only, or without a figure on one side

    #: Display order: what needs a person first.
    ORDER = (SLOWER, UNPAIRED, NOISY, FASTER, SAME)
    #: The verdicts that are not a pass: a slowdown, and evidence that is missing.
    FAILING = frozenset({SLOWER, UNPAIRED, NOISY})


@dataclass(frozen=True)
class RoundFigure:
    """What one side's round of a case measured, as far as the rule needs it."""

    value: float
    value_at_max_clock: float | None = None
    clock_bound: bool | None = None
    call_clock_mhz: float | None = None
    max_clock_mhz: float | None = None

    @classmethod
    def from_record(cls, record: Record) -> RoundFigure:
        return cls(value=record.value, value_at_max_clock=record.value_at_max_clock, clock_bound=record.clock_bound,
                   call_clock_mhz=record.call_clock_mhz, max_clock_mhz=record.max_clock_mhz)

    @property
    def basis(self) -> str:
        return own_basis(self.clock_bound, self.value_at_max_clock, self.call_clock_mhz, self.max_clock_mhz)


@dataclass(frozen=True)
class Paired:
    """The paired log-ratios ln(head / base) of a case on one basis, with their statistics as properties."""

    log_ratios: tuple[float, ...]
    basis: str = Basis.TIME
    confidence: float = CONFIDENCE

    @property
    def rounds(self) -> int:
        return len(self.log_ratios)

    @property
    def mean(self) -> float:
        return math.fsum(self.log_ratios) / self.rounds if self.log_ratios else math.nan

    @property
    def half_width(self) -> float:
        """The interval's half-width on the log scale; infinite below two rounds (no spread is known)."""
        if self.rounds < 2:
            return math.inf
        spread = statistics.stdev(self.log_ratios) / math.sqrt(self.rounds)
        return t_quantile((1 - self.confidence) / 2, self.rounds - 1) * spread

    @property
    def delta_pct(self) -> float:
        return 100 * math.expm1(self.mean)

    @property
    def interval_pct(self) -> tuple[float, float]:
        return 100 * math.expm1(self.mean - self.half_width), 100 * math.expm1(self.mean + self.half_width)


def judged_basis(base: Sequence[RoundFigure], head: Sequence[RoundFigure], same_kernels: bool) -> str:
    """Cycles when some round of either side ran clock-capped and every round has a figure at max clock, the
    kernels being the same on both sides; time otherwise (see the module's rule)."""
    rounds = [*base, *head]
    if not same_kernels or not rounds or any(not valid_figure(r.value_at_max_clock) for r in rounds):
        return Basis.TIME
    return Basis.CYCLES if any(r.basis == Basis.CYCLES for r in rounds) else Basis.TIME


def pair(base: Sequence[RoundFigure], head: Sequence[RoundFigure], same_kernels: bool = True,
         confidence: float = CONFIDENCE) -> Paired:
    """The rounds both sides measured, paired in order, on the basis ``judged_basis`` picks."""
    basis = judged_basis(base, head, same_kernels)

    def figure(r: RoundFigure) -> float:
        return (r.value_at_max_clock or math.nan) if basis == Basis.CYCLES else r.value

    ratios = tuple(math.log(figure(h) / figure(b)) for b, h in zip(base, head)
                   if valid_figure(figure(b)) and valid_figure(figure(h)))
    return Paired(ratios, basis, confidence)


def check_threshold(threshold: float) -> float:
    if not 0 < threshold < 1:
        raise ValueError(f"the A/B threshold is a fraction between 0 and 1 (0.02 for 2 %), got {threshold}")
    return threshold


def within(paired: Paired, threshold: float) -> bool:
    """The whole interval lies inside ±threshold: whatever changed, it is less than the threshold (an equivalence
    test), however wide the interval is otherwise."""
    low, high = paired.interval_pct
    return paired.rounds >= 2 and -100 * threshold <= low and high <= 100 * threshold


def beyond(paired: Paired, threshold: float) -> bool:
    """The whole interval lies past the threshold, on one side: a change larger than the threshold."""
    low, high = paired.interval_pct
    return high < -100 * threshold or low > 100 * threshold


def enough(paired: Paired, threshold: float = DEFAULT_THRESHOLD, rounds_max: int = DEFAULT_ROUNDS_MAX) -> bool:
    """Whether a case needs no further round: the limit is hit, or after ``MIN_ROUNDS`` the verdict is known: the
    interval is as narrow as the rule needs, or lies wholly inside the threshold (SAME) or wholly past it."""
    if paired.rounds >= rounds_max:
        return True
    return paired.rounds >= MIN_ROUNDS and (paired.half_width <= PRECISION * threshold or within(paired, threshold)
                                            or beyond(paired, threshold))


def rounds_needed(paired: Paired, threshold: float = DEFAULT_THRESHOLD, most: int = 1000) -> int | None:
    """About how many rounds this case's paired log-ratios, as they scatter so far, need for the interval's
    half-width to reach ``PRECISION`` × threshold (``None``: fewer than two rounds; ``most`` + 1: more than that)."""
    if paired.rounds < 2:
        return None
    spread = statistics.stdev(paired.log_ratios)

    def settles(rounds: int) -> bool:  # the half-width falls as rounds grow: a bisection finds the first
        return t_quantile((1 - paired.confidence) / 2, rounds - 1) * spread / math.sqrt(rounds) <= PRECISION * threshold

    low, high = MIN_ROUNDS, most
    if settles(low):
        return low
    if not settles(high):
        return most + 1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if settles(middle) else (middle, high)
    return high


@dataclass(frozen=True)
class CaseVerdict:
    """A case's A/B verdict: the status, the paired Δ (%) with its interval, the rounds, the basis, why."""

    status: str
    delta_pct: float | None = None
    low_pct: float | None = None
    high_pct: float | None = None
    rounds: int = 0
    basis: str = Basis.TIME
    note: str = ""
    series: int = 1  # how many series of rounds were measured (2 when a slowdown was confirmed)

    @property
    def failed(self) -> bool:
        return self.status in Verdict.FAILING


def judge(paired: Paired, threshold: float = DEFAULT_THRESHOLD) -> CaseVerdict:
    """The verdict on a case's paired rounds (the module's rule)."""
    if paired.rounds == 0:
        return CaseVerdict(Verdict.UNPAIRED, note="no round was measured on both sides")
    low, high = paired.interval_pct
    limit = 100 * threshold
    if paired.delta_pct < -limit and high < 0:
        status, note = Verdict.SLOWER, f"slower by more than {limit:g} %, and the interval excludes 0"
    elif paired.delta_pct > limit and low > 0:
        status, note = Verdict.FASTER, f"faster by more than {limit:g} %, and the interval excludes 0"
    elif paired.half_width <= PRECISION * threshold:
        status, note = Verdict.SAME, ""
    elif within(paired, threshold):
        status, note = Verdict.SAME, f"the interval lies inside ±{limit:g} %: any change is smaller than the threshold"
    else:
        needed = rounds_needed(paired, threshold)
        unsettled = (f"the interval [{low:+.2f}, {high:+.2f}] % reaches past ±{limit:g} % after {paired.rounds} "
                     f"rounds, and is wider than the ±{100 * PRECISION * threshold:g} % that would settle it; its rounds "
                     f"scatter so that about {needed} would")
        if abs(paired.delta_pct) <= limit:
            status, note = Verdict.SAME, (f"judged on its mean at the round limit: {unsettled} (raise --rounds-max "
                                          "for it); a change within the interval is not excluded")
        else:
            status, note = Verdict.NOISY, f"{unsettled}: raise --rounds-max, or find what else runs on the GPU"
    if paired.basis == Basis.CYCLES:
        note = "; ".join(part for part in (note, "judged on cycles: a round ran clock-capped") if part)
    return CaseVerdict(status, paired.delta_pct, low, high if math.isfinite(high) else None, paired.rounds,
                       paired.basis, note)


def needs_confirmation(verdict: CaseVerdict) -> bool:
    """Whether a case's first series is measured again in a fresh pair of processes: a change either way (an
    unchanged tree must read SAME, and a speed-up is a claim too), or a mean past the threshold that its rounds could
    not tell from zero."""
    return verdict.status in (Verdict.SLOWER, Verdict.FASTER, Verdict.NOISY)


def confirm(first: CaseVerdict, second: CaseVerdict) -> CaseVerdict:
    """The standing verdict of a case's two series of rounds (the second in a fresh pair of processes): a change
    stands only when the re-measurement shows it too, the series nearer zero then; a change the second series turns
    round is NOISY (the two disagree); otherwise the second series' verdict (``SAME``, ``NOISY``, or a change after
    a ``NOISY`` first)."""
    changes = (Verdict.SLOWER, Verdict.FASTER)
    if first.status in changes and second.status == first.status:
        chosen = min((first, second), key=lambda v: abs(v.delta_pct or 0.0))
        status = chosen.status
    else:
        chosen = second
        turned = first.status in changes and second.status in changes
        status = Verdict.NOISY if turned else second.status
    tries = f"re-measured in a fresh pair of processes: first series {first.delta_pct or math.nan:+.2f} % " \
            f"({first.status}), second {second.delta_pct or math.nan:+.2f} % ({second.status})"
    note = "the two series disagree" if status != chosen.status else chosen.note
    return CaseVerdict(status, chosen.delta_pct, chosen.low_pct, chosen.high_pct, chosen.rounds,
                       chosen.basis, "; ".join(part for part in (note, tries) if part), series=2)


def unpaired(why: str) -> CaseVerdict:
    return CaseVerdict(Verdict.UNPAIRED, note=why)
