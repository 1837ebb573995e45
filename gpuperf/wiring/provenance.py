"""Where a session's figures came from: the git commit of the tree under test (and whether it was dirty), the
branch and the CI job, read from git and from the CI's environment (GitHub Actions, GitLab CI, others).

Nothing here fails a run: a tree that is not a git checkout, or git missing, leaves those fields ``None``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

#: Branch variables, most specific first: a pull request's head branch before the ref it was merged into.
BRANCH_ENV = ("GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME", "BUILDKITE_BRANCH", "CIRCLE_BRANCH",
              "BRANCH_NAME", "GIT_BRANCH")
#: A job's own URL where the CI gives one, else its id.
JOB_URL_ENV = ("CI_JOB_URL", "BUILD_URL", "BUILDKITE_BUILD_URL", "CIRCLE_BUILD_URL")
JOB_ID_ENV = ("CI_JOB_ID", "BUILD_ID", "BUILDKITE_JOB_ID", "CIRCLE_WORKFLOW_JOB_ID")
GIT_TIMEOUT_S = 10


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(root: Path) -> tuple[str | None, bool | None, str | None]:
    """``(commit, dirty, branch)`` of the checkout at ``root``; dirty means tracked files differ from the commit."""
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return None, None, None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    return commit, None if status is None else bool(status), None if branch in (None, "HEAD") else branch


def ci_branch(environ: Mapping[str, str]) -> str | None:
    return next((environ[name] for name in BRANCH_ENV if environ.get(name)), None)


def ci_job(environ: Mapping[str, str]) -> str | None:
    """The CI job that ran the session: a URL where the CI has one, else its id; ``None`` outside CI."""
    if environ.get("GITHUB_RUN_ID"):
        server = environ.get("GITHUB_SERVER_URL", "https://github.com")
        url = f"{server}/{environ.get('GITHUB_REPOSITORY', '?')}/actions/runs/{environ['GITHUB_RUN_ID']}"
        attempt = environ.get("GITHUB_RUN_ATTEMPT")
        job = environ.get("GITHUB_JOB")
        return url + (f"/attempts/{attempt}" if attempt else "") + (f" ({job})" if job else "")
    return next((environ[name] for name in (*JOB_URL_ENV, *JOB_ID_ENV) if environ.get(name)), None)
