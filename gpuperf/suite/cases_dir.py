"""Where the running session keeps its case tables: the plugin sets it at start-up from the ``gpuperf_cases`` ini
key, ``load_cases`` reads it. Apart from the loader (``cases.py``, which needs PyYAML and the store's readers),
so that the plugin sets it in every session without loading either.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pathlib import Path

#: Where a project keeps its case tables, relative to its root, unless its pytest ini says otherwise
#: (``gpuperf_cases``, read by the plugin, which points ``load_cases`` there with ``use_cases_dir``).
DEFAULT_CASES_DIR = "perf_tests/cases"
_cases_dir: Path | None = None


def use_cases_dir(directory: Path | None) -> Path | None:
    """Make ``directory`` where ``load_cases`` looks by default; returns the previous one (None: the default)."""
    global _cases_dir
    previous, _cases_dir = _cases_dir, directory
    return previous


def cases_dir() -> Path:
    """The case tables of the running session, else ``perf_tests/cases`` under the working directory."""
    return _cases_dir if _cases_dir is not None else Path.cwd() / DEFAULT_CASES_DIR
