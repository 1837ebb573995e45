"""History targets end to end: database URLs checked at start and never shown with their password, reading
commands that change no file, an ingest that fails leaving nothing behind, A/B runs left out of a nightly
ingest, start times in UTC, and ``ab``'s ``--history`` checked before either side starts."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf.store.history_target import HistoryError, mask_args, mask_url, to_url
from tests.gitrepos import commit, git
from tests.history_support import ROOT, document, write
from test_history_cli import project  # noqa: F401  (the fixture: a git project with the fake-timed plugin)

pytest_plugins = ["pytester"]
CASE = "perf_tests/test_gemm.py::test_gemm_perf[fp32-512x512x512-cold]"
SECRET = "hunter2secret"
#: A password holding ``@`` then ``?`` (issue 54): no part of it is printed, recorded, or taken for the host.
AT_QUERY = f"postgresql://u:{SECRET[:5]}@t?{SECRET[5:]}@127.0.0.1:1/db"


def _gpuperf(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("GPUPERF_HISTORY", "CI")}
    return subprocess.run([sys.executable, "-m", "gpuperf", *args], cwd=cwd, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT), "GPUPERF_AB_NO_GPU_CHECK": "1"}, timeout=120,
                          check=False)  # ab's sides stand the GPU in (their conftest), not this machine


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and the SHA-256 of its bytes."""
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize(("url", "shown"), [
    (f"postgresql://u:{SECRET}@h/db", "postgresql://u:***@h/db"),
    (f"postgresql://u:{SECRET[:4]}@{SECRET[4:]}@h:5432/db", "postgresql://u:***@h:5432/db"),
    (f"postgresql://u@h/db?sslmode=require&password={SECRET}", "postgresql://u@h/db?sslmode=require&password=***"),
    (f"postgresql://u:{SECRET}@[::1/db", "postgresql://u:***@[::1/db"),
    (AT_QUERY, "postgresql://u:***@127.0.0.1:1/db"),
    ("sqlite:////tmp/h.sqlite", "sqlite:////tmp/h.sqlite"),
    ("results/history.sqlite", "results/history.sqlite"),
])
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert mask_args(["-k", "gemm", f"--history={url}"]) == ["-k", "gemm", f"--history={shown}"]


def test_a_password_holding_an_at_is_encoded_not_taken_for_the_host() -> None:
    assert to_url(f"postgresql://u:ab@cd@db.example:5432/x", ROOT) == "postgresql+psycopg://u:ab%40cd@db.example:5432/x"
    assert to_url("postgresql://u:ab%40cd@h/x", ROOT) == "postgresql+psycopg://u:ab%40cd@h/x"  # not encoded twice
    assert to_url("postgresql://u:s3cr@t?pass@db.example:5432/gp", ROOT) == \
        "postgresql+psycopg://u:s3cr%40t%3Fpass@db.example:5432/gp"
    assert to_url("postgresql://u:s3cr@t/x@db/gp?sslmode=require", ROOT) == \
        "postgresql+psycopg://u:s3cr%40t%2Fx@db/gp?sslmode=require"
    for malformed in (f"postgresql://u:{SECRET}@h:port/x", f"postgresql://u:{SECRET}@[::1/x",
                      f"postgresql://u:{SECRET}@h:0/x"):
        with pytest.raises(HistoryError, match="write postgresql://USER:PASSWORD@HOST") as raised:
            to_url(malformed, ROOT)
        assert SECRET not in str(raised.value)


@pytest.mark.long
@pytest.mark.parametrize("url", [
    f"postgresql://u@127.0.0.1:1/db?password={SECRET}",  # a closed port: refused at once
    f"postgresql://u:{SECRET[:5]}@{SECRET[5:]}@127.0.0.1:1/db",
    f"postgresql://u:{SECRET}@127.0.0.1:notaport/db",
    f"postgresql://u:{SECRET}@[::1/db",
    f"http://u:{SECRET}@x/db",
    AT_QUERY,
])
@pytest.mark.parametrize("command", [  # every URL through show here; through the other two in the long tier
    ["history", "show", "gemm"], ["history", "changes"],
    ["history", "ingest", str(ROOT / "evidence" / "fleet" / "1e941103-1.json")]])
def test_history_commands_print_no_password(url: str, command: list[str], tmp_path: Path) -> None:
    done = _gpuperf(tmp_path, *command, "--history", url)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("gpuperf: error: history ") and "Traceback" not in done.stderr
    assert SECRET not in done.stdout + done.stderr and SECRET[5:] not in done.stderr
    assert SECRET[:5] not in done.stdout + done.stderr, done.stderr
    if url == AT_QUERY:  # the host named is the one after the password, not a part of it
        assert "://u:***@127.0.0.1:1/db: cannot be opened" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def _history(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    for day, (started, value) in enumerate([("2026-12-01T23:30:00-02:00", 50.0), ("2026-12-02T00:10:00+00:00", 49.0),
                                            ("2026-12-02T09:00:00+08:00", 48.0)]):
        write(runs / f"run{day}.json", document(started, {CASE: value}))
    database = tmp_path / "h.sqlite"
    assert _gpuperf(tmp_path, "history", "ingest", str(runs), "--history", str(database)).returncode == 0
    return database


@pytest.mark.long
def test_show_prints_start_times_in_utc_so_runs_read_in_the_order_they_ran(tmp_path: Path) -> None:
    done = _gpuperf(tmp_path, "history", "show", "gemm", "--history", str(_history(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert "started (UTC)" in done.stdout
    shown = [line.split()[1] + " " + line.split()[2] for line in done.stdout.splitlines()[2:-1]]
    assert shown == sorted(shown) == ["2026-12-02 00:10:00", "2026-12-02 01:00:00", "2026-12-02 01:30:00"]


@pytest.mark.long
def test_reading_commands_change_no_file(tmp_path: Path) -> None:
    """A 0-byte file, another program's SQLite database (in rollback and in WAL mode) and a gpuperf history (in WAL
    mode, as the suite writes it), each read by every reading command: not one byte changes and no file is left
    beside them, no ``-wal`` or ``-shm`` either (another program's database stays in its journal mode)."""
    (tmp_path / "zero.sqlite").write_bytes(b"")
    with sqlite3.connect(tmp_path / "other.db") as other:
        other.execute("CREATE TABLE notes (text)")
        other.execute("INSERT INTO notes VALUES ('keep')")
    other.close()
    with sqlite3.connect(tmp_path / "other-wal.db") as other:
        other.execute("PRAGMA journal_mode = WAL")
        other.execute("CREATE TABLE notes (text)")
        other.execute("INSERT INTO notes VALUES ('keep')")
    other.close()
    history = _history(tmp_path)
    assert not list(tmp_path.glob("*-wal")) and not list(tmp_path.glob("*-shm"))  # the writers closed theirs
    for target, code in (("zero.sqlite", 1), ("other.db", 1), ("other-wal.db", 1), (history.name, None)):
        before = _files(tmp_path)
        for command in (["history", "show", "gemm"], ["history", "changes"],
                        ["history", "page", "--out", str(tmp_path.parent / f"{tmp_path.name}-site")]):
            done = _gpuperf(tmp_path, *command, "--history", target)
            if code is not None:
                assert done.returncode == code and "holds no gpuperf history" in done.stderr, done.stderr
            else:
                assert done.returncode == 0, done.stderr
            assert _files(tmp_path) == before, (target, command)
    assert sqlite3.connect(f"file:{tmp_path / 'other.db'}?mode=ro", uri=True).execute(
        "PRAGMA journal_mode").fetchone()[0] == "delete"


@pytest.mark.long
def test_the_default_wal_history_is_read_from_read_only_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A history in WAL mode on storage this user cannot write (a read-only mount; root writes anyway, so for
    root the folder is made to read as unwritable): every reader reads it, and nothing is written there."""
    from gpuperf.cli import main
    from gpuperf.history import engine

    history = _history(tmp_path)
    assert history.read_bytes()[18:20] == b"\x02\x02"  # the header of a WAL-mode database
    before = _files(tmp_path)
    tmp_path.chmod(0o555)
    try:
        if os.geteuid() == 0:
            folder = history.resolve().parent
            granted = os.access
            unwritable = (folder, history.resolve())
            monkeypatch.setattr(engine.os, "access", lambda path, mode: (
                False if Path(path).resolve() in unwritable and mode & os.W_OK else granted(path, mode)))
        assert engine.reading_mode(history) == "immutable"
        for command in (["history", "show", "gemm"], ["history", "changes"],
                        ["history", "page", "--out", str(tmp_path.parent / f"{tmp_path.name}-site")]):
            assert main([command[0], "--history", str(history), *command[1:]]) == 0, capsys.readouterr().err
            assert _files(tmp_path) == before, command
        assert "3 runs" in capsys.readouterr().out
    finally:
        tmp_path.chmod(0o755)


@pytest.mark.long
@pytest.mark.parametrize("make", ["empty folder", "missing path", "only refused files"])
def test_a_failed_ingest_leaves_no_new_file(make: str, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    write(tmp_path / "bad" / "notes.json", {"not": "a run"})
    path = {"empty folder": "empty", "missing path": "nosuch", "only refused files": "bad"}[make]
    before = _files(tmp_path)
    done = _gpuperf(tmp_path, "history", "ingest", path, "--history", "new/history.sqlite")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert _files(tmp_path) == before and not (tmp_path / "new").exists()


@pytest.mark.long
def test_a_nightly_ingest_of_results_leaves_a_runs_ab_folder_out(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write(results / "20261201-120000" / "results.json", document("2026-12-01T12:00:00+00:00", {CASE: 50.0}))
    write(results / "ab-20261201-130000" / "ab.json", {"schema": 1, "cases": []})
    for side, value in (("base", 50.0), ("head", 40.0)):
        write(results / "ab-20261201-130000" / side / "20261201-130000" / "results.json",
              document("2026-12-01T13:00:00+00:00", {CASE: value}, commit=side * 10))
    for night in range(2):
        done = _gpuperf(tmp_path, "history", "ingest", "results", "--history", "h.sqlite")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "left out 3 files of A/B runs" in done.stdout
        assert f"{1 - night} runs added, {night} already present, 0 files refused" in done.stdout


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    git(repo, "init", "-q", env=env)
    return repo, commit(repo, "base", {"pytest.ini": "[pytest]\n"}, env=env)


@pytest.mark.long
@pytest.mark.parametrize(("target", "said"), [
    ("sqlite://", "an in-memory SQLite database"),
    ("http://x", "unknown database kind 'http'"),
    (f"postgresql://u:{SECRET}@127.0.0.1:1/db", "cannot be opened"),
    (AT_QUERY, "cannot be opened"),
    ("other.db", "holds tables of another program"),
    ("taken/h.sqlite", "not a writable folder"),
])
def test_ab_refuses_a_history_it_could_not_append_to_before_either_side_starts(target: str, said: str,
                                                                              tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    with sqlite3.connect(tmp_path / "other.db") as other:
        other.execute("CREATE TABLE notes (text)")
    other.close()
    (tmp_path / "taken").write_text("a file where the history's folder would be")
    done = _gpuperf(tmp_path, "ab", "--repo", str(repo), "--base", base, "--out", str(tmp_path / "out"),
                    "--history", target)
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stdout + done.stderr
    assert said in done.stderr and SECRET not in done.stderr and SECRET[:5] not in done.stderr, done.stderr
    assert SECRET[5:] not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists() and done.stdout == ""


def test_a_sessions_recorded_arguments_hold_no_password() -> None:
    from gpuperf.wiring.history_append import recorded_options
    from gpuperf.wiring.session_options import Options

    recorded = recorded_options(Options(), ["perf_tests", "--history", f"postgresql://u:{SECRET}@h/db?password=x1y2z3"])
    assert SECRET not in json.dumps(recorded) and "x1y2z3" not in json.dumps(recorded)
    assert recorded["args"][-1] == "postgresql://u:***@h/db?password=***"
    recorded = recorded_options(Options(), ["perf_tests", f"--history={AT_QUERY}"])
    assert SECRET[:5] not in json.dumps(recorded) and SECRET[5:] not in json.dumps(recorded)
    assert recorded["args"][-1] == "--history=postgresql://u:***@127.0.0.1:1/db"


@pytest.mark.long
def test_bisect_prints_no_part_of_a_password_holding_at_then_query(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    done = _gpuperf(tmp_path, "bisect", "--repo", str(repo), "--good", base, "--bad", base, "-k", "gemm",
                    "--out", str(tmp_path / "out"), "--history", AT_QUERY)
    assert done.returncode not in (0, 5) and "Traceback" not in done.stderr, done.stderr
    assert SECRET[:5] not in done.stdout + done.stderr and SECRET[5:] not in done.stdout + done.stderr, done.stderr
    assert "://u:***@127.0.0.1:1/db" in done.stderr, done.stderr


@pytest.mark.long
def test_a_pytest_session_prints_no_part_of_a_password_holding_at_then_query(
        project: pytest.Pytester) -> None:  # noqa: F811
    """The session runs, says the history could not be appended to (naming the real host), and records its
    arguments in results.json and results.csv masked."""
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--missing-baseline=pass", "--history", AT_QUERY)
    output = "\n".join(result.outlines + result.errlines)
    assert "Traceback" not in output and "HISTORY NOT APPENDED: history postgresql+psycopg://u:***@127.0.0.1:1/db: " \
        "cannot be opened" in output, output
    written = [path.read_text() for path in sorted((project.path / "results").glob("*/results.*"))]
    assert len(written) >= 2 and "--history" in written[0]
    for text in (output, *written):
        assert SECRET[:5] not in text and SECRET[5:] not in text and "t?r2" not in text, text
