"""A test's case id: its node id without the GPU segment (baselines are per GPU *model*, not per index); its family
and parameters, as its record names them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from typing import Any

from gpuperf.vocabulary import Family

_GPU_SEGMENT = re.compile(r"(?<=[\[-])gpu\d+(?:-|(?=\]))")


def case_id_of(nodeid: str) -> str:
    """The node id without its GPU segment (baselines are per GPU *model*, not per index)."""
    stripped = _GPU_SEGMENT.sub("", nodeid)
    return stripped.replace("-]", "]").replace("[]", "")


def family_of(item: Any) -> str:
    """The test's most specific family marker (``Family.OTHER`` without one)."""
    return next((name for name in Family.MOST_SPECIFIC_FIRST if item.get_closest_marker(name)), Family.OTHER)


def params_of(item: Any) -> dict[str, str]:
    """The test's parameters as text, its GPU's left out (a case is the same on every GPU of a model)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    return {name: str(value) for name, value in callspec.params.items() if name != "gpu_index"}
