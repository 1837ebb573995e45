"""Hand gpuperf's measurements to pytest-benchmark, so ``--benchmark-json`` carries the same numbers.

pytest-benchmark times host callables itself; here the samples are already device-timed per call, so they
are fed to the ``benchmark`` fixture's statistics directly (one round per sample, one iteration each) and
the derived figures go to ``extra_info``. Only the first check of a test is exported: pytest-benchmark
keeps one statistics object per test.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Any

from gpuperf.measure.measurement import Measurement
from gpuperf.store.records import Record

#: Record fields copied to ``extra_info`` (the rest of the record stays in results.json).
EXTRA_FIELDS = ("case_id", "metric", "value", "unit", "pct_of_peak", "peak", "tflops", "gbps",
                "arithmetic_intensity", "flops", "bytes", "method", "flush", "calls_per_sample", "baseline",
                "delta_pct", "tolerance", "status", "note", "gpu", "sm_clock_mhz")


class BenchmarkExporter:
    """Feeds one measurement into a pytest-benchmark ``benchmark`` fixture."""

    def __init__(self, fixture: Any) -> None:
        self.fixture = fixture
        self.done = False
        fixture._mode = "gpuperf"  # tells pytest-benchmark the fixture was used (no "unused" warning)

    def __call__(self, measurement: Measurement, record: Record) -> None:
        if self.done:
            return
        self.done = True
        stats = self.fixture._make_stats(1)
        for seconds in measurement.samples_s:
            stats.update(seconds)
        data = record.to_dict()
        self.fixture.extra_info.update({key: data[key] for key in EXTRA_FIELDS})
