"""What each case table in ``perf_tests/cases`` holds, as data: ``gpuperf.suite.cases.load_cases`` checks a table
against its schema, so a typo or a shape of the wrong kind fails at collection, not on the GPU.

A schema is built from:

- a shape kind (``"gemm"``, ``"gemv"``, ``"batched"``, ``"batched_gemv"``): a string such as ``"7x5x3"``,
  loaded as the shape object of that kind (see ``SHAPE_KINDS``);
- ``"value"``: any other YAML value (names, numbers, flags, pairs), kept as loaded;
- ``[item]``: a list whose every element matches ``item``;
- ``{key: schema, ...}``: a mapping that may hold only these keys (each of them optional);
- ``Names(entry)``: a mapping from names the table chooses (path ids, kernel ids) to entries of ``entry``;
- ``Ref(table)``: a name that must be a key of the top-level ``Names`` table ``table`` (``tf33`` where the
  paths are ``tf32``, ... fails at collection instead of in a test).

Every top-level key of a table's schema must be present and not empty (the test module reads each), and
no list may hold the same item twice, nor two groups of a list expand to the same case: pytest would
rename the copies ``…_0``/``…_1`` and so re-key their baseline entries.

A new table needs an entry in ``TABLES``; the test module that reads it shows what each key holds.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

Leaf = Literal["gemm", "gemv", "batched", "batched_gemv", "value"]


@dataclass(frozen=True)
class Names:
    """A mapping whose keys the table chooses (``paths.fp32``, ``kernels.naive``), each holding ``entry``."""

    entry: Schema


@dataclass(frozen=True)
class Ref:
    """A name defined by the top-level ``Names`` table ``table`` (a path id, a kernel id)."""

    table: str


Schema = Union[Leaf, list["Schema"], dict[str, "Schema"], Names, Ref]


@dataclass(frozen=True)
class ShapeKind:
    """How a shape of one kind is written: ``sizes`` positive integers joined by ``x``, like ``example``.

    ``n``, when set, is the one N the kind allows: a batched GEMV is a batched GEMM with N = 1.
    """

    title: str
    pattern: str
    sizes: int
    example: str
    n: int | None = None


#: The shape kinds a schema can name, by name.
SHAPE_KINDS: dict[str, ShapeKind] = {
    "gemm": ShapeKind("GEMM shape", "MxNxK", 3, "4096x4096x4096"),
    "gemv": ShapeKind("GEMV shape", "MxN", 2, "64x65536"),
    "batched": ShapeKind("batched shape", "BxMxNxK", 4, "1024x256x256x256"),
    "batched_gemv": ShapeKind("batched GEMV shape", "Bx<m>x1x<n>", 4, "256x1024x1x1024", n=1),
}

VALUE: Leaf = "value"
VALUES: Schema = [VALUE]

_GEMM_GROUP: Schema = {"paths": [Ref("paths")], "trans": VALUES, "shapes": ["gemm"]}
_GEMV_GROUP: Schema = {"dtypes": VALUES, "ops": VALUES, "shapes": ["gemv"]}
_BATCHED_GEMV_KINDS: Schema = {"strided": ["batched_gemv"], "shared": ["batched_gemv"], "pointers": ["batched_gemv"]}
_VARIABLE_SIZE_CASES: Schema = [{"name": VALUE, "groups": ["batched"]}]

#: One schema per table, by family (the file is ``<family>.yaml``); ``perf_tests/test_<family>.py`` reads it.
TABLES: dict[str, Schema] = {
    "gemm": {
        "paths": Names({"dtype": VALUE, "math_mode": VALUE, "work": VALUE}),
        "correctness": {
            "paths": [Ref("paths")],
            "shapes": ["gemm"],
            "transposes": {"trans": VALUES, "shapes": ["gemm"]},
            "layouts": {"orders": VALUES, "trans": VALUES, "shapes": ["gemm"]},
            "padded": {"pad": VALUE, "orders": VALUES, "trans": VALUES, "shapes": ["gemm"]},
            "scalars": {"values": VALUES, "shapes": ["gemm"]},
            "compute": {"pairs": VALUES, "shapes": ["gemm"]},
        },
        "perf": [_GEMM_GROUP],
        "slow": [_GEMM_GROUP],
    },
    "gemv": {
        "correctness": {
            "all_shapes": {"dtypes": VALUES, "shapes": ["gemv"]},
            "other_dtypes": {"dtypes": VALUES, "shapes": ["gemv"]},
            "padded": {"pad": VALUE, "dtypes": VALUES, "shapes": ["gemv"]},
            "scalars": {"values": VALUES, "dtypes": VALUES, "shapes": ["gemv"]},
            "strided_x": {"shapes": ["gemv"]},
        },
        "perf": [_GEMV_GROUP],
        "acceptance": {"min_pct_of_peak": VALUE, "large_l2_factor": VALUE},
    },
    "batched": {
        # correctness and gemv_correctness name the item's GEMM or GEMV; the test prefixes each batch size.
        "correctness": {
            "batches": VALUES,
            "shapes": ["gemm"],
            "methods": VALUES,
            "scalars": {"values": VALUES, "shapes": ["gemm"]},
            "transposes": {"trans": VALUES, "shapes": ["gemm"]},
        },
        "gemv_correctness": {"batches": VALUES, "shapes": ["gemv"], "methods": VALUES},
        "perf": {"shapes": ["batched"], "methods": VALUES},
        "loop": {"default": ["batched"], "slow": ["batched"]},
        "streams": {"count": VALUE, "shapes": ["batched"]},
        "gemv_perf": _BATCHED_GEMV_KINDS,
        "gemv_perf_slow": _BATCHED_GEMV_KINDS,
        "variable_size": {"correctness": _VARIABLE_SIZE_CASES, "perf": _VARIABLE_SIZE_CASES},
    },
    "custom": {
        "kernels": Names({"planner": VALUE, "tile": VALUE, "dtype": VALUE}),
        "correctness": {
            "kernels": [Ref("kernels")],
            "shapes": ["gemm"],
            "variants": Names({"pad": VALUE, "alpha": VALUE, "beta": VALUE}),
        },
        "batched_correctness": {"shapes": ["batched"], "forms": VALUES, "variants": VALUES},
        "perf": [{"kernel": Ref("kernels"), "shape": "gemm", "slow": VALUE}],
        "batched_perf": ["batched"],
    },
    "custom_builds": {
        "gemm": [{"kernel": VALUE, "shape": "gemm"}],
        "batched": [{"shape": "batched", "tiled": VALUE, "paths": [{"path": VALUE, "mats": VALUE}]}],
    },
    "fp8": {
        "recipes": Names({"a": VALUE, "w": VALUE, "out": VALUE, "scaling": VALUE, "fast_accum": VALUE}),
        "correctness": [{"recipes": [Ref("recipes")], "shapes": ["gemm"]}],
        "refusals": [{"recipe": Ref("recipes"), "shape": "gemm", "rule": VALUE}],
        "perf": [{"recipes": [Ref("recipes")], "shapes": ["gemm"], "vs_bf16": VALUE, "slow": VALUE}],
        "models": Names({"config": VALUE, "tokens": VALUES, "recipes": [Ref("recipes")],
                         "projections": Names({"n": VALUE, "k": VALUE})}),
        "heuristic": [{"recipe": Ref("recipes"), "shape": "gemm", "slow": VALUE}],
    },
    "cublaslt": {
        "perf": [{"dtype": VALUE, "shape": "gemm", "slow": VALUE}],
        "correctness": {"shapes": ["gemm"], "dtypes": VALUES},
    },
}
