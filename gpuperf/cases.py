"""Case identity: shape types whose ``str()`` is the test-id segment, dtype names, case tables.

Shapes, dtypes and per-family case lists are data (``perf_tests/cases/<family>.yaml``), loaded here so a
test module only names the table it wants.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: Math paths a case can name. ``tf32`` is FP32 storage computed on TF32 tensor cores.
DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp64")

#: Bytes per stored element for each math path (TF32 is stored as FP32).
ELEMENT_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp64": 8}

CASES_DIR = Path(__file__).resolve().parent.parent / "perf_tests" / "cases"


@dataclass(frozen=True, order=True)
class GemmShape:
    """``C[m×n] = A[m×k] · B[k×n]``; its id is ``MxNxK``."""

    m: int
    n: int
    k: int

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True, order=True)
class GemvShape:
    """``y[m] = A[m×n] · x[n]``; its id is ``MxN``."""

    m: int
    n: int

    def __str__(self) -> str:
        return f"{self.m}x{self.n}"


@dataclass(frozen=True, order=True)
class BatchedShape:
    """``batch`` independent ``m×n×k`` products; its id is ``BxMxNxK``."""

    batch: int
    m: int
    n: int
    k: int

    def __str__(self) -> str:
        return f"{self.batch}x{self.m}x{self.n}x{self.k}"

    @property
    def gemm(self) -> GemmShape:
        return GemmShape(self.m, self.n, self.k)


_SHAPE_TYPES = {3: GemmShape, 2: GemvShape, 4: BatchedShape}


class CaseTableError(ValueError):
    """A case table in ``perf_tests/cases`` is malformed."""


def parse_shape(text: str | list[int]) -> GemmShape | GemvShape | BatchedShape:
    """``"4096x4096x4096"`` → ``GemmShape``; ``"64x65536"`` → ``GemvShape``; four numbers → ``BatchedShape``."""
    parts = text if isinstance(text, list) else str(text).lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError as exc:
        raise CaseTableError(f"shape {text!r} is not 'MxN', 'MxNxK' or 'BxMxNxK' with integer sizes") from exc
    if len(dims) not in _SHAPE_TYPES or any(d < 1 for d in dims):
        raise CaseTableError(f"shape {text!r} must have 2, 3 or 4 positive sizes ('MxN', 'MxNxK', 'BxMxNxK')")
    return _SHAPE_TYPES[len(dims)](*dims)


def _convert(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _convert(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_convert(item) for item in value]
    if isinstance(value, str) and "x" in value and value.replace("x", "").isdigit():
        return parse_shape(value)
    return value


def load_cases(family: str, directory: Path = CASES_DIR) -> dict[str, Any]:
    """Load ``<directory>/<family>.yaml``; strings like ``"64x65536"`` become shape objects."""
    path = directory / f"{family}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise CaseTableError(f"{path}: case table not found; create it or fix the family name {family!r}") from exc
    except yaml.YAMLError as exc:
        raise CaseTableError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CaseTableError(f"{path}: expected a mapping of table names to lists, got {type(data).__name__}")
    return _convert(data)
