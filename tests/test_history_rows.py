"""A run's record rows, made a column at a time (``history_rows.records_values``), are what the columns' rules give
record by record, written out plainly here, whatever the records hold and whichever keys they lack."""

from __future__ import annotations

import json
import math
from itertools import repeat
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from gpuperf.history import rows as history_rows
from gpuperf.history.rows import RECORD_COLUMNS, RECORD_VALUE_COLUMNS, records_columns

VALUES = st.sampled_from([None, 0, 1, -3, 2.5, -0.0, 1e300, float("inf"), float("nan"), True, False, "x", "",
                          [1980, 1965], [1980], [], [1.5, "a"], {"a": 1}]) | st.floats() | st.integers(-10**6, 10**6)
KERNELS = st.none() | st.lists(st.dictionaries(st.sampled_from(["name", "grid", "symbol", "code", "config"]),
                                                st.text(max_size=3) | st.integers(), max_size=3) | st.integers(),
                               max_size=3) \
    | st.text(max_size=3) | st.dictionaries(st.just("name"), st.text(max_size=3), max_size=1)
RECORDS = st.fixed_dictionaries({"case_id": st.text(min_size=1, max_size=5) | st.integers()},
                                optional={**{key: VALUES for key in RECORD_COLUMNS.values() if key != "case_id"},
                                          "kernels": KERNELS, "clock_bound": st.sampled_from([True, False, None, 1]),
                                          "call_clock_mhz": VALUES | st.sampled_from([1400.0, 1975.0]),
                                          "max_clock_mhz": VALUES | st.just(1980)})


def _number(value: Any) -> float | None:
    if isinstance(value, (list, tuple)):
        numbers = [float(item) for item in value if isinstance(item, (int, float)) and not isinstance(item, bool)]
        return sum(numbers) / len(numbers) if numbers else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _reference(record: dict[str, Any], position: int) -> tuple[Any, ...]:
    def text(key: str) -> str | None:
        value = record.get(key)
        return None if value is None else str(value)

    def whole(key: str) -> int | None:
        value = record.get(key)
        if type(value) is int:
            return value
        number = _number(value)
        return None if number is None else int(number)

    kernels = record.get("kernels") or []
    names = " + ".join(str(kernel.get("name", "?")) for kernel in kernels if isinstance(kernel, dict))
    # what the gate tells kernels apart by, where any kernel has more than a name
    listed = [kernel for kernel in kernels if isinstance(kernel, dict)] if isinstance(kernels, list) else []
    identity = None
    if any(kernel.get(key) for kernel in listed for key in ("symbol", "code", "config")):
        identity = json.dumps([[str(kernel.get("name", "?")), *(str(kernel.get(key) or "") for key in
                                                               ("symbol", "code", "config"))] for kernel in listed],
                              separators=(",", ":"), ensure_ascii=False)
    by_column: dict[str, Any] = {
        "case_id": str(record["case_id"]), "kernels": names, "kernel_identity": identity, "position": position,
        **{column: _number(record.get(key)) for column, key in RECORD_COLUMNS.items()
           if column in ("value", "spread", "cycles_per_call", "sm_clock_mhz", "value_at_max_clock", "cycles_spread")},
        **{column: text(key) for column, key in RECORD_COLUMNS.items()
           if column in ("unit", "method", "flush", "status", "note")},
        **{column: whole(key) for column, key in RECORD_COLUMNS.items() if column in ("samples", "gpu_index")},
    }
    # the figure at max clock only of a clock-bound case (exactly True), a positive one; judged on it (basis
    # "cycles") where its calls ran more than 2 % below the max clock
    free = by_column["value_at_max_clock"]
    by_column["value_at_max_clock"] = free if record.get("clock_bound") is True and free and free > 0 else None
    clock, top = _number(record.get("call_clock_mhz")), _number(record.get("max_clock_mhz"))
    moved = bool(clock and top and 1 - clock / top > 0.02)
    by_column["basis"] = "cycles" if by_column["value_at_max_clock"] is not None and moved else "time"
    return (None, *(by_column[column] for column in RECORD_VALUE_COLUMNS[1:-1]))


def records_values(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The rows the history writes of ``records_columns`` (``run_pk`` not yet known)."""
    return list(zip(repeat(None), *records_columns(records)))


def _same(made: tuple[Any, ...], expected: tuple[Any, ...]) -> bool:
    return len(made) == len(expected) and all(
        type(a) is type(b) and (a == b or isinstance(a, float) and math.isnan(a) and math.isnan(b))
        for a, b in zip(made, expected))


@settings(deadline=None)
@given(st.lists(RECORDS, min_size=1, max_size=6))
def test_rows_made_by_columns_are_the_per_record_rules(records: list[dict[str, Any]]) -> None:
    made = records_values(records)
    assert len(made) == len(records)
    for position, (row, record) in enumerate(zip(made, records)):
        assert _same(row, _reference(record, position)), (record, row)
        assert _same(records_values([record])[0][:-1], _reference(record, position)[:-1])  # a record alone


def test_a_run_of_records_holding_every_key_takes_the_same_rows() -> None:
    """Records that all hold the same keys (as a suite writes them) are taken apart by ``itemgetter``."""
    records = [{"case_id": f"case-{index}", "value": 10.0 + index, "rel_iqr": 0.01, "unit": "TFLOPS", "method": "m",
                "flush": "cold", "status": "PASS", "note": "", "samples": 9, "gpu_index": 0, "cycles_per_call": 5e6,
                "sm_clock_mhz": [1980, 1970], "value_at_max_clock": 10.5, "kernels": [{"name": "k"}]}
               for index in range(50)]
    assert all(_same(row, _reference(record, position))
               for position, (row, record) in enumerate(zip(records_values(records), records)))
    assert records_values(records)[3][RECORD_VALUE_COLUMNS.index("sm_clock_mhz")] == 1975.0


@pytest.mark.parametrize(("args", "why"), [
    (["perf_tests", "--gate", "--baseline-dir", "/tmp/x/shifted-baseline"],
     "judged against the baseline in /tmp/x/shifted-baseline (--baseline-dir), not the fleet's"),
    (["perf_tests", "--gate", "--baseline-dir=/tmp/b"],
     "judged against the baseline in /tmp/b (--baseline-dir), not the fleet's"),
    (["perf_tests", "--gate", "-p", "tools.gpu_host.slowdown"], "a planted slowdown (-p tools.gpu_host.slowdown)"),
    (["perf_tests", "--gate", "-ptools.slowdown"], "a planted slowdown (-p tools.slowdown)"),  # as older runs name it
    (["perf_tests", "--gate", "-p", "no:cacheprovider", "--history", "none"], ""),
])
def test_a_run_against_a_baseline_of_its_own_or_with_a_planted_slowdown_is_an_experiment(args: list[str],
                                                                                          why: str) -> None:
    assert history_rows.experiment(json.dumps({"args": args, "gate_mode": True})) == why
    assert history_rows.experiment({"args": args}) == why


def test_a_run_without_arguments_is_no_experiment() -> None:
    assert history_rows.experiment("{}") == history_rows.experiment(None) == history_rows.experiment("[1]") == ""
    assert history_rows.experiment("not json") == ""
