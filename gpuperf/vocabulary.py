"""The suite's vocabulary: every name that a case, a record, a baseline or a report uses, in one place.

A precision, a flush mode, a status, a family, a metric or a marker is spelled here once; every other
module imports it, so a new one is added in one line and a typo is an ``AttributeError``, not a silent
mismatch between two modules. Plain string constants (like the values they stand for), so records stay
plain data in JSON, YAML and test ids.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations


class Precision:
    """The math path a case runs: which peak applies. ``TF32`` is FP32 storage computed on TF32 tensor cores;
    ``FP8`` is either 8-bit float format (``FP8_FORMATS``: E4M3, E5M2, which run at one rate) on FP8 tensor cores;
    ``INT8`` is 8-bit integers on integer tensor cores (its "TFLOPS" are tera-operations, a multiply-add counted
    as two, as for the others)."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP64 = "fp64"
    FP8 = "fp8"
    INT8 = "int8"

    ALL: tuple[str, ...] = (FP32, TF32, FP16, BF16, FP64, FP8, INT8)
    #: The storage formats of FP8 (a dtype named ``fp8_e4m3`` or ``fp8_e5m2`` is counted as ``fp8``).
    FP8_FORMATS: tuple[str, ...] = ("fp8_e4m3", "fp8_e5m2")
    #: Bytes per stored element (TF32 is stored as FP32).
    ELEMENT_BYTES: dict[str, int] = {FP32: 4, TF32: 4, FP16: 2, BF16: 2, FP64: 8, FP8: 1, INT8: 1,
                                     **{name: 1 for name in FP8_FORMATS}}

    @classmethod
    def of(cls, dtype: str) -> str:
        """The precision (the peak that applies) of a dtype name: an FP8 format is ``fp8``, others are themselves."""
        return cls.FP8 if dtype in cls.FP8_FORMATS else dtype


class Flush:
    """How the L2 stands before a timed call: ``cold`` (evicted, the default) or ``hot`` (warm, back to back)."""

    COLD = "cold"
    HOT = "hot"

    MODES: tuple[str, ...] = (COLD, HOT)


class Basis:
    """Which figure a verdict compares (and the stopping rule makes precise)."""

    TIME = "time"  # the measured figure: time per call
    CYCLES = "cycles"  # the figure at max clock: cycles per call, the host's clock taken out


class Status:
    """The outcome of one case."""

    PASS = "PASS"
    IMPROVED = "IMPROVED"  # faster than baseline beyond tolerance: passes unless --strict-baselines
    REGRESSED = "REGRESSED"  # slower than baseline beyond tolerance, confirmed by a re-measurement
    ANOMALY = "ANOMALY"  # a number the hardware cannot produce, or a named cross-check failed
    ERROR = "ERROR"  # the figure is not a positive finite number: no verdict is possible
    NO_BASELINE = "NO_BASELINE"
    UNRELIABLE = "UNRELIABLE"  # measured while throttled, shared or too noisy: neither passed nor failed
    NOT_COMPARABLE = "NOT_COMPARABLE"  # measured, but not as its baseline was (another metric or method)
    UPDATED = "UPDATED"  # --update-baselines recorded it
    NOT_RECORDED = "NOT_RECORDED"  # --update-baselines measured it, but did not record it (the note says why)
    DRY_RUN = "DRY_RUN"  # --dry-run: the test and its checks ran without a GPU, its entry was found; no figure

    FAILING = frozenset({REGRESSED, ANOMALY, ERROR})
    #: Figures that say more about the machine or the measurement than about the kernel: a history's series
    #: leaves them out.
    UNJUDGED = frozenset({ERROR, UNRELIABLE, ANOMALY})


class Metric:
    """The gated figure of a case, and the unit each is stored with."""

    TFLOPS = "TFLOPS"  # compute-bound cases
    GBPS = "GB/s"  # memory-bound (GEMV-class) cases
    RATIO = "ratio"  # one measurement over another (custom ÷ cuBLAS)

    UNITS: dict[str, str] = {TFLOPS: "TFLOPS", GBPS: "GB/s", RATIO: "×"}


class Family:
    """Which group of the suite a case belongs to: its marker, and its section in tables and plots."""

    GEMM = "gemm"
    GEMV = "gemv"
    BATCHED = "batched"
    CUSTOM = "custom"
    CROSSCHECK = "crosscheck"
    OTHER = "other"

    #: The family of a test is its most specific family marker.
    MOST_SPECIFIC_FIRST: tuple[str, ...] = (CROSSCHECK, CUSTOM, BATCHED, GEMV, GEMM)


#: Every marker the suite uses, with its meaning (registered by the plugin; ``pytest --markers`` lists them).
MARKERS: dict[str, str] = {
    Family.GEMM: "cuBLAS or custom matrix-matrix products",
    Family.GEMV: "matrix-vector products (bandwidth-bound)",
    Family.BATCHED: "batched GEMM / GEMV",
    Family.CUSTOM: "custom CUDA kernels from kernels/cuda",
    Family.CROSSCHECK: "cross-checks between two measurements (TF32 active, sgemm vs gemmEx, flush effective)",
    "cublas": "cases that call cuBLAS",
    "cublaslt": "cases that use cuBLASLt through nvmath-python",
    "trigger": "cases built to make an anomaly rule fire (run with -m trigger)",
    "correctness": "numerical checks against a float64 reference",
    "perf": "performance cases gated against the GPU's baseline",
    "slow": "long cases kept out of the default run (run with --run-slow or -m slow)",
    "builds": "every build of the custom kernels' catalogues against cuBLAS (run with -m builds)",
}
#: Markers whose cases run only when ``-m`` names them: never part of the default selection.
OPT_IN_MARKERS: tuple[str, ...] = ("trigger", "builds")


#: A test's checks after its first are keyed ``<key>@2``, ``@3``, … (``check_key``): in the baseline, the gate, the
#: results, the history and an A/B run alike.
CHECK_SEPARATOR = "@"


def check_key(key: str, occurrence: int) -> str:
    """The key of a test's ``occurrence``-th check (from 1) of ``key`` (its case id, or ``<case id>#<ratio>``)."""
    return key if occurrence == 1 else f"{key}{CHECK_SEPARATOR}{occurrence}"


def case_of_key(key: str) -> str:
    """The case id (the test) that owns the entry ``key``: without its ``#<ratio>`` and its ``@<n>``."""
    head, separator, occurrence = key.rpartition(CHECK_SEPARATOR)
    if separator and occurrence.isdigit() and not occurrence.startswith("0"):
        key = head
    return key.split("#", 1)[0]
