"""Maintenance of a baseline file outside a run: dropping entries that can no longer be recorded, and sealing a
file recorded before gpuperf wrote an integrity field. Both rewrite the file under its lock, atomically, and
refuse rather than guess (``python -m gpuperf baseline drop`` and ``baseline seal``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pathlib import Path

from gpuperf.store.atomic import locked
from gpuperf.store.baseline import (BaselineError, dump_baseline, load_baseline, parse_baseline, parse_unsealed,
                                    read_baseline_text, restore_hint, write_checked)


def drop_entries(path: Path, cases: list[str]) -> list[str]:
    """Remove entries (stale ones, or ones that can no longer be recorded) under the lock, atomically; the file
    is re-sealed and every other entry kept as it is. Names that are not entries are refused, so a typo never
    passes for a removal."""
    path = Path(path)
    with locked(path):
        current = load_baseline(path)
        if current is None:
            raise BaselineError(f"{path}: no such baseline file; check the path (baselines/<gpu-slug>.yaml)")
        unknown = [case for case in cases if case not in current.entries]
        if unknown:
            raise BaselineError(f"{path}: no entr{'y' if len(unknown) == 1 else 'ies'} {unknown}; copy the "
                                "case ids from the stale list or from the file")
        kept = {case: entry for case, entry in current.entries.items() if case not in cases}
        write_checked(path, dump_baseline(current.header, kept))
    return sorted(cases)


def seal_baseline(path: Path) -> bool:
    """Write the integrity field into a file recorded before gpuperf wrote one: a one-shot migration.

    Everything else is checked as on loading and the same entries are dumped again, then read back: if
    that would change any header field or measured figure the file is refused instead. A file that is
    already sealed is left untouched (``False``); one whose seal does not match is refused as on loading,
    so sealing can never bless a damaged file.
    """
    path = Path(path)
    if not path.exists():
        raise BaselineError(f"{path}: no such baseline file; check the path (baselines/<gpu-slug>.yaml)")
    with locked(path):
        baseline, recorded = parse_unsealed(path, read_baseline_text(path))
        if recorded is not None:
            return False
        text = dump_baseline(baseline.header, baseline.entries)
        resealed = parse_baseline(path, text)
        if resealed.header != baseline.header or resealed.entries != baseline.entries:
            raise BaselineError(f"{path}: writing it again would change recorded figures (more digits than "
                                f"gpuperf writes?), so it is not sealed; {restore_hint(path)}")
        write_checked(path, text)
    return True
