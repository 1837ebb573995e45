"""The store layer's own rules: the safe reader's limits, the one atomic writer, the results reader's checks,
the size limit's cost, and file-system errors as one line through the command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gpuperf.cli import describe_os_error, main
from gpuperf.store import atomic
from gpuperf.store.baseline import MAX_BASELINE_BYTES, dump_baseline, load_baseline, parse_baseline
from gpuperf.store.reading import MAX_DEPTH, InputError, load_json, load_yaml, read_text
from gpuperf.store.field_checks import TYPE_CHECKS
from gpuperf.store.results import STATUSES, ResultsError, load_run
from gpuperf.store.records import Record, RunInfo
from dataclasses import fields

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "baselines" / "nvidia-h200.yaml"
RUN = REPO / "evidence" / "fleet" / "1e941103-1.json"


def _refusal(call: object) -> str:
    with pytest.raises(InputError) as info:
        call()  # type: ignore[operator]
    return str(info.value)


@pytest.mark.parametrize(("text", "expected"), [
    ("a: &x 1\nb: *x\n", "line 1 holds an anchor (&x)"),
    ("a: *x\n", "line 1 holds an alias (*x)"),
    ("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n", f"nesting deeper than {MAX_DEPTH} levels"),
    ("a: 1\na: 2\n", "key 'a' appears twice, at line 2 (first at line 1)"),
    ('{"a": 1}', "is JSON (a results file?)"),
    ("a: " + "9" * 30 + "\n", "an integer of 30 digits"),
])
def test_yaml_refusals_name_the_cause(text: str, expected: str) -> None:
    assert expected in _refusal(lambda: load_yaml(Path("x.yaml"), text, "fix it"))


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": 1, "a": 2}', "key 'a' appears twice"),
    ("[" * 5000 + "]" * 5000, f"nests deeper than {MAX_DEPTH} levels"),
    ('{"a": [1, 2', "ends in the middle of a value: it was cut short"),
    ("schema: 1\n", "reads as YAML or other text"),
])
def test_json_refusals_name_the_cause(text: str, expected: str) -> None:
    assert expected in _refusal(lambda: load_json(Path("x.json"), text, "fix it"))


def test_only_regular_files_of_bounded_size_are_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "big").write_bytes(b"x" * 2049)
    for name, expected in [("fifo", "is a FIFO (named pipe)"), ("zero", "is a character device"),
                           (".", "is a folder"), ("big", "larger than the 0 MiB")]:
        assert expected in _refusal(lambda: read_text(tmp_path / name, 2048, "a test file", "fix")), name
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "missing", 2048, "a test file", "fix")


@pytest.mark.parametrize(("data", "expected"), [
    (b"\xef\xbb\xbfschema: 1\n", "byte-order mark"),
    ("schema: 1\n".encode("utf-16"), "is UTF-16 text"),
    (b"schema: \xff\n", "byte 0xff at offset 8 (line 1)"),
])
def test_encodings_are_named(tmp_path: Path, data: bytes, expected: str) -> None:
    (tmp_path / "f").write_bytes(data)
    assert expected in _refusal(lambda: read_text(tmp_path / "f", 1 << 20, "a test file", "fix"))


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "nvidia-h200.yaml"
    target.write_text("old")
    monkeypatch.setattr(atomic.os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        atomic.write_atomically(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["nvidia-h200.yaml"]


def test_git_ignores_the_temporary_file_a_kill_leaves() -> None:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout (a source tree without .git, or no git): whether .gitignore ignores a "
                    "temporary baseline file is asked of git check-ignore")
    left = f"baselines/{atomic.temp_prefix(Path('nvidia-h200.yaml'))}abc123{atomic.TEMP_SUFFIX}"
    ignored = subprocess.run(["git", "check-ignore", "-q", left], cwd=REPO, check=False)
    assert ignored.returncode == 0, f"{left} is not ignored by .gitignore"


def test_every_declared_record_and_run_field_type_has_a_check() -> None:
    """A field added to Record or RunInfo with a new type must say what the reader accepts for it."""
    missing = {str(f.type) for cls in (Record, RunInfo) for f in fields(cls)} - set(TYPE_CHECKS)
    assert not missing, f"add these field types to store.field_checks.TYPE_CHECKS: {missing}"
    assert "PASS" in STATUSES and "NOT_RECORDED" in STATUSES


def _run_with(tmp_path: Path, **changes: object) -> Path:
    data = json.loads(RUN.read_text())
    data["records"][1].update(changes)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("changes", "expected"), [
    ({"samples": 1.5}, "records[1] (perf_tests/test_batched.py::"),
    ({"samples": 1.5}, "field 'samples' must be a whole number or null, got 1.5"),
    ({"status": "GREAT"}, "status 'GREAT' is not one of"),
    ({"kernels": [{"grid": [1, 1, 1]}]}, "a kernel needs a non-empty name"),
    ({"sm_clock_mhz": [1, 2, 3]}, "field 'sm_clock_mhz' must be two whole numbers or null"),
])
def test_results_records_are_checked_field_by_field(tmp_path: Path, changes: dict[str, object],
                                                    expected: str) -> None:
    with pytest.raises(ResultsError, match=None) as info:
        load_run(_run_with(tmp_path, **changes))
    assert expected in str(info.value)


@pytest.mark.long
@pytest.mark.parametrize("fill", [0.05, 0.97])
def test_a_baseline_at_the_size_limit_is_checked_within_the_bound(tmp_path: Path, fill: float) -> None:
    """The limit is what keeps a check within seconds: a file of real entries just under it (about 2,000 of
    them, and a twentieth of it) is checked within 10 s of CPU (3.3–5.3 s on the
    2-core CI machine, whose speed varies by half from one moment to the next), and one just over it is refused
    before it is read."""
    baseline = load_baseline(BASELINE)
    assert baseline is not None
    items = sorted(baseline.entries.items())
    per_entry = len(dump_baseline(baseline.header, baseline.entries)) / len(items)
    count = int(MAX_BASELINE_BYTES / per_entry * fill)
    text = dump_baseline(baseline.header, {f"{case}@{i}": items[i % len(items)][1]
                                           for i, (case, _) in enumerate(items * (count // len(items) + 1))
                                           if i < count})
    assert MAX_BASELINE_BYTES * (fill - 0.07) < len(text.encode()) <= MAX_BASELINE_BYTES
    started = time.process_time()
    assert len(parse_baseline(tmp_path / "x.yaml", text).entries) == count
    assert time.process_time() - started <= 10.0
    (tmp_path / "over.yaml").write_text(text + "#" * MAX_BASELINE_BYTES)
    assert main(["baseline", "check", str(tmp_path / "over.yaml")]) == 1


@pytest.mark.long
def test_file_system_errors_are_one_line_naming_path_cause_and_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Read-only files and folders are simulated (CI runs as root, for whom permissions do not hold)."""
    path = tmp_path / "nvidia-h200.yaml"
    path.write_text(BASELINE.read_text())
    case = next(iter(load_baseline(path).entries))  # type: ignore[union-attr]

    def refuse(*args: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(atomic.os, "replace", refuse)
    assert main(["baseline", "drop", str(path), case]) == 1
    err = capsys.readouterr().err
    assert err == (f"gpuperf: error: {path}: Permission denied: make it (and its folder) readable and writable "
                   "for this user, or work on a copy elsewhere\n")
    assert describe_os_error(PermissionError(13, "Permission denied", f"{path}.lock")).startswith(
        f"{path}.lock: Permission denied: gpuperf locks {path} by creating this file beside it")
    assert describe_os_error(FileNotFoundError(2, "No such file or directory", "x")).endswith("check the path (and "
                                                                                              "that its folder exists)")
