"""The option spec: one declaration per option, each default written once in the source, help texts formatted
from the value; and the plugin and the CLI really build their options from it."""

from __future__ import annotations

import argparse
import ast
import functools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

from gpuperf.cli import build_parser
from gpuperf.measure.measurement import DEFAULT_WARMUP_CALLS
from gpuperf.measure.stats import StoppingRule
from gpuperf.verdict.gate_config import DEFAULT_TOLERANCE, GateConfig
from gpuperf.wiring import options as spec
from gpuperf.wiring.options import GATE_OPTIONS, PYTEST_OPTIONS, Option, shown

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "gpuperf" / "wiring" / "options.py"
SOURCES = sorted((ROOT / "gpuperf").rglob("*.py"))
DECLARING = {"Option", "add_argument", "addoption"}
#: Defaults that say "nothing": they are written wherever an option has none.
NO_DEFAULT = (None, False, True, "", 0, 0.0)


def spec_options() -> list[Option]:
    return [value for value in vars(spec).values() if isinstance(value, Option)] + list(PYTEST_OPTIONS)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def _where(path: Path, node: ast.AST) -> str:
    return f"{_shown(path)}:{getattr(node, 'lineno', 0)}"


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.AST:
    """A source's syntax tree, parsed once for every test that reads it (only read, never changed)."""
    return ast.parse(path.read_text(), str(path))


def _parsed(paths: Iterable[Path]) -> Iterator[tuple[Path, ast.AST]]:
    for path in paths:
        yield path, _tree(path)


def _same(node: ast.AST | None, value: Any) -> bool:
    """A literal of exactly this value (``True`` is no ``1``, ``3`` is ``3.0``)."""
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool) != isinstance(value, bool):
        return False
    return bool(type(node.value) in (int, float) and type(value) in (int, float) or type(node.value) is type(value)) \
        and node.value == value


def _target_name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _call_name(node: ast.Call) -> str:
    return _target_name(node.func)


def _flag_dests(node: ast.Call) -> set[str]:
    return {arg.value.lstrip("-").replace("-", "_") for arg in node.args
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str)}


def literal_bindings(trees: Iterable[tuple[Path, ast.AST]]) -> list[tuple[set[str], ast.expr, str]]:
    """Every literal bound to a name: a constant, a (dataclass) field, a keyword argument, a parameter's default,
    or an option's ``default=`` (bound to the option's dest); each as (the names, the literal, where)."""
    found: list[tuple[set[str], ast.expr, str]] = []
    for path, tree in trees:
        shown = _shown(path)
        for node in ast.walk(tree):
            where = f"{shown}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.AnnAssign) and node.value is not None:
                found.append(({_target_name(node.target)}, node.value, where))
            elif isinstance(node, ast.Assign):
                found.append(({_target_name(target) for target in node.targets}, node.value, where))
            elif isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "default" and _call_name(node) in DECLARING:
                        found.append((_flag_dests(node), keyword.value, where))
                    elif keyword.arg:
                        found.append(({keyword.arg}, keyword.value, where))
            elif isinstance(node, ast.arguments):
                positional = node.posonlyargs + node.args
                pairs = list(zip(positional[len(positional) - len(node.defaults):], node.defaults))
                pairs += [(arg, default) for arg, default in zip(node.kwonlyargs, node.kw_defaults) if default]
                found += [({arg.arg}, default, where) for arg, default in pairs]
    return [(names, value, where) for names, value, where in found if isinstance(value, ast.Constant)]


@functools.lru_cache(maxsize=None)
def _bindings_of(path: Path) -> list[tuple[set[str], ast.expr, str]]:
    return literal_bindings([(path, _tree(path))])


def _spec_default_expressions() -> dict[str, ast.expr]:
    """Each ``Option(...)`` of options.py by its first flag → the expression its default is written as."""
    tree = ast.parse(SPEC.read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) == "Option":
            flag = node.args[0].elts[0] if isinstance(node.args[0], ast.Tuple) else node.args[0]
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if isinstance(flag, ast.Constant) and default is not None:
                found[str(flag.value)] = default
    return found


def names_of(option: Option, default: ast.expr | None) -> set[str]:
    """The names a default of ``option`` goes by: its dest, the name its home gives it (``StoppingRule.min_samples``
    → ``min_samples``) and that name as a field (``DEFAULT_WARMUP_CALLS`` → ``warmup_calls``)."""
    names = {option.dest}
    home = _target_name(default) if default is not None else ""
    if home:
        names |= {home, home.lower().removeprefix("default_")}
    return names


def duplicated_defaults(paths: Iterable[Path], options: Iterable[Option]) -> dict[str, list[str]]:
    """Per option whose default is written more than once as a literal: where."""
    bindings = [binding for path in paths for binding in _bindings_of(path)]
    expressions = _spec_default_expressions()
    twice = {}
    for option in options:
        if option.default in NO_DEFAULT or option.default is argparse.SUPPRESS:
            continue
        names = names_of(option, expressions.get(option.flags[0]))
        places = [where for bound, literal, where in bindings if bound & names and _same(literal, option.default)]
        if len(places) > 1:
            twice[option.flags[0]] = places
    return twice


def help_with_written_default(option: Option) -> bool:
    """A help text that writes its default out instead of formatting it from the value."""
    return option.default not in NO_DEFAULT and f"default {shown(option.default)}" in option.help


def literal_defaults_in_help(trees: Iterable[tuple[Path, ast.AST]]) -> list[str]:
    """``add_argument``/``addoption``/``Option`` calls whose help text (its literal parts) writes out the
    literal default the same call gives."""
    found = []
    for path, tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or _call_name(node) not in DECLARING:
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            default, text = keywords.get("default"), keywords.get("help")
            if not isinstance(default, ast.Constant) or default.value in NO_DEFAULT or text is None:
                continue
            literal = " ".join(n.value for n in ast.walk(text) if isinstance(n, ast.Constant) and isinstance(n.value, str))
            if f"default {shown(default.value)}" in literal or f"default {default.value}" in literal:
                found.append(_where(path, node))
    return found


# --- the checks, on the real source ---------------------------------------------------------------------------


@pytest.mark.long
def test_no_option_default_is_written_twice() -> None:
    assert duplicated_defaults(SOURCES, spec_options()) == {}


def test_the_spec_writes_no_default_of_its_own() -> None:
    """options.py names each default's home; a literal there would be a second home beside the code's."""
    literals = {flag: ast.unparse(expression) for flag, expression in _spec_default_expressions().items()
                if isinstance(expression, ast.Constant)}
    assert literals == {}


def test_help_texts_are_formatted_from_the_defaults() -> None:
    assert [option.flags[0] for option in spec_options() if help_with_written_default(option)] == []
    assert literal_defaults_in_help(_parsed(SOURCES)) == []
    tolerance = next(option for option in PYTEST_OPTIONS if option.flags == ("--tolerance",))
    assert f"(default {DEFAULT_TOLERANCE:g})" in tolerance.help_text


def test_the_defaults_are_the_values_the_measuring_and_gate_code_keep() -> None:
    by_flag = {option.flags[0]: option.default for option in PYTEST_OPTIONS}
    assert by_flag["--tolerance"] == GateConfig().tolerance
    assert by_flag["--noise-k"] == GateConfig().noise_k
    assert by_flag["--min-samples"] == StoppingRule().min_samples
    assert by_flag["--case-timeout"] == StoppingRule().timeout_s
    assert by_flag["--band-fraction"] == StoppingRule().band_fraction
    assert by_flag["--max-gpu-time"] == StoppingRule().max_gpu_s
    assert by_flag["--warmup"] == DEFAULT_WARMUP_CALLS


# --- the checks can fail ---------------------------------------------------------------------------------------


def test_a_default_written_a_second_time_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "gpuperf" / "copy.py"
    copy.parent.mkdir()
    copy.write_text("from dataclasses import dataclass\n\n@dataclass\nclass Settings:\n"
                    f"    warmup_calls: int = {DEFAULT_WARMUP_CALLS}\n"
                    "def add(addoption):\n"
                    f"    addoption('--min-samples', type=int, default={StoppingRule().min_samples})\n"
                    f"def judge(tolerance: float = {DEFAULT_TOLERANCE}) -> None: ...\n")
    twice = duplicated_defaults([*SOURCES, copy], spec_options())
    assert set(twice) == {"--warmup", "--min-samples", "--tolerance"}
    assert all(any(place.startswith(f"{copy}:") for place in places) for places in twice.values())


def test_a_help_text_that_writes_its_default_is_found(tmp_path: Path) -> None:
    assert help_with_written_default(Option(("--warmup",), help="warm-up calls (default 3)", default=3))
    assert not help_with_written_default(Option(("--warmup",), help="warm-up calls (default {default})", default=3))
    source = tmp_path / "cli_x.py"
    source.write_text("def add(p):\n    p.add_argument('--threshold', type=float, default=5.0,\n"
                      "                   help='count changes beyond it (default 5)')\n")
    assert literal_defaults_in_help(_parsed([source])) == [f"{source}:2"]


# --- one declaration, used by both front ends ------------------------------------------------------------------


def _cli_option(path: tuple[str, ...], flag: str) -> argparse.Action:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return next(action for action in parser._actions if flag in action.option_strings)


@pytest.mark.parametrize("option", GATE_OPTIONS, ids=lambda option: option.flags[0])
def test_the_gate_options_of_compare_are_the_plugins(option: Option, pytester: pytest.Pytester) -> None:
    action = _cli_option(("compare",), option.flags[0])
    assert (action.default, action.help, action.type) == (option.default, option.help_text, option.type)
    config = pytester.parseconfig("-p", "gpuperf.wiring.plugin")
    assert config.getoption(option.dest) == option.default


def test_compare_and_the_plugin_resolve_the_same_gate(pytester: pytest.Pytester) -> None:
    args = build_parser().parse_args(["compare", "a", "b", "--tolerance", "0.05", "--noise-k", "3"])
    from gpuperf.wiring.options import gate_config

    config = pytester.parseconfig("-p", "gpuperf.wiring.plugin", "--tolerance", "0.05", "--noise-k", "3")
    assert gate_config(vars(args)) == gate_config(config.getoption) == GateConfig(tolerance=0.05, noise_k=3.0)
