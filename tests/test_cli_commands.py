"""The command line imports only the command it runs, and still prints every error the same way: a command's
own errors, each as one line with exit 1, in a fresh process where nothing else was imported."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuperf.install.command import install_command

from gpuperf.cli import COMMANDS, ERRORS, build_parser

ROOT = Path(__file__).resolve().parent.parent
OTHER_COMMANDS = ["gpuperf.commands.bisect", "gpuperf.commands.baseline", "gpuperf.commands.compare",
                  "gpuperf.commands.fleet",
                  "gpuperf.measure.device", "gpuperf.output.results"]


def _fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)


@pytest.mark.long
def test_history_changes_imports_no_other_command(tmp_path: Path) -> None:
    code = ("import json, sys\nfrom gpuperf.cli import main\n"
            "code = main(['history', '--history', sys.argv[1], 'changes'])\n"
            "print(json.dumps([code, sorted(sys.modules)]))")
    from gpuperf.history.database import History, sqlite_url
    from history_support import document

    with History(sqlite_url(tmp_path / "h.sqlite")) as history:  # reading commands never create a history
        history.append(document("2026-12-01T10:00:00+00:00", {"case": 50.0}), "run")
    done = _fresh(code, f"sqlite:///{tmp_path / 'h.sqlite'}")
    exit_code, modules = json.loads(done.stdout.splitlines()[-1])
    assert exit_code == 0 and "0 change points in 1 series over 1 runs" in done.stdout
    assert "gpuperf.commands.history" in modules and not set(OTHER_COMMANDS) & set(modules)


def test_the_version_imports_no_command(tmp_path: Path) -> None:
    code = ("import json, sys\nfrom gpuperf.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit as exc:\n"
            "    print(json.dumps([exc.code, sorted(sys.modules)]))")
    done = _fresh(code)
    exit_code, modules = json.loads(done.stdout.splitlines()[-1])
    assert exit_code == 0 and done.stdout.startswith("gpuperf ")
    assert not {"gpuperf.commands.compare", "gpuperf.commands.history", *OTHER_COMMANDS} & set(modules)
    assert "sqlalchemy" not in modules and "pytest" not in modules


def test_every_error_main_prints_is_named_where_it_is_defined() -> None:
    for module, name in ERRORS:
        error = getattr(importlib.import_module(module), name)
        assert issubclass(error, Exception) and error.__module__ == module


@pytest.mark.parametrize("argv", [["history", "ingest", "x"], ["compare", "a", "b", "--tolerance", "0.05"],
                                  ["baseline", "drop", "b.yaml", "case"], ["bisect", "--good", "a", "--bad", "b",
                                                                           "-k", "case"], ["device", "--slug"]])
def test_a_command_s_parser_alone_parses_as_the_whole_one_does(argv: list[str]) -> None:
    assert vars(build_parser(argv).parse_args(argv)) == vars(build_parser().parse_args(argv))


@pytest.mark.long
def test_the_help_lists_every_command() -> None:
    shown = subprocess.run([sys.executable, "-m", "gpuperf", "--help"], capture_output=True, text=True, cwd=ROOT,
                           env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert shown.returncode == 0 and all(f"    {name}" in shown.stdout for name, _, _ in COMMANDS)


@pytest.mark.long
@pytest.mark.parametrize(("missing", "argv", "message"), [
    ("matplotlib", ["plot", "baselines/nvidia-h200.yaml"],
     "python -m gpuperf plot needs matplotlib, not installed here: " + install_command("plot")),
    ("matplotlib", ["history", "--history", "{tmp}/h.sqlite", "page"],
     "python -m gpuperf history page needs matplotlib, not installed here: " + install_command("page")),
    ("plotly,jinja2", ["history", "--history", "{tmp}/h.sqlite", "page"],
     "python -m gpuperf history page needs plotly and jinja2, not installed here: " + install_command("page")),
])
def test_a_command_whose_extra_is_missing_names_its_install_command(missing: str, argv: list[str], message: str,
                                                                    tmp_path: Path) -> None:
    """In a fresh process where the extra's packages cannot be imported (as without the extra), before any
    input is read or written."""
    code = ("import sys\nfor name in sys.argv[1].split(','):\n    sys.modules[name] = None\n"
            "from gpuperf.cli import main\nsys.exit(main(sys.argv[2:]))")
    done = _fresh(code, missing, *[part.format(tmp=tmp_path) for part in argv])
    assert done.returncode == 1 and done.stderr == f"gpuperf: error: {message}\n", done.stderr
    assert list(tmp_path.iterdir()) == []


#: Every command's one-line error is checked in process in the fast tier (tests/test_hostile_input.py,
#: tests/test_fuzz_cli.py); in a fresh process, here, four in the fast tier and all nine in the long one.
LONG = pytest.mark.long


@pytest.mark.long
@pytest.mark.parametrize(("argv", "message"), [
    (["history", "--history", "none", "changes"], "--history none: these commands need a history"),
    pytest.param(["history", "--history", "mysql://x/y", "show", "case"], "unknown database kind 'mysql'", marks=LONG),
    pytest.param(["history", "--history", "sqlite:///{tmp}/h.sqlite", "ingest", "{tmp}/missing"],
                 "no such file or directory", marks=LONG),
    (["compare", "{tmp}/a.yaml", "{tmp}/b.yaml"], "a.yaml: no such baseline file"),
    pytest.param(["baseline", "check", "{tmp}/bad.yaml"], "1 of 1 baseline file(s) cannot be used", marks=LONG),
    (["plot", "{tmp}/bad.yaml"], "bad.yaml: not valid YAML"),
    pytest.param(["fleet", "{tmp}/missing-run"], "missing-run: no such file", marks=LONG),
    pytest.param(["readme", "{tmp}/missing-run"], "missing-run: no such file", marks=LONG),
    (["bisect", "--good", "HEAD", "--bad", "HEAD", "-k", "case", "--repo", "{tmp}"], "not a git repository"),
])
def test_each_command_s_errors_are_one_line_and_exit_1_in_a_fresh_process(argv: list[str], message: str,
                                                                          tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("entries: [")
    args = [part.format(tmp=tmp_path) for part in argv]
    done = _fresh("import sys\nfrom gpuperf.cli import main\nsys.exit(main(sys.argv[1:]))", *args)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("gpuperf: error: ") and message in done.stderr and "Traceback" not in done.stderr
