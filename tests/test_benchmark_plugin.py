"""pytest-benchmark behaves alike wherever gpuperf is installed: deferred when gpuperf's entry point loads first (a
checkout run with ``python -m pytest``), taken out again when its own loads first (a user's virtual environment,
plain ``pytest``), kept when the command line asks for it; ``--benchmark-json`` under xdist is refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuperf.wiring import benchmark_plugin

pytest_plugins = ["pytester"]


def _loaded_first(args: list[str]) -> pytest.PytestPluginManager:
    """A plugin manager where pytest-benchmark's entry point loaded before gpuperf's, after gpuperf's hooks ran."""
    plugin = pytest.importorskip("pytest_benchmark.plugin", reason="pytest-benchmark is a dependency of gpuperf")
    manager = pytest.PytestPluginManager()
    manager.register(plugin, benchmark_plugin.BENCHMARK)
    benchmark_plugin.pytest_addhooks(manager)
    benchmark_plugin.pytest_load_initial_conftests(SimpleNamespace(pluginmanager=manager), args)  # type: ignore[arg-type]
    return manager


def test_loaded_first_it_is_taken_out_unless_asked_for() -> None:
    plain = _loaded_first(["perf_tests"])
    assert plain.get_plugin(benchmark_plugin.BENCHMARK) is None and plain.is_blocked(benchmark_plugin.BENCHMARK)
    assert plain.get_plugin("gpuperf-benchmark-not-loaded") is not None  # its fixture fails naming the fix
    for asked in (["--benchmark-json=b.json"], ["-p", "benchmark"], ["-pbenchmark"]):
        kept = _loaded_first(["perf_tests", *asked])
        assert kept.get_plugin(benchmark_plugin.BENCHMARK) is not None, asked


def test_benchmark_json_under_xdist_is_a_usage_error_not_an_empty_file(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is not installed: pip install -e '.[test]'")
    pytester.makeconftest('pytest_plugins = ["gpuperf.wiring.plugin"]\n')
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2", "--benchmark-json", "b.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gpuperf: --benchmark-json writes nothing under pytest-xdist (-n/--dist)*"])
    # pytest-benchmark's option opens the file as it is parsed: it stays empty, no run's JSON in it
    assert not (pytester.path / "b.json").exists() or (pytester.path / "b.json").stat().st_size == 0
