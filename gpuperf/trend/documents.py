"""What the trend page takes from each run's document (``run_documents``): per record, the baseline it was judged
against, the gate's band and Δ, and the kernels it launched, decoded in worker processes.

A history of ten thousand runs holds some 3.5 GB of results-file JSON, compressed; decompressing and parsing it
is most of the CPU time of the page's reading, and needs nothing but the bytes. So the bytes of a few runs at a
time go to a pool of forked worker processes (one per core) that hand back only those four values per record,
in order, while this process makes the points. A small history is decoded here (a pool costs more than it
saves). Nothing but the current window of runs is ever held decoded.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from gpuperf.history.schema import decode_document_bytes
from gpuperf.store.processes import end_pool, forking, pooled, quiet_worker

#: Per record of a run, in its document's order: its baseline, its band (a fraction), the gate's Δ (in percent)
#: and the names of the kernels one call launched.
Drawn = tuple[float | None, float | None, float | None, tuple[str, ...]]
#: Runs, each as its pk and its document's ``body``; and as its pk and what each record draws.
Bodies = Sequence[tuple[int, bytes]]
Reduced = list[tuple[int, list[Drawn]]]
#: Fewer runs than this are decoded in this process.
POOL_RUNS = 256
#: Chunks in flight per worker: enough that a worker never waits for this process.
_WINDOW_CHUNKS = 4


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _names(record: Mapping[str, Any], known: dict[Any, tuple[str, ...]]) -> tuple[str, ...]:
    """The kernels' names, as one tuple shared by every record that names the same kernels (sent once)."""
    listed = record.get("kernels") or ()
    try:
        key: Any = tuple(kernel["name"] for kernel in listed)
    except (KeyError, TypeError, IndexError):
        key = tuple(str(kernel.get("name", "?")) for kernel in listed if isinstance(kernel, Mapping))
    found = known.get(key)
    if found is None:
        found = known[key] = tuple(str(name) for name in key)
    return found


def reduce_document(body: bytes, known: dict[Any, tuple[str, ...]]) -> list[Drawn]:
    """One run's document → what each of its records draws (a record that is not an object draws nothing)."""
    document = orjson.loads(decode_document_bytes(body))
    records = document.get("records") if isinstance(document, Mapping) else None
    drawn: list[Drawn] = []
    for record in records if isinstance(records, list) else ():
        if not isinstance(record, Mapping):
            drawn.append((None, None, None, ()))
            continue
        drawn.append((_number(record.get("baseline")), _number(record.get("tolerance")),
                      _number(record.get("delta_pct")), _names(record, known)))
    return drawn


def _reduce_chunk(bodies: Bodies) -> Reduced:
    known: dict[Any, tuple[str, ...]] = {}
    return [(pk, reduce_document(body, known)) for pk, body in bodies]


def reduced(chunks: Iterable[Bodies], runs: int, workers: int | None = None) -> Iterator[Reduced]:
    """Each chunk of runs' bodies reduced (``reduce_document``), in order: in ``workers`` forked processes
    (default: one per core) when there are ``POOL_RUNS`` runs or more, else here. A document that cannot be
    decoded raises its error (``guard.damage_told`` tells it)."""
    workers = workers if workers is not None else len(os.sched_getaffinity(0))
    if runs < POOL_RUNS or workers < 2:
        yield from map(_reduce_chunk, chunks)
        return
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=quiet_worker) as pool:
        pooled(pool)
        try:
            window: deque[Future[Reduced]] = deque()
            for chunk in chunks:
                with forking():  # a submit may fork a worker
                    window.append(pool.submit(_reduce_chunk, chunk))
                if len(window) >= _WINDOW_CHUNKS * workers:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
        except BaseException:  # Ctrl-C, SIGTERM (processes.interruptible), a damaged document: no worker outlives it
            end_pool(pool)
            raise
