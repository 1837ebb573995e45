"""The dry run beside the real run, on a GPU host: examples/own-kernels copied as a user would, its baseline recorded
on this GPU (``--update-baselines``, in the copy), then each planted mistake of ``PLANTS`` (and the clean project) run
with ``--dry-run`` and on the GPU. The two must fail the same tests with the same lines and exit codes.

    python tools/gpu_host/dry_run_parity.py OUT_DIR

The plants are the ones tests/test_dry_run.py holds the dry run to against the simulated GPU; here the other side
is a real GPU. Leaves in OUT_DIR ``dry-run-parity.md`` (one row per plant: each run's exit code and failure lines,
and whether they agree) and ``dry-run-parity.json``; exits 1 when a plant's two runs disagree, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own-kernels"
TEST_FILE = "perf_tests/test_own_sgemm.py"
CASES = "cases/gemm.yaml"
SIZES = "[2048x2048x2048, 4096x1024x2048]"


@dataclass(frozen=True)
class Plant:
    """A mistake a test author makes: ``old`` replaced by ``new`` in ``path``, run with ``args``."""

    name: str
    path: str
    old: str
    new: str
    args: tuple[str, ...] = ()


PLANTS = (
    Plant("clean project", CASES, SIZES, SIZES, ("--gate",)),
    Plant("wrong keyword in measure()", TEST_FILE, "operands=(a_dev, b_dev, c))",
          "operands=(a_dev, b_dev, c), flop_per_element=2)"),
    Plant("missing baseline entry", CASES, SIZES, "[2048x2048x2048, 4096x1024x2048, 1024x1024x1024]", ("--gate",)),
    Plant("case-table typo", CASES, SIZES, "[2048x2048x2048, 4096x1024x20x48]"),
    Plant("stale baseline entry", CASES, SIZES, "[2048x2048x2048]", ("--gate",)),
)

PYTEST = ("-p", "no:cacheprovider", "--history", "none", "--results-dir", "none", "-m", "perf")


def plugin_args() -> tuple[str, ...]:
    """The plugin by name where gpuperf is on the path but not installed (a GPU host's copy of the tree): a user's
    project loads it through its pytest11 entry point, which only an installed distribution has."""
    from importlib.metadata import entry_points

    installed = any(point.value == "gpuperf.wiring.plugin" for point in entry_points(group="pytest11"))
    return () if installed else ("-p", "gpuperf.wiring.plugin")


def failure_lines(output: str) -> list[str]:
    """The lines that say why a run failed: errors' ``E`` lines, failed cases' reasons, the gate's verdict."""
    wanted = {line for line in output.splitlines()
              if re.match(r"^E\s", line) or line.startswith(("REGRESSED ", "NO_BASELINE "))
              or ": no baseline for this case on " in line or line.startswith("gpuperf: GATE FAILED")}
    return sorted(wanted)


def pytest_run(project: Path, *args: str) -> tuple[int, list[str]]:
    done = subprocess.run([sys.executable, "-m", "pytest", *plugin_args(), *PYTEST, *args], cwd=project, capture_output=True,
                          text=True, check=False, timeout=600)
    return done.returncode, failure_lines(done.stdout + done.stderr)


def copied_project(scratch: Path, recorded: Path | None) -> Path:
    project = Path(tempfile.mkdtemp(dir=scratch))
    shutil.copytree(EXAMPLE, project, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    if recorded is not None:
        shutil.copytree(recorded / "baselines", project / "baselines", dirs_exist_ok=True)
    return project


def planted(project: Path, plant: Plant) -> Path:
    file = project / plant.path
    text = file.read_text()
    if plant.old not in text:
        raise SystemExit(f"{plant.path}: {plant.old!r} not found: examples/own-kernels changed, update PLANTS")
    file.write_text(text.replace(plant.old, plant.new))
    return project


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows, agreed = [], True
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        recorded = copied_project(scratch, None)
        code, lines = pytest_run(recorded, "--update-baselines")
        if code != 0:
            raise SystemExit(f"recording the example's baseline on this GPU failed (exit {code}): {lines}")
        for plant in PLANTS:
            dry = pytest_run(planted(copied_project(scratch, recorded), plant), "--dry-run", *plant.args)
            real = pytest_run(planted(copied_project(scratch, recorded), plant), *plant.args)
            same = dry == real
            agreed &= same
            rows.append({"plant": plant.name, "args": list(plant.args), "dry_run": {"exit": dry[0], "lines": dry[1]},
                         "gpu": {"exit": real[0], "lines": real[1]}, "agree": same})
    (args.out / "dry-run-parity.json").write_text(json.dumps(rows, indent=1) + "\n")
    table = ["| plant | dry run | GPU run | agree |", "| --- | --- | --- | --- |"]
    for row in rows:
        shown = [f"exit {run['exit']}: " + "<br>".join(run["lines"]) for run in (row["dry_run"], row["gpu"])]
        table.append(f"| {row['plant']} | {shown[0]} | {shown[1]} | {'yes' if row['agree'] else 'NO'} |")
    (args.out / "dry-run-parity.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0 if agreed else 1


if __name__ == "__main__":
    sys.exit(main())
