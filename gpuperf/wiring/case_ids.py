"""A test's case id: its node id without the GPU segment (baselines are per GPU *model*, not per index).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re

_GPU_SEGMENT = re.compile(r"(?<=[\[-])gpu\d+(?:-|(?=\]))")


def case_id_of(nodeid: str) -> str:
    """The node id without its GPU segment (baselines are per GPU *model*, not per index)."""
    stripped = _GPU_SEGMENT.sub("", nodeid)
    return stripped.replace("-]", "]").replace("[]", "")
