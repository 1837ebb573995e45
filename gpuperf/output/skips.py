"""The short summary's skip lines, one per reason: a suite skipped on a machine without a GPU gave one line per test
function (pytest folds skips by file, line and reason), 60 lines of the same two reasons for the default selection.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any


def _located(report: Any) -> tuple[str, Any, str] | None:
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[0]), longrepr[1], str(longrepr[2])
    return None


def fold_by_reason(skipped: Sequence[Any]) -> list[Any]:
    """``skipped`` (pytest's skip reports, as the terminal keeps them), with every reason given at more than one
    place named at the folder (or file) those places share and no line, so pytest's summary folds them into one
    line. Copies: the reports themselves (which JUnit XML read) are left as they are."""
    places: dict[str, set[tuple[str, Any]]] = {}
    for report in skipped:
        located = _located(report)
        if located is not None:
            places.setdefault(located[2], set()).add(located[:2])
    folded = []
    for report in skipped:
        located = _located(report)
        if located is None or len(places[located[2]]) < 2:
            folded.append(report)
            continue
        paths = sorted({os.path.abspath(path) for path, _ in places[located[2]]})
        shared = paths[0] if len(paths) == 1 else os.path.commonpath(paths)
        merged = copy.copy(report)
        merged.longrepr = (shared, None, located[2])
        folded.append(merged)
    return folded
