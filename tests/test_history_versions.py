"""A version change is named on a slowdown whose range touches the run it happened at or the run before it:
generated histories with a driver change and a slowdown at many positions (a clean step, a step a run late, a
dip just before the change), through ``history ingest`` and ``history changes``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gpuperf.cli import main
from tests.history_support import document, write

RUNS = 40
OLD, NEW = "570.86.15", "580.159.04"
SPREAD = 0.004
LINE = re.compile(r"^SLOWDOWN (?P<case>\S+) .*culprit in commits (?P<good>[0-9a-f]{10})\S*\.\.(?P<bad>[0-9a-f]{10})")


def _history(folder: Path, rng: np.random.Generator, change_at: int) -> None:
    """40 runs of four cases, the driver changed at run ``change_at``: a 4 % step there, a 2.5 % step a run late,
    a 4 % step after a -2.8 sigma dip at the run before, and a case with no step."""
    noise = rng.normal(0.0, SPREAD, size=(4, RUNS))
    steps = np.ones((4, RUNS))
    steps[0, change_at:] = 0.96
    steps[1, change_at + 1:] = 0.975
    steps[2, change_at:] = 0.96
    noise[2, change_at - 1] = -2.8 * SPREAD
    figures = 50.0 * steps * (1 + noise)
    for number in range(RUNS):
        values = {f"case{case}": float(figures[case, number]) for case in range(4)}
        write(folder / f"run-{number:03d}.json",
              document(f"2027-01-{1 + number // 24:02d}T{number % 24:02d}:00:00+00:00", values,
                       commit=f"{number:010x}" + "0" * 30, driver=OLD if number < change_at else NEW))


@pytest.mark.long
@pytest.mark.parametrize("change_at", [3, 8, 13, 19, 26, 31, 36])
def test_a_version_change_is_named_on_every_slowdown_whose_range_touches_it(
        change_at: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _history(tmp_path / "runs", np.random.default_rng(change_at), change_at)
    database = str(tmp_path / "history.sqlite")
    assert main(["history", "--history", database, "ingest", str(tmp_path / "runs")]) == 0
    capsys.readouterr()
    main(["history", "--history", database, "changes"])
    printed = capsys.readouterr().out.splitlines()
    slowdowns = [match for line in printed if (match := LINE.match(line))]
    assert {match["case"] for match in slowdowns} >= {"case0", "case2"}, printed
    touching = [match for match in slowdowns
                if int(match["good"], 16) <= change_at and int(match["bad"], 16) >= change_at - 1]
    assert len(touching) >= 2, printed
    for match in touching:
        assert f"driver {OLD} → {NEW}" in match.string, match.string
