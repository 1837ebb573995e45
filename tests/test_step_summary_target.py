"""``$GITHUB_STEP_SUMMARY`` naming something that is not a writable regular file (a folder, a FIFO nobody reads, a
device, a path under a missing folder): the session writes its results, says in one line why the job summary was
not appended and where the summary is, never blocks and never fails a healthy run; a full disk is said to be full
(issue 54)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from gpuperf.output.results import append_step_summary
from gpuperf.store.os_errors import describe_os_problem
from gpuperf.wiring.containment import Stage, failure_line
from test_plugin import project, recorded  # noqa: F401  (the fixture: a project on the synthetic GPU)

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(("make", "said"), [
    (lambda path: path.mkdir(), "is a folder, not a file"),
    (lambda path: os.mkfifo(path), "is a FIFO (named pipe) that nobody reads, not a file"),
    (lambda path: path.symlink_to("/dev/full"), "is a character device (such as /dev/zero), not a file"),
    (lambda path: None, None),
])
def test_a_session_says_why_the_job_summary_was_not_appended_and_passes(project: pytest.Pytester,  # noqa: F811
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        make: object, said: str | None) -> None:
    recorded(project)
    target = project.path / "step.md"
    make(target)  # type: ignore[operator]
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target if said else project.path / "missing" / "step.md"))
    result = project.runpytest("-p", "no:cacheprovider", "--results-dir", "out")
    assert result.ret == pytest.ExitCode.OK
    (summary,) = (project.path / "out").glob("*/summary.md")
    why = said or "No such file or directory: check the path (and that its folder exists)"
    result.stdout.fnmatch_lines([f"gpuperf: job summary not appended: $GITHUB_STEP_SUMMARY *step.md: {why}; the "
                                 f"summary is in {summary.relative_to(project.path)}"])
    assert (project.path / "out").glob("*/results.json")


def test_a_regular_file_is_appended_to(tmp_path: Path) -> None:
    step = tmp_path / "step.md"
    step.write_text("earlier\n")
    assert append_step_summary("# now", step, tmp_path / "summary.md") == ""
    assert step.read_text() == "earlier\n# now\n"


def test_a_full_disk_is_said_to_be_full_naming_the_file_not_a_gpuperf_defect() -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert describe_os_problem(full).startswith("No space left on device: the disk (the file system it is on) is full")
    full.filename = "out/results.json"
    line = failure_line(Stage.RESULTS, full)
    assert line.startswith(f"{Stage.RESULTS}: out/results.json: No space left on device: the disk") and \
        "defect" not in line


@pytest.mark.long
def test_results_on_a_full_disk_are_refused_with_the_file_and_the_cause(project: pytest.Pytester,  # noqa: F811
                                                                         tmp_path: Path) -> None:
    """A real full file system: a 64 KiB tmpfs (root only; skipped elsewhere)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                           capture_output=True, check=False).returncode != 0:
        pytest.skip("no small tmpfs to fill here (mounting needs root)")
    try:
        (disk / "filler").write_bytes(b"\0" * 60 * 1024)
        result = project.runpytest("-p", "no:cacheprovider", "--missing-baseline=pass", "--results-dir", str(disk))
        result.stdout.fnmatch_lines(["gpuperf: RESULTS NOT WRITTEN: *No space left on device: the disk (the file "
                                     "system it is on) is full*"])
        result.stdout.no_fnmatch_line("*defect*")
        result.stdout.no_fnmatch_line("*RESULTS NOT WRITTEN: [?]*")
    finally:
        subprocess.run(["umount", str(disk)], check=False)
