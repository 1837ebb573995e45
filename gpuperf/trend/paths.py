"""Where things are in the trend site: its default folder, its index, the plotly bundle, each case's page
and its small multiple.

Apart from the page generator so that ``summary.md`` can link a case's page without importing plotly.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: Where ``history page`` writes the site unless ``--out`` says otherwise.
DEFAULT_SITE = Path("results") / "trend"
INDEX_HTML = "index.html"
#: plotly.js's basic bundle, and its licence, beside the pages.
PLOTLY_JS = "plotly.min.js"
PLOTLY_LICENCE = "plotly.LICENSE.txt"
CASES_DIR = "cases"
SMALL_DIR = "small"


def page_name_of(gpu_model: str, case_id: str) -> str:
    """``cases/<gpu>--<readable id>-<hash>.html``, relative to the site: stable across builds (a link in a
    summary written before the site is rebuilt still finds the case), safe on every file system."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", case_id.split("::")[-1]).strip("_")[:80]
    digest = hashlib.sha1(f"{gpu_model}/{case_id}".encode("utf-8")).hexdigest()[:10]
    return f"{CASES_DIR}/{gpu_model}--{readable}-{digest}.html"


def small_multiple_name_of(gpu_model: str, case_id: str) -> str:
    """``small/<the case page's name>.png``, relative to the site: the index's picture of the case."""
    stem = page_name_of(gpu_model, case_id).removeprefix(f"{CASES_DIR}/").removesuffix(".html")
    return f"{SMALL_DIR}/{stem}.png"
