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


@dataclass(frozen=True)
class HostOffsets:
    """One case's hosts as the fit reads them: each host's relative offset (``+0.021``: it reads 2.1 % high),
    its runs of the case, and whether the offset is its class's (too few runs of its own)."""

    offsets: np.ndarray  # per host number (0 for a host without runs of the case)
    runs: np.ndarray
    from_class: np.ndarray

    def per_point(self, hosts: np.ndarray) -> np.ndarray:
        """Each point's host's relative offset."""
        result: np.ndarray = self.offsets[hosts]
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


def case_offsets(values: np.ndarray, hosts: np.ndarray,
                 count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hosts' offsets on the log scale (NaN for a host without runs), one row per case, their runs, and each
    case's noise (the residuals' robust standard deviation, 1.4826 × their median absolute deviation), from cases'
    figures in run order (``values``: case × run, every case run on the same runs) and each run's host number
    (``< count``)."""
    logs = np.log(values)
    sizes = np.bincount(hosts, minlength=count)
    present = np.flatnonzero(sizes)
    offsets = np.zeros((len(values), count))
    if len(present) < 2:
        return np.where(sizes > 0, offsets, np.nan), sizes, np.zeros(len(values))
    by_host = np.argsort(hosts, kind="stable")
    first = np.cumsum(sizes) - sizes
    for _ in range(ITERATIONS):
        residuals = logs - block_median(logs - offsets[:, hosts])
        ranked = residuals[:, by_host]
        for host in present.tolist():
            offsets[:, host] = np.median(ranked[:, first[host]:first[host] + sizes[host]], axis=1)
        offsets -= np.median(offsets[:, hosts], axis=1, keepdims=True)  # relative to the run-weighted median host
    spread = np.abs(residuals - np.median(residuals, axis=1, keepdims=True) - offsets[:, hosts])
    return np.where(sizes > 0, offsets, np.nan), sizes, 1.4826 * np.median(spread, axis=1)


def fit(series: Mapping[Hashable, tuple[np.ndarray, np.ndarray]], count: int,
        class_of: Mapping[Hashable, Hashable] | None = None) -> dict[Hashable, HostOffsets]:
    """Every case's ``HostOffsets`` (relative), from ``(figures in run order, host numbers)`` per case of one GPU
    model: a host's own offset where it has ``MIN_HOST_RUNS`` runs of the case and it stands ``CLEAR`` standard
    errors clear of its class's, else its class's. Cases run on
    the same hosts in the same order (as a fleet's cases mostly are) are fitted together, as rows of one array."""
    together: dict[bytes, list[Hashable]] = {}
    for key, (_, hosts) in series.items():
        together.setdefault(hosts.astype(np.int64).tobytes(), []).append(key)
    logged: dict[Hashable, tuple[np.ndarray, np.ndarray, float]] = {}
    for keys in together.values():
        hosts = series[keys[0]][1]
        offsets, sizes, noises = case_offsets(np.vstack([series[key][0] for key in keys]), hosts, count)
        logged.update({key: (offsets[row], sizes, float(noises[row])) for row, key in enumerate(keys)})
    classes = {key: (class_of or {}).get(key) for key in series}
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
        fitted[key] = HostOffsets(offsets=np.expm1(chosen), runs=sizes, from_class=(sizes > 0) & ~own)
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
