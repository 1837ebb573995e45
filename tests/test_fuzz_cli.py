"""Fuzzing every command of ``python -m gpuperf`` with mutated inputs (``tests/fuzzing.py``): in-process through
``gpuperf.cli.main`` for speed, and a few real subprocesses under a 1 GiB address-space limit. The exit code
is always one of the documented ones (0 ok, 1 refused or failing, 2 a malformed command line), stderr holds at
most one ``gpuperf: error:`` line and never a traceback, and each input is handled within the bound."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzing import (MAX_BYTES, MAX_SECONDS, REPO, WORST, bounded, mutated_json, mutated_yaml, seed_baseline_text,
                     seed_results_text)
import gpuperf.output.plot  # noqa: F401  (imported here: matplotlib's first import is not an input's cost)
from gpuperf.cli import main
from gpuperf.output.readme import END, START

BASELINE_SEED = seed_baseline_text()
RESULTS_SEED = seed_results_text()
EXIT_CODES = {0, 1, 2}

#: Each command with where the mutated input goes ({baseline}, {run}) and a good input beside it ({good_run},
#: {good_baseline}); {out} is a fresh folder.
COMMANDS = [
    ["baseline", "check", "{baseline}"],
    ["baseline", "diff", "{baseline}", "{good_baseline}"],
    ["baseline", "diff", "{good_run}", "{run}"],
    ["baseline", "seal", "{baseline}"],
    ["baseline", "drop", "{baseline}", "perf_tests/test_batched.py::test_batched_gemm_perf[strided-fp16-1024x256x256x256-cold]"],
    ["baseline", "from-runs", "{baseline}", "{run}"],
    ["compare", "{good_baseline}", "{run}"],
    ["compare", "{run}", "{good_run}"],
    ["fleet", "{run}", "{good_run}"],
    ["plot", "{run}", "--out", "{out}"],
    ["plot", "{baseline}", "--out", "{out}"],
    ["readme", "{run}", "--readme", "{readme}"],
    ["history", "ingest", "{run}", "{good_run}", "--history", "sqlite:///{out}/history.sqlite"],
]


def _write_inputs(directory: Path, baseline: bytes, run: bytes) -> dict[str, str]:
    (directory / "out").mkdir()
    paths = {"baseline": directory / "nvidia-h200.yaml", "good_baseline": directory / "good.yaml",
             "run": directory / "run" / "results.json", "good_run": directory / "good" / "results.json",
             "readme": directory / "README.md"}
    paths["run"].parent.mkdir()
    paths["good_run"].parent.mkdir()
    paths["baseline"].write_bytes(baseline)
    paths["good_baseline"].write_text(BASELINE_SEED)
    paths["run"].write_bytes(run)
    paths["good_run"].write_text(seed_results_text(records=6))
    paths["readme"].write_text(f"# x\n{START}\n{END}\n")
    return {**{name: str(path) for name, path in paths.items()}, "out": str(directory / "out")}


def _check_one_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        with bounded(f"cli {argv[0]}", trace_memory=False):
            code = main(argv)
    except SystemExit as exc:  # argparse's usage error
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    assert code in EXIT_CODES, (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = [line for line in err.splitlines() if line.startswith("gpuperf: error:")]
    assert len(lines) <= 1 and (code == 0 or lines or code == 2 or "REGRESSED" in out or "ERROR" in out
                                or "ANOMALY" in out or "refused" in out), (argv, code, err)


@given(data=st.data())
def test_fuzz_every_command_in_process(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                                       data: st.DataObject) -> None:
    directory = tmp_path_factory.mktemp("cli")
    inputs = _write_inputs(directory, data.draw(mutated_yaml(BASELINE_SEED)), data.draw(mutated_json(RESULTS_SEED)))
    command = data.draw(st.sampled_from(COMMANDS))
    _check_one_run([part.format(**inputs) for part in command], capsys)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MAX_BYTES + (512 << 20), MAX_BYTES + (512 << 20)))


@pytest.mark.long
@settings(max_examples=max(3, settings.default.max_examples // 25))  # a process each: 3 fast, 20 long
@given(data=st.data())
def test_fuzz_real_subprocesses(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """The real entry point, memory-limited: ``python -m gpuperf`` as a user runs it."""
    directory = tmp_path_factory.mktemp("sub")
    inputs = _write_inputs(directory, data.draw(mutated_yaml(BASELINE_SEED)), data.draw(mutated_json(RESULTS_SEED)))
    command = [part.format(**inputs) for part in data.draw(st.sampled_from(COMMANDS))]
    done = subprocess.run([sys.executable, "-m", "gpuperf", *command], cwd=REPO, capture_output=True, text=True,
                          timeout=MAX_SECONDS + 20, preexec_fn=_limited, check=False)
    assert done.returncode in EXIT_CODES, (command, done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr


def test_report_the_worst_command(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        for target, (seconds, peak) in sorted(WORST.items()):
            print(f"\n{target}: slowest example {seconds:.3f} s CPU, peak resident size {peak / 2**20:.0f} MiB")
