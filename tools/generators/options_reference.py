"""Write docs/options.md from the option spec the pytest plugin and ``python -m gpuperf`` build their options from.

    python tools/generators/options_reference.py            # rewrite docs/options.md
    python tools/generators/options_reference.py --check    # exit 1 when docs/options.md differs from what it would write

The page is never edited by hand: ``tests/test_docs.py`` fails when it is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "options.md"
#: What a value of each type of ``gpuperf.wiring.argtypes`` (or Python's) is, for the value column.
VALUE_TYPES = {"fraction": "fraction in [0, 1)", "positive_fraction": "fraction in (0, 1]", "positive_float": "number > 0", "non_negative_float": "number ≥ 0",
               "positive_int": "integer ≥ 1", "non_negative_int": "integer ≥ 0", "gpu_selection": "`0`, `0,1` or `all`",
               "flush_modes": "`cold`, `hot` or `cold,hot`", "float": "number", "int": "integer"}


def _cell(text: object) -> str:
    return " ".join(str(text).replace("%%", "%").replace("|", "\\|").replace("<", "\\<").split())


def _value(action: str | None, type_: Any, choices: Any, metavar: str | None) -> str:
    if action in ("store_true", "store_false", "version", "help"):
        return "flag"
    if choices:
        return ", ".join(f"`{choice}`" for choice in choices)
    if getattr(type_, "most", None) is not None:  # a bounded type (argtypes.AtMost): its type and its bound
        return f"{_value(None, type_.parse, None, metavar)}, at most {type_.most:g}"
    name = getattr(type_, "__name__", None)
    if name in VALUE_TYPES:
        return VALUE_TYPES[name]
    return f"`{metavar}`" if metavar else "text"


def _default(default: Any) -> str:
    if default in (None, False, [], argparse.SUPPRESS):
        return "–"
    from gpuperf.wiring.options import shown

    return f"`{shown(default)}`"


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    lines = ["| option | value | default | what it does |", "| --- | --- | --- | --- |"]
    return lines + [f"| {name} | {value} | {default} | {_cell(text)} |" for name, value, default, text in rows]


def pytest_section() -> list[str]:
    from gpuperf.wiring.options import INI_KEYS, PYTEST_OPTIONS

    rows = [(", ".join(f"`{name}`" for name in option.flags),
             _value(option.action, option.type, option.choices, None),
             _default(option.default), option.help_text) for option in PYTEST_OPTIONS]
    lines = ["## pytest options", "", "`pytest --help` lists them under \"gpuperf\". A bad value fails at start-up "
             "with a message naming it.", "", *_table(rows), "", "## pytest ini keys", "",
             "Set in the project's `pytest.ini` (`[pytest]`) or `pyproject.toml` (`[tool.pytest.ini_options]`); "
             "paths are relative to the rootdir.", "", "| key | default | what it does |", "| --- | --- | --- |"]
    lines += [f"| `{key.name}` | {_default(key.default)} | {_cell(key.help_text)} |" for key in INI_KEYS]
    return lines


def _commands(parser: argparse.ArgumentParser, prefix: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


def _arguments(parser: argparse.ArgumentParser) -> list[tuple[str, str, str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(f"`{option}`" for option in action.option_strings)
            flag = isinstance(action, (argparse._StoreTrueAction, argparse._VersionAction))
            if isinstance(action.metavar, tuple):
                value = " ".join(f"`{part}`" for part in action.metavar)
            else:
                value = _value("store_true" if flag else None, action.type, action.choices,
                               action.metavar or action.dest.upper())
        else:
            name, value = f"`{action.metavar or action.dest}`" + (" …" if action.nargs in ("+", "*") else ""), "–"
        rows.append((name, value, _default(action.default), action.help or ""))
    return rows


def cli_section() -> list[str]:
    from gpuperf.cli import build_parser

    parser = build_parser()
    parser.prog = "python -m gpuperf"
    lines = ["## `python -m gpuperf`", "", "Also installed as the `gpuperf` command. Each command exits 0 on success "
             "and 1 on an error, printing one line that names the cause and the fix (2 for a malformed command "
             "line); `compare` also exits 1 when a case fails as it would fail its test.", "",
             *_table(_arguments(parser))]
    for name, sub in _commands(parser, "python -m gpuperf"):
        if any(isinstance(action, argparse._SubParsersAction) for action in sub._actions):
            continue  # a group of commands (``baseline``): its commands have their own sections
        lines += ["", f"### `{name}`", ""]
        if sub.description:
            lines += [_cell(sub.description), ""]
        lines += _table(_arguments(sub))
    return lines


def page() -> str:
    lines = ["# Options reference", "",
             "Generated by `python tools/generators/options_reference.py` from the option spec (`gpuperf/wiring/options.py`), "
             "which the pytest plugin and the command line (`gpuperf/cli.py` and the commands of `gpuperf/commands/`) build their "
             "options from; "
             "`tests/test_docs.py` fails when this page is stale. Do not edit it by hand.", "",
             *pytest_section(), "", *cli_section()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale; write nothing")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        if PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python tools/generators/options_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"{PAGE.relative_to(ROOT)} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
