"""What the fuzz suites share: Hypothesis profiles, seed documents cut from the committed files, the mutations
applied to them, and the time and memory bound every example is held to.

The number of examples per target is the Hypothesis profile's (tests/conftest.py): ``fast`` in the README's
test command, ``long`` in CI's long tier, and by hand:
``python3 -m pytest -s tests/test_fuzz_loaders.py tests/test_fuzz_cli.py --hypothesis-profile=long``.

The seeds are the committed files themselves, cut to a few entries so that an example costs milliseconds:
the H200 baseline (re-sealed over its first entries), a fleet run (its first records) and every case table.
"""

from __future__ import annotations

import functools
import json
import resource
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from gpuperf.store.baseline import dump_baseline, load_baseline

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "baselines" / "nvidia-h200.yaml"
FLEET_RUNS = sorted((REPO / "evidence" / "fleet").rglob("*.json"))
CASE_TABLES = sorted((REPO / "perf_tests" / "cases").glob("*.yaml"))

#: The bound on refusing (or accepting) one input: the targets of the hostile-input work.
MAX_SECONDS = 5.0
MAX_BYTES = 1 << 30


@functools.lru_cache(maxsize=None)  # two fuzzing modules seed from it at import: the 160-entry file read once
def seed_baseline_text(entries: int = 4) -> str:
    baseline = load_baseline(BASELINE)
    assert baseline is not None
    kept = dict(list(sorted(baseline.entries.items()))[:entries])
    return dump_baseline(baseline.header, kept)


def seed_results_text(path: Path = FLEET_RUNS[0], records: int = 4) -> str:
    data = json.loads(path.read_text())
    data["records"] = data["records"][:records]
    return json.dumps(data, indent=2) + "\n"


# --- mutations -----------------------------------------------------------------------------------------

HUGE = ["1e999", "-1e999", "9" * 5000, "1" + "0" * 400, "-0", "0", "1e-400", ".nan", ".inf", "NaN", "Infinity",
        "null", "true", '"12.5"', "[]", "{}", "[[[[[[[[[[]]]]]]]]]]"]


def _byte_mutation(data: bytes, draw: st.DrawFn) -> bytes:
    op = draw(st.sampled_from(["truncate", "flip", "duplicate", "insert", "delete"]))
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    if op == "truncate":
        return data[:i]
    if op == "flip":
        return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
    j = draw(st.integers(i, min(len(data), i + 400)))
    if op == "duplicate":
        return data[:j] + data[i:j] * draw(st.integers(1, 3)) + data[j:]
    if op == "insert":
        return data[:i] + draw(st.binary(max_size=40) | st.sampled_from([t.encode() for t in HUGE])) + data[i:]
    return data[:i] + data[j:]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _structural_mutation(data: Any, draw: st.DrawFn) -> Any:
    """One value somewhere in the document swapped for another type, dropped, or a sibling duplicated."""
    paths = [path for path in _paths(data) if path]
    if not paths:
        return draw(JSON_VALUES)
    path = draw(st.sampled_from(paths))
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    op = draw(st.sampled_from(["swap", "drop", "copy"]))
    if op == "swap":
        parent[path[-1]] = draw(JSON_VALUES | st.sampled_from([float("inf"), -1, 0, 10**400]))
    elif op == "drop":
        del parent[path[-1]]
    elif isinstance(parent, list):
        parent.append(parent[path[-1]])
    return data


@st.composite
def mutated_yaml(draw: st.DrawFn, text: str) -> bytes:
    """``text`` mutated as bytes or as a document (a value swapped, dropped or duplicated), or a hostile
    shape of its own: an alias bomb, deep nesting, a duplicated entry."""
    kind = draw(st.sampled_from(["bytes", "structure", "hostile"]))
    if kind == "bytes":
        return _byte_mutation(text.encode(), draw)
    if kind == "structure":
        mutated = _structural_mutation(yaml.safe_load(text), draw)
        return yaml.safe_dump(mutated, sort_keys=False, allow_unicode=True).encode()
    return draw(st.sampled_from(hostile_yaml(text))).encode()


def hostile_yaml(text: str) -> list[str]:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    deep = "entries: " + "[" * 5000 + "]" * 5000 + "\n"
    mapping_bomb = "x:\n" + "".join("  " * depth + f"k{depth}:\n" for depth in range(1, 300))
    lines = text.splitlines(keepends=True)
    doubled = "".join(lines[:len(lines) // 2]) + "".join(lines[len(lines) // 2:]) * 2
    return [bomb, deep, mapping_bomb, doubled, "\ufeff" + text, text + "\n...\n---\nschema: 1\n", "- " * 2000]


@st.composite
def mutated_json(draw: st.DrawFn, text: str) -> bytes:
    kind = draw(st.sampled_from(["bytes", "structure", "hostile"]))
    if kind == "bytes":
        return _byte_mutation(text.encode(), draw)
    if kind == "structure":
        mutated = _structural_mutation(json.loads(text), draw)
        return json.dumps(mutated, allow_nan=True).encode()
    data = json.loads(text)
    records = data["records"]
    hostile = [
        "[" * 100000 + "]" * 100000,
        json.dumps({**data, "records": records + records[:1]}),
        json.dumps({**data, "schema": 99}),
        text.replace('"value": ', '"value": 1e999, "x": ', 1),
        "\ufeff" + text,
        text.encode("utf-16").decode("latin-1"),
        "schema: 1\nheader: {}\nentries: {}\n",
    ]
    return draw(st.sampled_from(hostile)).encode("utf-8", "surrogatepass")


# --- the bound -----------------------------------------------------------------------------------------

#: The slowest example and the largest peak seen in this process, per target, for the report.
WORST: dict[str, tuple[float, int]] = {}


@contextmanager
def bounded(target: str, trace_memory: bool = True) -> Iterator[None]:
    """Hold the block to ``MAX_SECONDS`` of CPU time (wall time would measure the other jobs of a shared CI
    machine) and ``MAX_BYTES`` of memory: Python's allocations when ``trace_memory`` (tracemalloc), else the
    process's peak resident size, for blocks such as matplotlib's rendering that tracemalloc slows tenfold."""
    if trace_memory:
        tracemalloc.start()
    started = time.process_time()
    try:
        yield
    finally:
        elapsed = time.process_time() - started
        if trace_memory:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        seconds, peak_bytes = WORST.get(target, (0.0, 0))
        WORST[target] = (max(seconds, elapsed), max(peak_bytes, peak))
    assert elapsed <= MAX_SECONDS, f"{target}: {elapsed:.1f} s to handle one input"
    assert peak <= MAX_BYTES, f"{target}: {peak / 2**20:.0f} MiB to handle one input"


def only(errors: tuple[type[BaseException], ...], call: Callable[[], object]) -> None:
    """``call`` succeeds or raises one of ``errors`` with a one-line message that names something."""
    try:
        call()
    except errors as exc:
        message = str(exc)
        assert message and "\n" not in message.strip() and "Traceback" not in message, message
        assert len(message) < 2000, f"a {len(message)}-character message"
