"""The session's run, appended to the history at its end (the controller's job; xdist workers append nothing).

The run's provenance (commit, CI job, options, the baseline digest) is put in ``run.extra`` before the results
files are written, so the ``results.json`` of a run and the history row of it hold the same document and share
one run id: ingesting that file later is a no-op.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from gpuperf.store.history_target import HistoryError, mask_args
from gpuperf.history.rows import KIND_RUN, KIND_UPDATE, PROVENANCE, Provenance

if TYPE_CHECKING:  # the session has them loaded; a suite's append imports no more than it writes with
    from gpuperf.store.baseline import BaselineFile
    from gpuperf.store.records import Record, RunInfo
    from gpuperf.wiring.session_options import Options


def recorded_options(options: Options, args: Sequence[str]) -> dict[str, Any]:
    """What decided the verdicts and the figures: the gate's settings, the stopping rule, the mode, the args (a
    database URL's password among them masked: the record is read by anyone who reads the history)."""
    return {"args": mask_args(args), "gate": asdict(options.gate), "rule": asdict(options.rule),
            "update": options.update, "gate_mode": options.gate_mode, "flush_modes": list(options.flush_modes),
            "gpus": options.gpus, "missing": options.missing, "on_unreliable": options.on_unreliable}


def session_provenance(root: Path, options: Options, args: Sequence[str], baseline: BaselineFile | None,
                       environ: Mapping[str, str] = os.environ) -> Provenance:
    from gpuperf.store.baseline import entries_digest
    from gpuperf.wiring import provenance

    commit, dirty, branch = provenance.git_state(root)
    return Provenance(kind=KIND_UPDATE if options.update else KIND_RUN, git_commit=commit, git_dirty=dirty,
                      branch=provenance.ci_branch(environ) or branch, ci_job=provenance.ci_job(environ),
                      options=recorded_options(options, args),
                      baseline_digest=entries_digest(baseline.entries) if baseline is not None else None)


def with_provenance(run: RunInfo, recorded: Provenance) -> RunInfo:
    return replace(run, extra={**run.extra, PROVENANCE: recorded.to_dict()})


def document(run: RunInfo, records: Sequence[Record], text: str | None = None) -> tuple[dict[str, Any], str]:
    """The run as its ``results.json`` holds it, and that file's text (the same writer, so the same run id).
    ``text`` is that file's text when the session wrote one."""
    if text is None:
        from gpuperf.store.results import results_json_text

        text = results_json_text(run, records)
    return dict(orjson.loads(text)), text


def append_run(url: str, run: RunInfo, records: Sequence[Record], source: str, text: str | None = None) -> str:
    """Append the run (``text``: its ``results.json`` text, when written); the line the session prints about
    it. ``HistoryError`` names what went wrong."""
    from gpuperf.history.database import History, describe  # SQLAlchemy: only a session with a history loads it

    started = time.perf_counter()
    data, text = document(run, records, text)
    with History(url) as history:
        added = history.append(data, source, text)
    seconds = time.perf_counter() - started
    what = f"{len(records)} records appended" if added else "run already present, nothing appended"
    return f"gpuperf: history {describe(url)}: {what} ({seconds:.2f} s)"


__all__ = ["HistoryError", "append_run", "session_provenance", "with_provenance"]
