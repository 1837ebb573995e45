"""How each host of a GPU model reads each case: a robust two-factor (run level × host) fit. Pure, NumPy only.

Hosts of one model differ for some cases by more than runs on one host move (the committed fleet: 4 of 13 H200s
read memory-bound cases 1-3 % high, compute-bound cases agree within ±0.3 %, one host reads 1-token projections
−2.9 %), and a CI fleet lands its runs on random hosts. Splitting a case into a series per host then leaves
series of a few runs each, where a step is found late and placed loosely; pooling them unadjusted makes every
change of host look like a change. So each host's **offset** is estimated from its own runs and removed, and the
case is judged as one series.

The fit works on logarithms, case by case: the run level is the median of each block of ``WINDOW`` consecutive
runs of the figures with the hosts' offsets removed (a median follows a step: only the block holding it reads a
level between the two, so a change that reaches every host is not mistaken for a host's offset), and a host's offset is the median of its runs' residuals from
that level; the two are refined in turn (``ITERATIONS``). The offsets are then taken relative to the run-weighted
median host, so the series keeps the level of the hosts that read alike. A host with fewer than
``MIN_HOST_RUNS`` runs of a case has too few for a median of its own, and one whose own offset stands less than
``CLEAR`` standard errors clear of its class's is telling its runs' noise: it takes its **class** offset, the median
of its offsets over the cases of the same class (``class_of``: clock-bound or memory-bound), measured on every case
it ran.

What is removed from each run is its host's offset **estimated without that run** (leave-one-out): a host's own
offset from its other runs (the mean of their residuals, each clipped to ``CLIP`` noise σ of the host's median), its
class offset less the median over the class's cases of how much that run moved their hosts' offsets. A run then
never pulls its own offset towards itself: the runs before a slowdown and the slow runs are judged alike (both out of
sample), and a step on every case, which moves every case's offsets alike and so their class's median, is not partly
removed as the offset of the hosts its first slow runs landed on (evidence/history.md, "A fleet").

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: Runs of a case a host needs for an offset of its own; with fewer it takes its class's (``class_offsets``).
MIN_HOST_RUNS = 5
#: Runs a block of the level spans: enough for its median to hold the level through a host's offset and the noise,
#: few enough that a step leaves few runs' residuals in a block between two levels.
WINDOW = 9
#: Standard errors by which a host's own offset for a case must stand clear of its class's to be taken.
CLEAR = 3.0
#: Rounds of level, then offsets: the first level is pulled by the hosts' offsets, the second hardly is.
ITERATIONS = 3
#: The leave-one-out offsets are means of residuals clipped to this many noise σ of their host's median: nearly as
#: good as a mean on Gaussian noise, where a leave-one-out median is far noisier (on the generated fleet at 1 % noise
#: it found 92.5 % of the 3 % steps by their third run where these find 94.4 %; these with a run's move of the class
#: offsets measured on the medians, 92.7 %), and one outlying run moves them by at most that much over its runs.
CLIP = 2.5


@dataclass(frozen=True)
class HostOffsets:
    """One case's hosts as the fit reads them: each host's relative offset (``+0.021``: it reads 2.1 % high),
    its runs of the case, and whether the offset is its class's (too few runs of its own)."""

    offsets: np.ndarray  # per host number (0 for a host without runs of the case)
    runs: np.ndarray
    from_class: np.ndarray
    #: Each run's host's offset estimated without that run (``fit``), in run order; ``None``: ``offsets``'.
    by_run: np.ndarray | None = None

    def per_point(self, hosts: np.ndarray) -> np.ndarray:
        """Each point's host's relative offset, the one removed from it: estimated without it where known."""
        result: np.ndarray = self.offsets[hosts] if self.by_run is None else self.by_run
        return result


def block_median(values: np.ndarray, block: int = WINDOW) -> np.ndarray:
    """Each value's block's median, along the last axis: the runs cut into blocks of ``block`` runs (the last block
    takes the runs left over, with the block before it when they are fewer than half a block). A median follows a
    step: only the block that holds it reads a level between the two."""
    length = values.shape[-1]
    whole = max(length // block, 1)
    if whole > 1 and length - whole * block < block // 2:
        whole -= 1  # a short tail joins the block before it
    cut = whole * block if whole > 1 else 0
    level = np.empty_like(values)
    if cut:
        heads = values[..., :cut].reshape(*values.shape[:-1], whole, block)
        level[..., :cut] = np.repeat(np.median(heads, axis=-1), block, axis=-1)
    level[..., cut:] = np.median(values[..., cut:], axis=-1, keepdims=True)
    return level


@dataclass(frozen=True)
class CaseFit:
    """Cases' hosts on the log scale, one row per case: each host's offset (NaN for a host without runs), the
    hosts' runs, each case's noise (the residuals' robust standard deviation, 1.4826 × their median absolute
    deviation), each run's host's offset from the host's other runs (``left_out``: the mean of their residuals
    clipped to ``CLIP`` σ of the host's median; NaN for a host's only run) and how much the run moved the mean of
    its host's residuals (``moved``, unclipped)."""

    offsets: np.ndarray
    sizes: np.ndarray
    noises: np.ndarray
    left_out: np.ndarray
    moved: np.ndarray


def case_offsets(values: np.ndarray, hosts: np.ndarray, count: int) -> CaseFit:
    """The cases' ``CaseFit``, from their figures in run order (``values``: case × run, every case run on the same
    runs) and each run's host number (``< count``)."""
    logs = np.log(values)
    sizes = np.bincount(hosts, minlength=count)
    present = np.flatnonzero(sizes)
    offsets = np.zeros((len(values), count))
    if len(present) < 2:
        unknown = np.full(values.shape, np.nan)
        return CaseFit(np.where(sizes > 0, offsets, np.nan), sizes, np.zeros(len(values)), unknown, unknown)
    by_host = np.argsort(hosts, kind="stable")
    first = np.cumsum(sizes) - sizes
    shift = np.zeros((len(values), 1))
    for _ in range(ITERATIONS):
        residuals = logs - block_median(logs - offsets[:, hosts])
        ranked = residuals[:, by_host]
        for host in present.tolist():
            offsets[:, host] = np.median(ranked[:, first[host]:first[host] + sizes[host]], axis=1)
        shift = np.median(offsets[:, hosts], axis=1, keepdims=True)
        offsets -= shift  # relative to the run-weighted median host
    spread = np.abs(residuals - np.median(residuals, axis=1, keepdims=True) - offsets[:, hosts])
    noises = 1.4826 * np.median(spread, axis=1)
    # the leave-one-out offsets, worked out in the hosts' order (``ranked``: the last round's residuals so)
    in_order = hosts[by_host]
    centre = (offsets + shift)[:, in_order]  # the residuals' scale: before the shift to the median host
    width = CLIP * noises[:, None]
    clipped = np.clip(ranked, centre - width, centre + width)
    starts = first[present]
    clipped_sums = np.zeros((len(values), count))
    clipped_sums[:, present] = np.add.reduceat(clipped, starts, axis=1)
    sums = np.zeros((len(values), count))
    sums[:, present] = np.add.reduceat(ranked, starts, axis=1)
    runs = sizes[in_order]
    others = np.where(runs > 1, runs - 1, 1)
    alone = runs < 2
    ranked_left_out = (clipped_sums[:, in_order] - clipped) / others - shift
    # the move of the mean of its host's residuals, unclipped: a host's two runs, the second on a step on every
    # case, move their class's median by half the step, and so must the correction
    ranked_moved = (ranked - (sums[:, in_order] - ranked) / others) / runs
    ranked_left_out[:, alone] = np.nan
    ranked_moved[:, alone] = np.nan
    left_out, moved = np.empty_like(ranked), np.empty_like(ranked)
    left_out[:, by_host], moved[:, by_host] = ranked_left_out, ranked_moved
    return CaseFit(np.where(sizes > 0, offsets, np.nan), sizes, noises, left_out, moved)


def fit(series: Mapping[Hashable, tuple[np.ndarray, np.ndarray]], count: int,
        class_of: Mapping[Hashable, Hashable] | None = None) -> dict[Hashable, HostOffsets]:
    """Every case's ``HostOffsets`` (relative), from ``(figures in run order, host numbers)`` per case of one GPU
    model: a host's own offset where it has ``MIN_HOST_RUNS`` runs of the case and it stands ``CLEAR`` standard
    errors clear of its class's, else its class's; and the offset removed from each run, estimated without that run
    (the module's docstring). Cases run on the same hosts in the same order (as a fleet's cases mostly are) are
    fitted together, as rows of one array; a run's move of its class's offsets is measured over those."""
    together: dict[bytes, list[Hashable]] = {}
    for key, (_, hosts) in series.items():
        together.setdefault(hosts.astype(np.int64).tobytes(), []).append(key)
    classes = {key: (class_of or {}).get(key) for key in series}
    logged: dict[Hashable, tuple[np.ndarray, np.ndarray, float]] = {}
    left_out: dict[Hashable, np.ndarray] = {}
    class_moved: dict[Hashable, np.ndarray] = {}  # by case: how much each run moved its class's offsets
    for keys in together.values():
        hosts = series[keys[0]][1]
        found = case_offsets(np.vstack([series[key][0] for key in keys]), hosts, count)
        for row, key in enumerate(keys):
            logged[key] = (found.offsets[row], found.sizes, float(found.noises[row]))
            left_out[key] = found.left_out[row]
        several = found.sizes[hosts] > 1  # the runs of hosts with others: a host's only run moves nothing known
        for name in dict.fromkeys(classes[key] for key in keys):
            rows = [row for row, key in enumerate(keys) if classes[key] == name]
            moved = np.zeros(len(hosts))
            moved[several] = np.median(found.moved[rows][:, several], axis=0)
            class_moved.update({keys[row]: moved for row in rows})
    by_class: dict[Hashable, list[np.ndarray]] = {}
    for key, (offsets, _, _) in logged.items():
        by_class.setdefault(classes[key], []).append(offsets)
    class_offsets = {name: _nan_median(np.vstack(rows)) for name, rows in by_class.items()}
    fitted = {}
    for key in series:
        offsets, sizes, case_noise = logged[key]
        pooled = np.nan_to_num(class_offsets[classes[key]])
        # a median of n runs errs by 1.2533 σ / √n: an offset that stands no clearer of its class's than CLEAR of
        # those is the noise of its few runs, and removing it would add that noise to the series
        error = 1.2533 * case_noise / np.sqrt(np.maximum(sizes, 1))
        clear = np.abs(np.nan_to_num(offsets) - pooled) >= CLEAR * error
        own = ((sizes >= MIN_HOST_RUNS) & clear) | (np.count_nonzero(sizes) < 2)  # one host: the series' own level
        chosen = np.where(own, np.nan_to_num(offsets), np.where(sizes > 0, pooled, 0.0))
        by_run = None
        if np.count_nonzero(sizes) >= 2:
            hosts = series[key][1]
            mine = left_out[key]
            by_run = np.expm1(np.where(own[hosts] & ~np.isnan(mine), np.nan_to_num(mine),
                                       np.where(own[hosts], chosen[hosts], chosen[hosts] - class_moved[key])))
        fitted[key] = HostOffsets(offsets=np.expm1(chosen), runs=sizes, from_class=(sizes > 0) & ~own, by_run=by_run)
    return fitted


def _nan_median(rows: np.ndarray) -> np.ndarray:
    """The median of each column over its non-NaN values (NaN where it has none), without NumPy's warning."""
    present = ~np.isnan(rows)
    medians = np.full(rows.shape[1], np.nan)
    for column in np.flatnonzero(present.any(axis=0)):
        medians[column] = np.median(rows[present[:, column], column])
    return medians


@dataclass(frozen=True)
class HostReading:
    """A host that reads some cases differently from its model's other hosts by ``min_size`` or more."""

    gpu_slug: str
    host: str
    cases: int  # cases it reads so
    of: int  # cases it has an offset of its own for
    low: float  # the lowest and highest of those offsets
    high: float
    example: str  # the case it reads furthest off


def hosts_reading_differently(rows: Sequence[tuple[str, str, str, float, int]], min_size: float) -> list[HostReading]:
    """From ``(gpu_slug, host, case, offset, runs)`` per host and case (offsets of hosts with runs of their
    own), each host whose offset reaches ``min_size`` on some case."""
    by_host: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for slug, host, case, offset, runs in rows:
        if runs >= MIN_HOST_RUNS:
            by_host.setdefault((slug, host), []).append((case, offset))
    told = []
    for (slug, host), offsets in by_host.items():
        off = [(case, offset) for case, offset in offsets if abs(offset) >= min_size]
        if off:
            figures = [offset for _, offset in off]
            told.append(HostReading(slug, host, len(off), len(offsets), min(figures), max(figures),
                                    max(off, key=lambda item: abs(item[1]))[0]))
    return sorted(told, key=lambda reading: (reading.gpu_slug, reading.host))
