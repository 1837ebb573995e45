"""Results files → the history's rows, read and checked in worker processes while the history writes them.

A backfill of thousands of files is bound by reading them: each is read and checked by the results format's own
reader (``rows.parse_results_document``), made into a run row and record columns and compressed.
Those steps run in a pool of worker processes (one per core) that hand back only the rows and the compressed
document; the main process writes them to the database in transactions of a batch of runs each, in the files'
order. A few files are read in the main process (a pool costs more than it saves). The workers build nothing
but structs and trees of JSON values, which reference counting frees; their cyclic garbage collector is off, as
it would walk every value of every file and find nothing.
A file whose run the history holds already (its bytes' SHA-256 is the run's id) is counted present without
being parsed, so a nightly backfill of a growing folder costs only its new files.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import fnmatch
import gc
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuperf.history import rows as history_rows
from gpuperf.history.rows import HistoryInputError
from gpuperf.history.schema import encode_document
from gpuperf.store.processes import end_pool, forking, pooled, quiet_worker

#: A run as the database takes it: its ``runs`` row, its compressed document, its records' columns
#: (``rows.records_columns``).
Prepared = tuple[dict[str, Any], bytes, list[list[Any]]]
#: Fewer files than this are read in the main process.
POOL_FILES = 64
#: Files handed to a worker at a time, and chunks in flight per worker: some 128 files a worker, half a second of
#: its work, so that a commit that waits for the disk does not leave the workers idle.
_CHUNK = 4
_WINDOW_CHUNKS = 32


@dataclass(frozen=True)
class IngestReport:
    added: list[Path] = field(default_factory=list)
    present: list[Path] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)
    ab_runs: list[Path] = field(default_factory=list)  # files of A/B runs found in the folders, left out


def prepare(document: dict[str, Any], source: str, text: str | bytes | None,
            identity: str | None = None) -> Prepared:
    """A run's row, its compressed document and its records' columns, before any transaction, of a document
    ``rows.check_document`` has passed (every caller checks it first); ``identity``: the run id of
    ``text``, when known."""
    text = history_rows.canonical_text(document) if text is None else text
    columns = history_rows.records_columns(document["records"])
    return history_rows.run_row(document, source, text, identity=identity), encode_document(text), columns


#: What reading a file gives: its path, then the run prepared, or ``None`` with why it was refused, or ``None``
#: and ``None`` when the history holds that very file's run already (it is not parsed).
Read = tuple[str, "Prepared | None", "str | None"]
#: The run ids the history holds, in a worker process (set once, by ``_start_worker``).
_present: frozenset[str] = frozenset()


def read_and_prepare(path: str, present: frozenset[str] | None = None) -> Read:
    """One results file, read, checked and prepared: ``(path, prepared, "")``; ``(path, None, why)`` when it is
    refused; ``(path, None, None)`` when its run id (its bytes' SHA-256) is in ``present`` (default: the worker's
    own), then without parsing it: a backfill run again over the same folders reads each file only once more."""
    try:
        raw = history_rows.read_results_bytes(Path(path))
        identity = history_rows.run_id(raw)
        if identity in (_present if present is None else present):
            return path, None, None
        document = history_rows.parse_results_document(Path(path), raw)
    except HistoryInputError as exc:
        return path, None, str(exc)
    return path, prepare(document, path, raw, identity), ""


def selected_files(paths: Sequence[Path], exclude: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """The results files under ``paths``, but those whose name matches an ``exclude`` glob, and the files of A/B
    runs found in the folders (``rows.results_files``), left out."""
    found, ab_runs = history_rows.results_files(paths)
    return [path for path in found if not any(fnmatch.fnmatch(path.name, pattern) for pattern in exclude)], ab_runs


def _prepared(files: Sequence[Path], workers: int | None, present: frozenset[str]) -> Iterator[Read]:
    names = [str(path) for path in files]
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if len(names) < POOL_FILES or workers < 2:
        yield from (read_and_prepare(name, present) for name in names)
        return
    import multiprocessing  # a suite's append reads no files: it imports neither
    from concurrent.futures import Future, ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker,
                             initargs=(present,)) as pool:
        pooled(pool)
        try:
            # a bounded window of chunks in flight: what the workers read ahead of the writing is held in memory
            window: deque[Future[list[Read]]] = deque()
            for start in range(0, len(names), _CHUNK):
                with forking():  # the first submits fork the workers
                    window.append(pool.submit(_read_chunk, names[start:start + _CHUNK]))
                if len(window) >= _WINDOW_CHUNKS * workers:
                    yield from window.popleft().result()
            while window:
                yield from window.popleft().result()
        except BaseException:  # Ctrl-C, SIGTERM (processes.interruptible), a failed write: no worker outlives it
            end_pool(pool)
            raise


def _start_worker(present: frozenset[str]) -> None:
    global _present
    _present = present
    quiet_worker()  # Ctrl-C and SIGTERM are the parent's to handle: it ends the workers
    gc.disable()


def _read_chunk(paths: Sequence[str]) -> list[Read]:
    return [read_and_prepare(path) for path in paths]


def ingest_files(files: Sequence[Path], write: Callable[[Sequence[tuple[str, Prepared]]], list[bool]],
                 batch: int, workers: int | None = None, present: frozenset[str] = frozenset()) -> IngestReport:
    """Read ``files`` (in a pool when there are many) and ``write`` them ``batch`` runs at a time; ``write``
    says per run whether it was added. A file whose run id is in ``present`` is counted present unparsed."""
    report = IngestReport()
    pending: list[tuple[str, Prepared]] = []

    def flush() -> None:
        for (source, _), added in zip(pending, write(pending)):
            (report.added if added else report.present).append(Path(source))
        pending.clear()

    for source, prepared, why in _prepared(files, workers, present):
        if prepared is None:
            if why is None:
                report.present.append(Path(source))
            else:
                report.refused.append((Path(source), why))
            continue
        pending.append((source, prepared))
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return report
