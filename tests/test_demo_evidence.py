"""evidence/history.md's H200 history demo on GPU-68cafa7f, reproduced from its committed results files: ingested into
a fresh history, ``history changes --last 1`` prints exactly the committed output, naming every slowdown with the
slowed commit, and each file is in the indented form the suite writes and accepted by the results reader."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from gpuperf.cli import main
from gpuperf.store import reading, results
from history_support import ROOT

DEMO = ROOT / "evidence" / "demos"
FILES = sorted((DEMO / "68cafa7f-history").glob("*.json"))


def test_the_committed_demo_files_are_canonical_and_sound() -> None:
    assert len(FILES) == 3
    for path in FILES:
        raw = path.read_bytes()
        data = orjson.loads(raw)
        assert raw == orjson.dumps(data, option=reading.INDENTED) + b"\n"
        assert len(results.check_run(path, data)[1]) == len(data["records"]) == 129


def test_changes_over_the_committed_demo_runs_is_the_committed_output(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target = str(tmp_path / "demo.sqlite")
    monkeypatch.chdir(ROOT)
    assert main(["history", "ingest", "--history", target, "evidence/demos/68cafa7f-history"]) == 0
    assert "3 runs added, 0 already present, 0 files refused" in capsys.readouterr().out
    status = main(["history", "changes", "--history", target, "--last", "1"])
    out = capsys.readouterr().out
    committed = (DEMO / "68cafa7f-history-changes.txt").read_text()
    assert f"{out}exit {status}\n" == committed
    slowdowns = [line for line in out.splitlines() if line.startswith("SLOWDOWN")]
    commits = {re.search(r"and run \w+ \([\d-]+, commit (\w+)\)", line).group(1) for line in slowdowns}  # type: ignore[union-attr]
    assert status == 1 and len(slowdowns) == 52 and len(commits) == 1
    page = " ".join((ROOT / "evidence" / "history.md").read_text().split())
    assert "**52 slowdowns, every one with the slowed commit**" in page
    case = (DEMO / "68cafa7f-history-show.txt").read_text().splitlines()[0]
    assert main(["history", "show", "--history", target, case]) == 0
    assert capsys.readouterr().out == (DEMO / "68cafa7f-history-show.txt").read_text()
