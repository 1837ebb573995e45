"""FP8 GEMMs through cuBLASLt, the H200's fastest path: correct against float64, refused by rule, gated on speed.

Correctness: fresh random FP8 bytes and scaling factors per case, the output poisoned with NaN, checked against
the float64 product of the decoded values times their factors with ``gpuperf.suite.accuracy.fp8_tolerance`` (FP8
outputs also through their ``d_scale`` and ``amax``). Every candidate cuBLASLt's heuristic offers is checked, not
only the default. Refusals: a shape the FP8 tensor cores cannot read fails with the rule it breaks, before cuBLASLt
sees it. Performance: recipes and shapes are data, ``perf_tests/cases/fp8.yaml``; FP8 beside BF16 on the projection
GEMMs of a real model, and the FP8/BF16 ratio gated.

nvmath-python and ml_dtypes are optional; without them every case skips with the install command.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from gpuperf.measure.metrics import gemm_work
from gpuperf.suite.accuracy import assert_fp8_gemm_close
from gpuperf.suite.cases import GemmShape, load_cases

CASES = load_cases("fp8")  # before the importorskip: a broken table fails collection with or without CuPy
cupy = pytest.importorskip("cupy", reason="CuPy is not installed: pip install -e '.[cuda13]'")
pytest.importorskip("ml_dtypes", reason="ml_dtypes decodes FP8 values and is not installed: pip install ml_dtypes")
from kernels import cublas, cublaslt, fp8_operands  # noqa: E402  (after the importorskip)
from kernels.cublaslt_fp8 import LtFp8Matmul, measured_call  # noqa: E402
from kernels.fp8_plan import Fp8LayoutError, Fp8Recipe  # noqa: E402
from kernels.operands import nan_operand, random_operand  # noqa: E402

pytestmark = [pytest.mark.gemm, pytest.mark.cublaslt]

RECIPES: dict[str, Fp8Recipe] = {name: Fp8Recipe(**entry) for name, entry in CASES["recipes"].items()}
#: The largest finite value of each FP8 output: ``d_scale`` maps the result's largest magnitude to half of it.
FP8_MAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}


@pytest.fixture(autouse=True)
def _needs_cublaslt() -> None:
    reason = cublaslt.available()
    if reason is not None:
        pytest.skip(reason)


def _correctness_params() -> list[Any]:
    return [pytest.param(recipe, shape, id=f"{recipe}-{shape}")
            for group in CASES["correctness"] for recipe in group["recipes"] for shape in group["shapes"]]


def _perf_params() -> list[Any]:
    return [pytest.param(recipe, shape, group.get("vs_bf16", False), id=f"{recipe}-{shape}",
                         marks=[pytest.mark.slow] if group.get("slow") else [])
            for group in CASES["perf"] for recipe in group["recipes"] for shape in group["shapes"]]


def _operands(rng: np.random.Generator, shape: GemmShape, recipe: Fp8Recipe) -> tuple[Any, Any]:
    a = fp8_operands.random_fp8(rng, shape.m, shape.k, recipe.a, recipe.scaling, "a")
    w = fp8_operands.random_fp8(rng, shape.n, shape.k, recipe.w, recipe.scaling, "w")
    return a, w


def _check_candidate(lt: LtFp8Matmul, rank: int, a: Any, w: Any, a_values: np.ndarray, w_values: np.ndarray) -> None:
    """Run candidate ``rank`` into a NaN-poisoned output and hold all of it (and an FP8 output's amax) to the bound."""
    recipe = lt.recipe
    d_scale = _d_scale(recipe, float(np.abs(a_values @ w_values.T).max()))
    out = fp8_operands.fp8_output(lt.m, lt.n, recipe.out, d_scale=d_scale)
    lt.run(rank, a, w, out)
    amax = float(out.amax.get()[0]) if recipe.fp8_output else None
    try:
        assert_fp8_gemm_close(fp8_operands.decode(out.data, recipe.out), a_values, w_values, out_type=recipe.out,
                              fast_accum=recipe.fast_accum, d_scale=d_scale, amax=amax)
    except AssertionError as exc:
        raise AssertionError(f"cuBLASLt candidate {lt.candidates[rank].label} of {lt!r} is wrong: {exc}") from exc


# --- correctness ---------------------------------------------------------------------------------------

@pytest.mark.correctness
@pytest.mark.parametrize(("recipe_id", "shape"), _correctness_params())
def test_fp8_every_candidate_correct(recipe_id: str, shape: GemmShape, stream: Any, rng: np.random.Generator) -> None:
    recipe = RECIPES[recipe_id]
    a, w = _operands(rng, shape, recipe)
    a_values, w_values = fp8_operands.dequantize(a), fp8_operands.dequantize(w)
    with LtFp8Matmul(shape.m, shape.n, shape.k, recipe) as lt:
        for candidate in lt.candidates:
            _check_candidate(lt, candidate.rank, a, w, a_values, w_values)


@pytest.mark.correctness
@pytest.mark.parametrize("refusal", CASES["refusals"], ids=lambda r: f"{r['recipe']}-{r['shape']}")
def test_fp8_refuses_by_rule(refusal: dict[str, Any], stream: Any) -> None:
    """A shape the FP8 tensor cores cannot read is refused before cuBLASLt sees it, naming the rule."""
    shape: GemmShape = refusal["shape"]
    with pytest.raises(Fp8LayoutError, match=re.escape(refusal["rule"])):
        LtFp8Matmul(shape.m, shape.n, shape.k, RECIPES[refusal["recipe"]])


# --- performance ---------------------------------------------------------------------------------------

def _measure_fp8(measure: Any, lt: LtFp8Matmul, rank: int, a: Any, w: Any, out: Any) -> Any:
    fn, operands = measured_call(lt, rank, a, w, out)
    work = gemm_work(lt.m, lt.n, lt.k, lt.recipe.a, out_dtype=lt.recipe.out)
    return measure(fn, work, operands=operands, label=f"cuBLASLt FP8 {lt.recipe.label} {lt.candidates[rank].label}")


def _measure_bf16(measure: Any, handle: int, rng: np.random.Generator, shape: GemmShape) -> Any:
    """The BF16 GEMM of the same linear layer (weights n×k, cuBLAS gemmEx with COMPUTE_32F)."""
    a = random_operand(rng, (shape.m, shape.k), "bf16")
    w = random_operand(rng, (shape.n, shape.k), "bf16")
    c = nan_operand((shape.m, shape.n), "bf16")

    def run(a: Any, w: Any, c: Any) -> None:
        cublas.gemm(handle, a, w, c, dtype="bf16", trans_b=True)

    return measure(run, gemm_work(shape.m, shape.n, shape.k, "bf16"), operands=(a, w, c), label="cuBLAS bf16 nt")


def _spread(count: int) -> np.ndarray:
    """The first and last 8 indices (edge tiles) and 16 spread between."""
    return np.unique(np.r_[np.arange(min(8, count)), np.arange(max(count - 8, 0), count),
                           np.linspace(0, count - 1, 16).astype(np.int64)])


def _check_perf_shape(lt: LtFp8Matmul, a: Any, w: Any) -> None:
    """The default candidate is right on the perf shape too: edge and spread rows and columns of C against float64
    (decoding the whole of a large operand on the host would take longer than measuring it)."""
    rows, cols = _spread(lt.m), _spread(lt.n)
    recipe = lt.recipe
    a_values, w_values = fp8_operands.dequantize(a, rows), fp8_operands.dequantize(w, cols)
    d_scale = _d_scale(recipe, float(np.abs(a_values @ w_values.T).max()))
    out = fp8_operands.fp8_output(lt.m, lt.n, recipe.out, d_scale=d_scale)
    lt.run(0, a, w, out)
    got = fp8_operands.decode(out.data[cupy.asarray(rows)][:, cupy.asarray(cols)], recipe.out)
    try:
        assert_fp8_gemm_close(got, a_values, w_values, out_type=recipe.out, fast_accum=recipe.fast_accum,
                              d_scale=d_scale)
    except AssertionError as exc:
        raise AssertionError(f"cuBLASLt's default candidate {lt.candidates[0].label} of {lt!r} is wrong: {exc}") from exc


def _d_scale(recipe: Fp8Recipe, largest: float) -> float:
    """An FP8 output's ``d_scale``: the largest |result| lands at half the format's largest value (1 otherwise);
    rounded to FP32, as cuBLASLt reads it."""
    if not recipe.fp8_output:
        return 1.0
    return float(np.float32(FP8_MAX[recipe.out] / 2 / largest))


def _perf_output(lt: LtFp8Matmul) -> Any:
    """The output of a timed call; an FP8 one scaled so that no result can saturate (|A|, |W| < 1, factors < 2)."""
    return fp8_operands.fp8_output(lt.m, lt.n, lt.recipe.out, d_scale=_d_scale(lt.recipe, 4.0 * lt.k))


@pytest.mark.perf
@pytest.mark.parametrize(("recipe_id", "shape", "vs_bf16"), _perf_params())
def test_fp8_perf(recipe_id: str, shape: GemmShape, vs_bf16: bool, cublas_handle: int, rng: np.random.Generator,
                  measure: Any, perf: Any) -> None:
    recipe = RECIPES[recipe_id]
    a, w = _operands(rng, shape, recipe)
    with LtFp8Matmul(shape.m, shape.n, shape.k, recipe) as lt:
        _check_perf_shape(lt, a, w)
        fp8 = _measure_fp8(measure, lt, 0, a, w, _perf_output(lt))
        perf.note(f"cuBLASLt {cublaslt.version()} {recipe.label}, candidate {lt.candidates[0].label}")
        perf.check(fp8)
        if vs_bf16:
            bf16 = _measure_bf16(measure, cublas_handle, rng, shape)
            ratio = perf.check_ratio(fp8, bf16, name="fp8_over_bf16")
            perf.note(f"FP8 {fp8.value:.0f} vs BF16 {bf16.value:.0f} TFLOPS: {ratio.value:.2f}×")


def _projection_params() -> list[Any]:
    params = []
    for model, spec in CASES["models"].items():
        for name, weights in spec["projections"].items():
            for tokens in spec["tokens"]:
                for precision in [*spec["recipes"], "bf16"]:
                    shape = GemmShape(tokens, weights["n"], weights["k"])
                    params.append(pytest.param(precision, shape, id=f"{model}-{name}-t{tokens}-{precision}"))
    return params


@pytest.mark.perf
@pytest.mark.parametrize(("precision", "shape"), _projection_params())
def test_fp8_projection(precision: str, shape: GemmShape, cublas_handle: int, rng: np.random.Generator,
                        measure: Any, perf: Any) -> None:
    """A model's projection GEMM at a token count, in FP8 (a recipe) or BF16: the two rows side by side."""
    if precision == "bf16":
        perf.check(_measure_bf16(measure, cublas_handle, rng, shape))
        return
    recipe = RECIPES[precision]
    a, w = _operands(rng, shape, recipe)
    with LtFp8Matmul(shape.m, shape.n, shape.k, recipe) as lt:
        _check_perf_shape(lt, a, w)
        perf.check(_measure_fp8(measure, lt, 0, a, w, _perf_output(lt)))


@pytest.mark.perf
@pytest.mark.parametrize("entry", [pytest.param(entry, id=f"{entry['recipe']}-{entry['shape']}",
                                                marks=[pytest.mark.slow] if entry.get("slow") else [])
                                   for entry in CASES["heuristic"]])
def test_fp8_heuristic_vs_best(entry: dict[str, Any], stream: Any, rng: np.random.Generator, measure: Any,
                               perf: Any) -> None:
    """Every candidate of cuBLASLt's heuristic timed; the default gated, its gap to the best reported."""
    recipe, shape = RECIPES[entry["recipe"]], entry["shape"]
    a, w = _operands(rng, shape, recipe)
    with LtFp8Matmul(shape.m, shape.n, shape.k, recipe) as lt:
        out = _perf_output(lt)
        timed = []
        for candidate in lt.candidates:
            try:
                timed.append((candidate, _measure_fp8(measure, lt, candidate.rank, a, w, out)))
            except cublaslt.LtError:
                if candidate.rank == 0:
                    raise
        default_candidate, default = timed[0]
        best_candidate, best = max(timed, key=lambda pair: pair[1].value)
        _check_perf_shape(lt, a, w)
        measured = {candidate.rank: measurement.value for candidate, measurement in timed}
        print(cublaslt.format_table([(c, measured.get(c.rank)) for c in lt.candidates],
                                    title=f"cuBLASLt {cublaslt.version()} {shape} {recipe.label}, {default.flush}"))
        perf.note(f"cuBLASLt {len(lt.candidates)} candidates: default {default_candidate.label} {default.value:.1f}, "
                  f"best {best_candidate.label} {best.value:.1f} TFLOPS, default "
                  f"{100 * cublaslt.gap(default.value, best.value):.1f} % behind")
        perf.check(default)

