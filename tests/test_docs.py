"""The README and the guide pages tell the truth: their links lead somewhere, the commands they show parse, the
README's two commands are the ones CI and a GPU machine need, and the generated pages are not stale."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from gpuperf.cli import build_parser, main

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
#: The pages a user reads: every path, option and CPU command they show is checked.
USER_PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md")),
              *sorted((ROOT / "examples").glob("*/README.md"))]
#: The lab records beside the committed runs (evidence/README.md indexes them): their links are checked too.
PAGES = [*USER_PAGES, *sorted((ROOT / "evidence").glob("*.md"))]
#: A fenced block: its language, the rest of its info string (```` ```sh gpu ````), its text.
FENCE = re.compile(r"^ *```(\w*)([^\n]*)\n(.*?)^ *```", re.M | re.S)
SHELL = {"bash", "sh", "shell", "console"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
SPAN = re.compile(r"`([^`]+)`")
CLI = ("python -m gpuperf", "python3 -m gpuperf", "gpuperf")
PYTEST = ("python -m pytest", "python3 -m pytest", "pytest")


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _prose(text: str) -> str:
    """``text`` without its fenced blocks (their links and spans are code, not Markdown)."""
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in _prose(page.read_text()).splitlines() if line.startswith("#")}


def _links() -> Iterator[tuple[Path, str]]:
    for page in PAGES:
        for target in LINK.findall(_prose(page.read_text())):
            if not re.match(r"[a-z]+:", target):
                yield page, target


def test_readme_is_short_and_narrow() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    assert [n for n, line in enumerate(lines, 1) if len(line) > 120] == []


def _broken_link(page: Path, target: str) -> str:
    """Why a relative link of ``page`` leads nowhere ("" when it leads to its file and heading)."""
    path, _, anchor = target.partition("#")
    resolved = (page.parent / path).resolve() if path else page
    if not resolved.exists():
        return f"{_shown(page)} links {target!r}, which does not exist"
    if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
        return f"{_shown(page)} links {target!r}: no such heading there"
    return ""


def test_every_relative_link_exists() -> None:
    links = list(_links())
    assert len(links) >= 50  # the pages' links were found, so the check below checks something
    assert [problem for page, target in links if (problem := _broken_link(page, target))] == []


def test_a_broken_link_or_heading_would_be_caught() -> None:
    readme = ROOT / "README.md"
    assert "does not exist" in _broken_link(readme, "docs/no-such-page.md")
    assert "no such heading" in _broken_link(readme, "docs/ci.md#no-such-heading")
    assert _broken_link(readme, "docs/ci.md") == ""


def _commands(text: str) -> Iterator[tuple[str, bool]]:
    """Every command a page shows, and whether it is a whole command line: each line of its shell blocks (split at
    ``&&``, ``;`` and ``|``; whole), and each code span of its prose (it may only name a command, as in "run
    ``python -m gpuperf compare``"). The callers keep those that start with ``python -m gpuperf`` or ``pytest``."""
    for language, _, block in FENCE.findall(text):
        if language in SHELL:
            for line in block.replace("\\\n", " ").splitlines():
                lexer = shlex.shlex(line.strip(), posix=True, punctuation_chars="&|;")
                lexer.whitespace_split = True
                lexer.commenters = "#"
                tokens, step = list(lexer), []
                for token in [*tokens, "&&"]:
                    if token in ("&&", "||", "|", ";", "&"):
                        if step:
                            yield shlex.join(step), True
                        step = []
                    else:
                        step.append(token)
    for span in SPAN.findall(_prose(text)):
        yield " ".join(span.split()), False


def _argv(command: str, prefixes: tuple[str, ...]) -> list[str] | None:
    for prefix in prefixes:
        if command == prefix or command.startswith(prefix + " "):
            return shlex.split(command[len(prefix):])
    return None


def _shown_commands(prefixes: tuple[str, ...]) -> list[tuple[str, list[str], bool]]:
    found = []
    for page in PAGES:
        for command, whole in _commands(page.read_text()):
            argv = _argv(command, prefixes)
            if argv is not None:
                found.append((f"{_shown(page)}: {command}", argv, whole))
    return found


def _named_cli_command_exists(argv: list[str]) -> str:
    """Why ``argv`` names no command or option of ``python -m gpuperf`` ("" when each one it names exists)."""
    parser, words = build_parser(), list(argv)
    while words:
        word = words.pop(0)
        if word == "--":
            break  # what follows is positional (``ab``'s pytest selection)
        commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if word.startswith("-"):
            action = parser._option_string_actions.get(word.split("=", 1)[0])
            if action is None:
                return f"{parser.prog} has no option {word}"
            if "=" not in word and action.nargs in (None, 1) and words:
                words.pop(0)  # the option's value, not a command
        elif commands is not None:
            if word not in commands.choices:
                return f"{parser.prog} has no command {word!r}"
            parser = commands.choices[word]
    return ""


def test_the_pages_show_commands_of_both_kinds() -> None:
    """The extraction itself works: it finds the README's commands, so the two tests below check something."""
    assert len(_shown_commands(CLI)) >= 20 and len(_shown_commands(PYTEST)) >= 20


@pytest.mark.long
def test_every_gpuperf_command_shown_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """A command line in a shell block parses as it stands; one named in prose names commands and options that
    exist. Every one that does not is listed."""
    problems = []
    for shown, argv, whole in _shown_commands(CLI):
        if missing := _named_cli_command_exists(argv):
            problems.append(f"{shown}: {missing}")
        elif whole:
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:
                if exc.code != 0:
                    problems.append(f"{shown}: {capsys.readouterr().err.strip()}")
    assert problems == []


@pytest.mark.long
@pytest.mark.parametrize("shown, argv, whole", _shown_commands(PYTEST), ids=lambda value: str(value)[:80])
def test_every_pytest_command_shown_parses(shown: str, argv: list[str], whole: bool, pytester: pytest.Pytester) -> None:
    """Parsed by pytest itself with the plugin loaded: an option that does not exist (or a bad value) fails."""
    try:
        pytester.parseconfig("-p", "gpuperf.wiring.plugin", *argv)
    except pytest.UsageError as exc:
        pytest.fail(f"{shown}: {exc}")


def test_a_wrong_option_in_a_page_would_be_caught(pytester: pytest.Pytester) -> None:
    with pytest.raises(pytest.UsageError):
        pytester.parseconfig("-p", "gpuperf.wiring.plugin", "perf_tests", "--update-baseline")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["baseline", "dif", "a", "b"])
    assert _named_cli_command_exists(["baseline", "dif"]) == "python -m gpuperf baseline has no command 'dif'"
    assert _named_cli_command_exists(["compare", "--tolerence"]) == "python -m gpuperf compare has no option --tolerence"


# --- paths, options and commands the pages name ------------------------------------------------------------

#: The folders at the top of the tree: a span starting with one names a path of it (``docs/ci.md``); so does a span
#: with a file's extension. Module paths may be written from the package (``verdict/gate.py``).
TOP = tuple(sorted(f"{path.name}/" for path in ROOT.iterdir() if path.is_dir() and path.name not in (".git", ".venv")))
PATH_SPAN = re.compile(r"\.?[\w-]+(/[\w.-]+)*/?")
EXTENSION = re.compile(r"\.(py|md|ya?ml|json|sh|txt|png|toml|ini|cu|cuh|log|gz|tsv|csv|html)$")


def _named_paths(page: Path) -> Iterator[str]:
    """The repository paths a page's prose names in code spans: ``docs/ci.md``, ``gpuperf/verdict/gate.py``, a test
    id's file (``perf_tests/test_gemm.py::test_gemm_perf[…]``). Spans with a placeholder (``<gpu>``, ``*``, ``…``),
    output folders (``results/…``, ``/tmp/…``) and words without a slash or an extension are not paths of the tree."""
    for span in SPAN.findall(_prose(page.read_text())):
        candidate = span.strip().split("::")[0]
        if not PATH_SPAN.fullmatch(candidate) or candidate.startswith(("results/", ".venv")):
            continue
        if "/" in candidate and (candidate.startswith(TOP) or EXTENSION.search(candidate)):
            yield candidate


def _missing_path(page: Path, named: str) -> str:
    """Why ``named`` is no path of the tree ("" when it is one, from the root, the page's folder or the package)."""
    if any((base / named).exists() for base in (ROOT, page.parent, ROOT / "gpuperf")):
        return ""
    return f"{_shown(page)} names `{named}`, which does not exist"


def test_every_path_a_page_names_exists() -> None:
    named = [(page, path) for page in USER_PAGES for path in _named_paths(page)]
    assert len(named) >= 50  # the pages' paths were found, so the check below checks something
    assert [problem for page, path in named if (problem := _missing_path(page, path))] == []


def test_a_path_that_is_not_there_would_be_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("See `docs/no-such-page.md`, `gpuperf/verdict/nosuch.py` and `docs/ci.md`; write `results/x.json`.\n"
                    "```sh\ncat docs/not-prose.md\n```\n")
    assert list(_named_paths(page)) == ["docs/no-such-page.md", "gpuperf/verdict/nosuch.py", "docs/ci.md"]
    assert [path for path in _named_paths(page) if _missing_path(page, path)] == ["docs/no-such-page.md",
                                                                                    "gpuperf/verdict/nosuch.py"]


def _cli_options(parser: argparse.ArgumentParser) -> set[str]:
    found = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found |= _cli_options(command)
    return found


def _known_options(pytester: pytest.Pytester) -> set[str]:
    """Every long option a page may name: pytest's with the plugins the suite uses (gpuperf's, xdist,
    pytest-benchmark), ``python -m gpuperf``'s (docs/options.md is made from the same spec), and the tools'."""
    config = pytester.parseconfig("-p", "gpuperf.wiring.plugin", "-p", "benchmark", "-p", "xdist")
    parser = config._parser  # pytest keeps its option groups there; no public API lists them
    found = {name for group in [parser._anonymous, *parser._groups] for option in group.options
             for name in option.names()}
    found |= _cli_options(build_parser())
    for tool in (ROOT / "tools").rglob("*.py"):
        found |= set(re.findall(r"""add_argument\(\s*["'](--[\w-]+)""", tool.read_text()))
    return found


def _named_options(page: Path) -> Iterator[str]:
    """The long options a page's prose names: each code span that starts with one (``--gate``, ``--tolerance 4``)."""
    for span in SPAN.findall(_prose(page.read_text())):
        if option := re.match(r"--[a-z][\w-]*[a-z0-9](?=$|[ =])", span.strip()):
            yield option.group(0)


def test_every_option_a_page_names_exists(pytester: pytest.Pytester) -> None:
    known = _known_options(pytester)
    assert {"--gate", "--update-baselines", "--markdown", "-n", "--benchmark-json", "--page"} <= known
    named = [(page, option) for page in USER_PAGES for option in _named_options(page)]
    assert len(named) >= 50
    assert [f"{_shown(page)} names {option}, which no command has" for page, option in named
            if option not in known] == []


def test_an_option_that_does_not_exist_would_be_caught(tmp_path: Path, pytester: pytest.Pytester) -> None:
    page = tmp_path / "page.md"
    page.write_text("Pass `--gate`, `--tolerence 4` or `--benchmark-…`.\n")
    assert [option for option in _named_options(page) if option not in _known_options(pytester)] == ["--tolerence"]


#: Fence info words that keep a shell block from being run (```` ```sh gpu ````): ``gpu``, it needs a GPU;
#: ``setup``, it installs or changes the machine, or needs a program the test extra does not bring; ``slow``, it
#: takes minutes (a simulation, a bench at full size). Every other shell block of a page runs as written.
NOT_RUN = frozenset({"gpu", "setup", "slow"})
#: A command that installs or changes the machine: run here it would change this very environment, so a block
#: holding one must be marked ``setup``.
INSTALLS = re.compile(r"(^|[\s;&|(])(pip3?|apt-get|apt|conda)\s+(install|download|uninstall)\b")
#: A command's expected exit status, when not 0: the last words of its comment (``# 52 slowdowns, exit 1``).
EXPECTED_EXIT = re.compile(r"#.*\bexit (\d)\s*$")


def _blocks(text: str) -> Iterator[tuple[str, set[str], str]]:
    """Each fenced block: its language, the other words of its info string, its text."""
    for language, info, block in FENCE.findall(text):
        yield language, set(info.split()), block


def _runnable(page: Path) -> list[str]:
    """The command lines of a page's shell blocks that run on any machine, continuation lines joined."""
    lines = []
    for language, marks, block in _blocks(page.read_text()):
        if language in SHELL and not marks & NOT_RUN:
            lines += [line.strip() for line in block.replace("\\\n", " ").splitlines()
                      if line.strip() and not line.lstrip().startswith("#")]
    return lines


def _tree_copy(target: Path) -> Path:
    """The committed tree, copied (a command may write into it: results, a history, a page)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the committed files are not known")
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def _run_as_written(line: str, tree: Path, scratch: Path) -> tuple[int, str]:
    """``line`` run by bash in ``tree`` with this interpreter as ``python``/``python3``; ``/tmp/`` is a scratch
    folder of this test's (the page's example paths stay as written, and runs do not share them)."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(sys.executable)
    (scratch / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("GPUPERF_HISTORY", None)  # a page's command writes the history it names, as a user's would
    done = subprocess.run(["bash", "-c", line.replace("/tmp/", f"{scratch}/tmp/")], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    return done.returncode, (done.stdout + done.stderr)[-2000:]




@pytest.mark.long
@pytest.mark.parametrize("page", [page for page in USER_PAGES if page.parent in (ROOT, ROOT / "docs")
                                  and _runnable(page)],
                         ids=_shown)
def test_every_command_a_page_shows_runs_as_written(page: Path, tmp_path: Path) -> None:
    """Each CPU command of a page's shell blocks, in order, in a copy of the committed tree, exits as the page says
    (0, or the ``exit N`` of its comment). GPU-only blocks are marked ``gpu`` and not run here."""
    tree = _tree_copy(tmp_path / "tree")
    failed = []
    installs = [line for line in _runnable(page) if INSTALLS.search(line)]
    assert installs == [], f"{_shown(page)}: mark the blocks of these commands setup, so they are not run: {installs}"
    for line in _runnable(page):
        expected = int(found.group(1)) if (found := EXPECTED_EXIT.search(line)) else 0
        code, output = _run_as_written(line, tree, tmp_path)
        if code != expected:
            failed.append(f"{line}\n  exit {code}, the page expects {expected}:\n{output}")
    assert failed == []


def test_a_command_that_fails_as_written_would_be_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\npython -m gpuperf baseline check baselines/no-such.yaml\n```\n\n```sh gpu\npytest x\n```\n"
                    "```bash\nfalse   # refused, exit 1\n```\n")
    assert _runnable(page) == ["python -m gpuperf baseline check baselines/no-such.yaml", "false   # refused, exit 1"]
    (tmp_path / "baselines").mkdir()
    assert _run_as_written(_runnable(page)[0], tmp_path, tmp_path)[0] != 0
    assert _run_as_written(_runnable(page)[1], tmp_path, tmp_path)[0] == 1
    assert INSTALLS.search("python3 -m pip install -e '.[page]'") and INSTALLS.search("sudo apt-get install x")
    assert not INSTALLS.search("python -m gpuperf baseline check baselines/*.yaml")


def test_the_workflows_pass_yamllint_strict() -> None:
    """docs/ci.md says so: ``yamllint -s .github/``, its default rules, a warning failing as an error does."""
    from yamllint import linter
    from yamllint.config import YamlLintConfig

    config = YamlLintConfig("extends: default")
    files = sorted(path for path in (ROOT / ".github").rglob("*") if path.suffix in (".yml", ".yaml"))
    assert len(files) >= 3
    assert [f"{_shown(path)}:{problem.line}:{problem.column} {problem.message}" for path in files
            for problem in linter.run(path.read_text(), config, str(path))] == []


# --- the README's two commands ---------------------------------------------------------------------------

def _two_commands() -> tuple[str, str]:
    """The shell blocks under the README's "The two commands", verbatim: the GPU one, then the CPU one."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## The two commands\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block.strip() for language, _, block in FENCE.findall(section) if language in SHELL]
    assert len(blocks) == 2 and all("\n" not in block for block in blocks), blocks
    return blocks[0], blocks[1]


def _steps(command: str) -> list[list[str]]:
    return [shlex.split(step) for step in command.split("&&")]


def _extras(requirement: str) -> set[str]:
    """The extras ``.[a,b]`` installs, following the extras that name others (``gpu = ["gpuperf[...]"]``)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    match = re.fullmatch(r"\.\[([\w,-]+)\]", requirement)
    assert match, f"{requirement!r} is not .[extras]"
    todo, seen = match.group(1).split(","), set()
    while todo:
        extra = todo.pop()
        assert extra in declared, f"no extra {extra!r} in pyproject.toml"
        seen.add(extra)
        for dependency in declared[extra]:
            nested = re.fullmatch(r"gpuperf\[([\w,-]+)\]", dependency)
            todo += [name for name in (nested.group(1).split(",") if nested else []) if name not in seen]
    return seen


def _needed_extras() -> set[str]:
    """Every extra a perf test or a kernel tells the user to install when it skips for a missing package."""
    sources = [*ROOT.glob("perf_tests/*.py"), *ROOT.glob("kernels/*.py")]
    return {extra for path in sources for group in re.findall(r"pip install -e '\.\[([\w,-]+)\]'", path.read_text())
            for extra in group.split(",")}


def test_the_gpu_command_installs_every_extra_the_default_cases_need() -> None:
    gpu, _ = _two_commands()
    install, run = _steps(gpu)
    assert install[:5] == ["python3", "-m", "pip", "install", "-e"]
    needed = _needed_extras()
    assert {"cuda13", "cublaslt"} <= needed  # what the skip hints name today: the check has teeth
    assert needed <= _extras(install[5])
    assert run == ["python3", "-m", "pytest", "perf_tests"] and (ROOT / "perf_tests").is_dir()


def test_the_cpu_command_is_what_ci_runs() -> None:
    _, cpu = _two_commands()
    ci = [shlex.split(line) for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    for step in _steps(cpu):
        assert any(line[:len(step)] == step for line in ci), f".ci/run does not run {shlex.join(step)!r}"
    assert _steps(cpu)[-1] == ["python3", "-m", "pytest", "tests"]


# --- generated pages --------------------------------------------------------------------------------------

def _options_tool() -> ModuleType:
    tool = ROOT / "tools" / "generators" / "options_reference.py"
    spec = importlib.util.spec_from_file_location("options_reference", tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_options_reference_is_generated_from_the_real_options() -> None:
    tool = _options_tool()
    text = tool.page()
    assert (ROOT / "docs" / "options.md").read_text() == text, "stale: run python tools/generators/options_reference.py"
    for option in ("--update-baselines", "--gate", "--no-flush", "--min-sample-time", "gpuperf_cases", "--version"):
        assert f"`{option}`" in text
    assert "### `python -m gpuperf baseline from-runs`" in text


def test_the_options_check_fails_on_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _options_tool()
    stale = tmp_path / "options.md"
    stale.write_text(tool.page().replace("`--gate`", "`--gait`"))
    monkeypatch.setattr(tool, "PAGE", stale)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0 and tool.main(["--check"]) == 0


#: The gate run evidence/results-h200.md is generated from (the first with the FP8 cases).
RESULTS_PAGE_RUN = "gate-fp8-GPU-4c46d758.json"


def test_the_h200_results_page_is_what_the_readme_command_makes_of_the_committed_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command the page shows, run on the committed results in a copy of the tree, rewrites the page to
    exactly what is committed: no figure on it is typed."""
    (tmp_path / "evidence" / "h200").mkdir(parents=True)
    committed = (ROOT / "evidence" / "results-h200.md").read_text()
    shutil.copy(ROOT / "evidence" / "h200" / RESULTS_PAGE_RUN, tmp_path / "evidence" / "h200" / RESULTS_PAGE_RUN)
    (tmp_path / "evidence" / "results-h200.md").write_text(committed.replace("| ✅ PASS |", "| typed |"))
    images = sorted(f"evidence/h200/{png.name}" for png in (ROOT / "evidence" / "h200").glob("*.png"))
    for image in images:  # readme refuses to link an image that is not there
        shutil.copy(ROOT / image, tmp_path / image)
    monkeypatch.chdir(tmp_path)
    assert main(["readme", f"evidence/h200/{RESULTS_PAGE_RUN}", "--images", *images]) == 0  # the default page
    assert (tmp_path / "evidence" / "results-h200.md").read_text() == committed
