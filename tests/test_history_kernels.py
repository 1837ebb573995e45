"""Every kernel change the gate calls one (another name, symbol digest, code digest or configuration) is kept in the
history and named at the change point, also where the change point lands a run early: generated histories through
``history ingest`` and ``history changes``, and a schema 5 history migrated to keep them."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuperf.cli import main
from gpuperf.history.database import History, sqlite_url
from gpuperf.history.rows import kernel_identity
from tests.history_support import document, write

RUNS = 30
CHANGE_AT = 20
NOISE = 0.003
LINE = re.compile(r"^SLOWDOWN (?P<case>\S+) .*and run \w+ \([\d-]+, commit (?P<after>[0-9a-f]{10})")
BEFORE = {"name": "gemm_kernel", "symbol": "a" * 12, "code": "b" * 12, "config": "num_warps=4"}
#: What changes at ``CHANGE_AT`` per case, and what ``changes`` must say of it.
CHANGED: dict[str, tuple[dict[str, str], str]] = {
    "renamed": ({"name": "gemm_kernel_v2"}, "kernels changed: gemm_kernel → gemm_kernel_v2"),
    "symbol": ({"symbol": "c" * 12}, f"gemm_kernel symbol {'a' * 12} → {'c' * 12}"),
    "code": ({"code": "d" * 12}, f"gemm_kernel code {'b' * 12} → {'d' * 12} (same name, other code: same config "
                                  "num_warps=4: its source or constants changed)"),
    "config": ({"code": "e" * 12, "config": "num_warps=8"},
               f"gemm_kernel code {'b' * 12} → {'e' * 12} (same name, other code: config num_warps=4 → num_warps=8)"),
}


def _kernels(case: str, number: int) -> list[dict[str, Any]]:
    kernel = {**BEFORE, **(CHANGED[case][0] if number >= CHANGE_AT else {})}
    return [{**kernel, "grid": [8, 8, 1], "block": [128, 1, 1], "registers": 64, "shared_memory": 0}]


def _history(folder: Path, rng: np.random.Generator, dip: bool) -> None:
    """30 runs of the four cases, each 4 % slower from run 20 with its kernel changed; ``dip``: a −3 σ run just
    before, which places a change point a run early."""
    for number in range(RUNS):
        doc = document(f"2027-01-01T{number // 2:02d}:{30 * (number % 2):02d}:00+00:00",
                       {case: 50.0 * (0.96 if number >= CHANGE_AT else 1.0)
                        * (1 + NOISE * (-3.0 if dip and number == CHANGE_AT - 1 else rng.standard_normal()))
                        for case in CHANGED}, commit=f"{number:010x}" + "0" * 30)
        for record in doc["records"]:
            record["kernels"] = _kernels(record["case_id"], number)
        write(folder / f"run-{number:03d}.json", doc)


@pytest.mark.parametrize("dip", [False, True])
def test_every_kernel_change_the_gate_calls_one_is_named_at_its_change_point(
        dip: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _history(tmp_path / "runs", np.random.default_rng(3), dip)
    database = str(tmp_path / "history.sqlite")
    assert main(["history", "--history", database, "ingest", str(tmp_path / "runs")]) == 0
    capsys.readouterr()
    assert main(["history", "--history", database, "changes", "--last", "1"]) == 0
    lines = {match["case"]: match for line in capsys.readouterr().out.splitlines() if (match := LINE.match(line))}
    assert set(lines) == set(CHANGED)
    for case, (_, told) in CHANGED.items():
        assert told in lines[case].string, lines[case].string
        assert int(lines[case]["after"], 16) in ((CHANGE_AT - 1, CHANGE_AT) if dip else (CHANGE_AT,))


def test_a_schema_5_history_is_migrated_to_keep_each_record_s_kernels(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    with History(sqlite_url(path)) as history:
        doc = document("2027-01-01T00:00:00+00:00", {case: 50.0 for case in CHANGED})
        for record in doc["records"]:
            record["kernels"] = _kernels(record["case_id"], CHANGE_AT)
        doc["records"][0]["kernels"] = [{"name": "only_a_name", "grid": [1, 1, 1], "block": [1, 1, 1]}]
        assert history.append(doc, "run")
    with sqlite3.connect(path) as connection:  # as schema 5 left it
        connection.execute("ALTER TABLE records DROP COLUMN kernel_identity")
        connection.execute("UPDATE schema_version SET version = 5")
    with History(sqlite_url(path)) as history:
        kept = history.kernels_at([1])
    expected = {record["case_id"]: kernel_identity(record["kernels"]) for record in doc["records"]}
    assert {case: identity for (case, _), (_, identity) in kept.items()} == expected
    assert expected[doc["records"][0]["case_id"]] is None and all(list(expected.values())[1:])
