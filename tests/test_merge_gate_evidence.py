"""evidence/ab.md's merge-gate section and sensitivity table are what the committed runs of fresh H200s say
(evidence/ab/merge-gate/<gpu>/, as tools/gpu_host/merge_gate_device.sh left them): rebuilt by the tools the page names,
and the tool's bad input is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpuperf.ab.sensitivity import planted_run, sensitivity_section

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "evidence" / "ab.md"
FOLDERS = sorted(path for path in (REPO / "evidence" / "ab" / "merge-gate").iterdir() if path.is_dir())
TOOL = [sys.executable, str(REPO / "tools" / "evidence" / "merge_gate_table.py")]


def test_the_merge_gate_section_is_the_committed_runs() -> None:
    assert len(FOLDERS) >= 1
    built = subprocess.run([*TOOL, *map(str, (f.relative_to(REPO) for f in FOLDERS))], capture_output=True,
                           text=True, cwd=REPO, check=True).stdout.strip()
    assert built in PAGE.read_text(encoding="utf-8"), \
        "stale: run python3 tools/evidence/merge_gate_table.py … --page evidence/ab.md"


def _table_runs() -> list[Path]:
    """The planted runs the sensitivity section's first line names."""
    import re

    named = re.search(r"From \d+ planted A/B runs: (.+)\.\n", PAGE.read_text(encoding="utf-8"))
    assert named, "no sensitivity section: run python3 tools/evidence/sensitivity_table.py … --page evidence/ab.md"
    return [REPO / name.strip() for name in named.group(1).split(",")]


def test_the_sensitivity_table_is_the_committed_planted_runs_it_names() -> None:
    """The section is what tools/evidence/sensitivity_table.py makes of the committed ab.json files its first line
    names, one run per plant (1 %, 2 % and 5 %), each under evidence/ab/merge-gate/<gpu>/."""
    page = PAGE.read_text(encoding="utf-8")
    files = _table_runs()
    assert all(f.parent.parent == REPO / "evidence" / "ab" / "merge-gate" and f.is_file() for f in files), files
    runs = [planted_run(json.loads(f.read_text()), str(f.relative_to(REPO))) for f in files]
    assert sorted(run.plant for run in runs) == [0.01, 0.02, 0.05]
    built = sensitivity_section(runs, [str(f.relative_to(REPO)) for f in files])
    assert built in page, "stale: run python3 tools/evidence/sensitivity_table.py … --page evidence/ab.md"


def test_a_folder_without_the_runs_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([*TOOL, str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "no gate.json" in done.stderr and "merge_gate_device.sh" in done.stderr


def test_the_other_gpus_planted_runs_caught_what_the_page_says() -> None:
    """Every planted run committed but those the table is made of: each caught every case its plant reached, and
    evidence/ab.md gives each GPU's shares."""
    from gpuperf.ab.sensitivity import coverage

    page = " ".join(PAGE.read_text(encoding="utf-8").split())
    in_table = set(_table_runs())
    for folder in FOLDERS:
        files = sorted(folder.glob("sens-*.json"))
        if not files or set(files) <= in_table:
            continue
        shares = []
        for path in files:
            cover = coverage(planted_run(json.loads(path.read_text()), path.name))
            assert cover.caught == cover.reached > 0, path
            shares.append(f"{cover.caught} of {cover.reached} at {float(path.stem.split('-')[1]) * 100:g} %")
        assert f"`evidence/ab/merge-gate/{folder.name}/` {', '.join(shares)}" in page, (folder.name, shares)


def test_the_fleet_page_quotes_each_merge_gate_s_pytest_time_from_its_durations() -> None:
    import re

    fleet = " ".join((REPO / "evidence" / "fleet.md").read_text(encoding="utf-8").split())
    for folder in FOLDERS:
        durations = (folder / "durations.txt").read_text(encoding="utf-8") + (folder / "merge-gate.log").read_text()
        found = re.search(r"^89\d passed(?:, \d+ \w+)* in ([\d.]+)s", durations, flags=re.MULTILINE)
        assert found, folder
        assert f"{found.group(1)} s" in fleet and f"`{folder.name}`" in fleet, folder.name
