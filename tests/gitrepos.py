"""Temporary git repositories for the tests that drive ``bisect`` and ``ab`` through real commits."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """``git -C repo ARGS`` with a committer identity of its own; its output, stripped."""
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True, env=None if env is None else dict(env)).stdout.strip()


def commit(repo: Path, message: str, files: Mapping[str, str | None], env: Mapping[str, str] | None = None) -> str:
    """Write ``files`` (``None`` deletes one; folders are made), commit everything, and return the commit."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git(repo, "add", "-A", env=env)
    git(repo, "commit", "-q", "-m", message, env=env)
    return git(repo, "rev-parse", "HEAD", env=env)
