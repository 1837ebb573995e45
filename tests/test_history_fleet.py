"""A fleet's history (``tools/generators/history_generate.py --fleet``): runs landing on random hosts of the committed gate runs
(13 H200s, each reading its cases as its gate run did), one series per case with each host's offset removed. A 3 %
step on every case is found by its third run and placed at its run, alarmed once, and no host is taken for a
change: in memory (small in the fast tier, full size in the long one) and through ingest and the CLI on SQLite and
PostgreSQL."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from history_support import ENGINES, database_url  # noqa: F401  (a fixture)
from tools.generators.history_generate import (FleetHost, fleet_end_to_end, fleet_false, fleet_hosts, fleet_step,
                                    rate_interval)


@pytest.fixture(scope="module")
def fleet() -> tuple[list[FleetHost], list[str]]:
    return fleet_hosts()


def _few(cases: list[str]) -> list[str]:
    """Every eighth case and the 1-token projections, which the hosts read furthest apart."""
    return sorted({*cases[::8], *(case for case in cases if "-t1-" in case)})


def test_the_fleet_s_hosts_read_as_the_committed_gate_runs_do(fleet: tuple[list[FleetHost], list[str]]) -> None:
    hosts, cases = fleet
    assert len(hosts) == 13 and len(cases) >= 160
    medians = {case: statistics.median(host.judged[case] for host in hosts) for case in cases}
    one_token = [case for case in cases if "-t1-" in case]
    by_host = {host.host: statistics.median(host.judged[c] / medians[c] - 1 for c in one_token) for host in hosts}
    high = sorted(host for host, offset in by_host.items() if offset > 0.02)
    low = [host for host, offset in by_host.items() if offset < -0.02]
    assert len(high) == 4 and low == ["GPU-3d2eeeeb"] and by_host["GPU-3d2eeeeb"] == pytest.approx(-0.029, abs=0.002)
    bound = [c for c in cases if hosts[0].records[c].get("clock_bound") is True]
    assert all(abs(statistics.median(host.judged[c] / medians[c] - 1 for c in bound)) < 0.003 for host in hosts)


def test_a_step_on_every_case_is_found_by_its_third_run_on_random_hosts(
        fleet: tuple[list[FleetHost], list[str]]) -> None:
    hosts, cases = fleet
    few = _few(cases)
    found, single, off, total = fleet_step(hosts, few, np.random.default_rng(1), 0.003, 1, runs=120, after=4)
    assert total == len(few) and found >= 0.95 * total and single >= 0.95 * found and off == 0


@pytest.mark.long
def test_a_step_on_every_case_of_the_full_fleet(fleet: tuple[list[FleetHost], list[str]]) -> None:
    """The committed gate runs' 0.3 % noise (tools/generators/history_generate.py --fleet measures the noisier levels)."""
    hosts, cases = fleet
    found, single, off, total = fleet_step(hosts, cases, np.random.default_rng(2), 0.003, 1)
    assert found >= 0.95 * total and single >= 0.95 * found and off <= 0.01 * total


@pytest.mark.long
@pytest.mark.parametrize("noise", [0.003, 0.02])
def test_few_false_change_points_on_a_stationary_fleet(noise: float, fleet: tuple[list[FleetHost], list[str]]) -> None:
    """One stationary 150-run fleet history checked after every run: the count is within what a rate of 1 per
    1,000 case-runs gives (its 95 % interval's lower end at or below 1; tools/generators/history_generate.py --fleet measures
    the rate on many more)."""
    hosts, cases = fleet
    count, case_runs = fleet_false(hosts, cases, np.random.default_rng(3), noise, 1, runs=150)
    assert rate_interval(count, case_runs)[0] <= 1.0, (count, case_runs)


@pytest.mark.long
@pytest.mark.parametrize("database_url", ENGINES, indirect=True)
def test_a_fleet_history_through_ingest_and_the_cli(database_url: str, tmp_path: Path,
                                                    fleet: tuple[list[FleetHost], list[str]]) -> None:
    hosts, cases = fleet
    few = _few(cases)
    told = fleet_end_to_end(hosts, few, np.random.default_rng(4), database_url, tmp_path / "runs", runs=100)
    first, later = told[3], told[5]
    assert first["exit"] == 1 and len(first["placed"]) >= 0.95 * len(few)
    assert first["driver"] >= first["placed"] and first["kernel"] >= first["placed"]  # both named at each step
    assert later["exit"] == 0 and later["recent"] == []  # one alarm per step: not again 10 runs later
    named = {line.split()[1] for line in first["lines"] if line.startswith("HOST ")}  # hosts, not changes
    assert "GPU-3d2eeeeb" in named and len(named & {"GPU-0d7bcbaf", "GPU-312a1ad8", "GPU-691a02b1", "GPU-efba48f8"}) >= 3
    assert not any(line.startswith("SLOWDOWN") and " host " in line and "all hosts" not in line
                   for line in later["lines"])


def test_the_page_s_change_points_say_when_they_fall_on_a_change_of_host(tmp_path: Path) -> None:
    from gpuperf.history.database import History, sqlite_url
    from gpuperf.trend.source import history_change_points
    from history_support import document

    rng = np.random.default_rng(6)
    hosts = ["GPU-aaaa0001", "GPU-bbbb0002"] * 20
    hosts[29:31] = ["GPU-aaaa0001", "GPU-bbbb0002"]  # the step falls between the two hosts
    offsets = {"GPU-aaaa0001": 0.0, "GPU-bbbb0002": 0.03}
    with History(sqlite_url(tmp_path / "h.sqlite")) as history:
        for number, host in enumerate(hosts):
            value = 50.0 * (0.95 if number >= 30 else 1.0) * (1 + offsets[host]) * (1 + 0.002 * rng.standard_normal())
            assert history.append(document(f"2027-01-01T{number // 2:02d}:{30 * (number % 2):02d}:00+00:00",
                                           {"case": value}, host=host), "run")
        found = history_change_points(history)
    ((key, (point,)),) = found.items()
    assert key[1] == "case" and point.relative == pytest.approx(-0.05, abs=0.006)
    assert point.host_change.startswith("GPU-aaaa0001 (") and " → GPU-bbbb0002 (" in point.host_change
