"""Results files → the history's rows, read and checked in worker processes while the history writes them.

A backfill of thousands of files is bound by reading them: each is parsed, checked by the results format's own
reader (``history_rows.read_results_document``), made into a run row and record rows and compressed, all in
Python, 10-20 ms a file. Those steps run in a pool of worker processes (one per core) that hand back only the
rows and the compressed document; the main process writes them to the database in transactions of a batch of
runs each, in the files' order. A few files are read in the main process (a pool costs more than it saves).
The workers build nothing but trees of JSON values, which reference counting frees; their cyclic garbage
collector is off, as it would walk every value of every file (a sixth of their time) and find nothing.
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

from gpuperf.store import history_rows
from gpuperf.store.history_rows import HistoryInputError
from gpuperf.store.history_schema import encode_document

#: A run as the database takes it: its ``runs`` row, its compressed document, its records' columns
#: (``history_rows.records_columns``).
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


def prepare(document: dict[str, Any], source: str, text: str | bytes | None) -> Prepared:
    """A run's row, its compressed document and its records' columns, before any transaction, of a document
    ``history_rows.check_document`` has passed (every caller checks it first)."""
    text = history_rows.canonical_text(document) if text is None else text
    columns = history_rows.records_columns(document["records"])
    return history_rows.run_row(document, source, text), encode_document(text), columns


def read_and_prepare(path: str) -> tuple[str, Prepared | None, str]:
    """One results file, read, checked and prepared: ``(path, prepared, "")``, or ``(path, None, why)``."""
    try:
        document, text = history_rows.read_results_document(Path(path))
    except HistoryInputError as exc:
        return path, None, str(exc)
    return path, prepare(document, path, text), ""


def selected_files(paths: Sequence[Path], exclude: Sequence[str]) -> list[Path]:
    """The results files under ``paths``, but those whose name matches an ``exclude`` glob."""
    return [path for path in history_rows.results_files(paths)
            if not any(fnmatch.fnmatch(path.name, pattern) for pattern in exclude)]


def _prepared(files: Sequence[Path], workers: int | None) -> Iterator[tuple[str, Prepared | None, str]]:
    names = [str(path) for path in files]
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if len(names) < POOL_FILES or workers < 2:
        yield from map(read_and_prepare, names)
        return
    import multiprocessing  # a suite's append reads no files: it imports neither
    from concurrent.futures import Future, ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=gc.disable) as pool:
        # a bounded window of chunks in flight: what the workers read ahead of the writing is held in memory
        window: deque[Future[list[tuple[str, Prepared | None, str]]]] = deque()
        for start in range(0, len(names), _CHUNK):
            window.append(pool.submit(_read_chunk, names[start:start + _CHUNK]))
            if len(window) >= _WINDOW_CHUNKS * workers:
                yield from window.popleft().result()
        while window:
            yield from window.popleft().result()


def _read_chunk(paths: Sequence[str]) -> list[tuple[str, Prepared | None, str]]:
    return [read_and_prepare(path) for path in paths]


def ingest_files(files: Sequence[Path], write: Callable[[Sequence[tuple[str, Prepared]]], list[bool]],
                 batch: int, workers: int | None = None) -> IngestReport:
    """Read ``files`` (in a pool when there are many) and ``write`` them ``batch`` runs at a time; ``write``
    says per run whether it was added."""
    report = IngestReport()
    pending: list[tuple[str, Prepared]] = []

    def flush() -> None:
        for (source, _), added in zip(pending, write(pending)):
            (report.added if added else report.present).append(Path(source))
        pending.clear()

    for source, prepared, why in _prepared(files, workers):
        if prepared is None:
            report.refused.append((Path(source), why))
            continue
        pending.append((source, prepared))
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return report
