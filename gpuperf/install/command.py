"""How to install an extra of gpuperf, as every hint says it: gpuperf is not on the package index, so it is installed
from a clone of its repository, and a hint names the clone this gpuperf was installed from (PEP 610's
``direct_url.json``), so the command it prints can be pasted as it is.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
from importlib import metadata
from urllib.parse import unquote, urlparse

#: Where the install source is unknown (installed by other means): the words of the README.
UNKNOWN_SOURCE = "<your clone of the gpuperf repository>"


def install_command(extra: str = "") -> str:
    """``pip install -e '/path/to/clone[extra]'`` for an editable install, ``pip install '/path[extra]'`` for one
    from a folder, else the README's words with a placeholder for the clone (no ``[…]`` without an extra)."""
    try:
        direct = json.loads(metadata.distribution("gpuperf").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        direct = {}
    url = urlparse(str(direct.get("url", "")))
    if url.scheme != "file" or not url.path or url.path.endswith(".whl"):
        return f"pip install '{UNKNOWN_SOURCE}{_extras(extra)}'"
    editable = "-e " if (direct.get("dir_info") or {}).get("editable") else ""
    return f"pip install {editable}'{unquote(url.path)}{_extras(extra)}'"


def _extras(extra: str) -> str:
    return f"[{extra}]" if extra else ""


def upgrade_command() -> str:
    """How to bring this gpuperf up to date: its clone pulled, then installed again."""
    return f"git pull in its clone, then {install_command()}"


def cuda_extra_command() -> str:
    """What brings CuPy and CUPTI: the extra of the driver's CUDA major."""
    return f"{install_command('cuda13')} (or [cuda12] for a driver below 580)"
