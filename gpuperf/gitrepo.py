"""The git that the commands measuring commits share (``bisect``, ``ab``): running git, naming a commit, and a
detached worktree of one commit that is removed afterwards, so the caller's checkout is never touched.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class GitError(RuntimeError):
    """git cannot do what was asked; the message names the cause and the fix."""


def git(repo: Path, *args: str, check: bool = True) -> str:
    """``git -C repo args…``'s output, stripped; a failure (with ``check``) raises ``GitError`` with git's words."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise GitError(f"git cannot be run ({exc}); install git") from exc
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def top_level(path: Path) -> Path:
    """The root of the git checkout holding ``path``."""
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except GitError as exc:
        raise GitError(f"{path} is not in a git checkout; pass --repo DIR of one") from exc


def resolve_commit(repo: Path, rev: str, option: str) -> str:
    """The full hash of ``rev`` in ``repo``; ``option`` names the command-line option that gave it."""
    try:
        return git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    except GitError as exc:
        raise GitError(f"{rev!r} is not a commit of {repo}; name one with {option} (a hash, tag or "
                       "branch)") from exc


def is_dirty(tree: Path) -> bool:
    """Whether the checkout has changes that are not committed (untracked files included)."""
    return bool(git(tree, "status", "--porcelain"))


@contextmanager
def worktree(repo: Path, commit: str, path: Path) -> Iterator[Path]:
    """A detached worktree of ``commit`` at ``path`` for the block, removed (with its git bookkeeping) after it;
    the repository's other worktrees are left alone."""
    git(repo, "worktree", "add", "--detach", str(path), commit)
    try:
        yield path
    finally:
        git(repo, "worktree", "remove", "--force", str(path), check=False)
