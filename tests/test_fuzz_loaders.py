"""Fuzzing every loader with inputs mutated from the committed files (``tests/fuzzing.py``): whatever the bytes,
a loader accepts them or refuses them with its own error and a one-line message, within the time and memory
bound, and nothing else ever comes out (no ``KeyError``, ``TypeError``, ``RecursionError``, no hang)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import (CASE_TABLES, FLEET_RUNS, WORST, bounded, mutated_json, mutated_yaml, only, seed_baseline_text,
                     seed_results_text)
from gpuperf.store.baseline import BaselineError, load_baseline, parse_baseline
from gpuperf.store.results import ResultsError, load_run
from gpuperf.suite.cases import CaseTableError, load_cases

BASELINE_SEED = seed_baseline_text()
RESULTS_SEED = seed_results_text()


def test_the_seeds_load_unmutated(tmp_path: Path) -> None:
    """The mutations start from good files: a refusal below is the mutation's doing."""
    assert len(parse_baseline(tmp_path / "b.yaml", BASELINE_SEED).entries) == 4
    (tmp_path / "results.json").write_text(RESULTS_SEED)
    assert len(load_run(tmp_path / "results.json")[1]) == 4


@given(data=st.data())
def test_fuzz_baseline_loader(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("b") / "nvidia-h200.yaml"
    path.write_bytes(data.draw(mutated_yaml(BASELINE_SEED)))
    with bounded("baseline loader"):
        only((BaselineError,), lambda: load_baseline(path))


@given(data=st.data())
def test_fuzz_results_loader(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    seed = seed_results_text(data.draw(st.sampled_from(FLEET_RUNS[:3])))
    path = tmp_path_factory.mktemp("r") / "results.json"
    path.write_bytes(data.draw(mutated_json(seed)))
    with bounded("results loader"):
        only((ResultsError,), lambda: load_run(path))


@given(data=st.data())
def test_fuzz_case_table_loader(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    table = data.draw(st.sampled_from(CASE_TABLES))
    directory = tmp_path_factory.mktemp("cases")
    (directory / table.name).write_bytes(data.draw(mutated_yaml(table.read_text())))
    with bounded("case-table loader"):
        only((CaseTableError,), lambda: load_cases(table.stem, directory=directory))


def test_report_the_worst_example(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the slowest example and the largest peak per target (``-s`` shows them); the bound itself is
    asserted on every example above."""
    with capsys.disabled():
        for target, (seconds, peak) in sorted(WORST.items()):
            print(f"\n{target}: slowest example {seconds:.3f} s, largest peak {peak / 2**20:.1f} MiB")
