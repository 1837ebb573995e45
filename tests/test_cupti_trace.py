"""cupti_trace without a GPU: the fallback reasons, and the tracer's record keeping through a stand-in ``cupti``
module that behaves like cupti-python's activity API (callbacks registered once, buffers delivered on flush)."""

from __future__ import annotations

import sys
import types
from importlib import metadata
from typing import Any

import pytest

from gpuperf.install.command import cuda_extra_command

from gpuperf.measure import cupti_trace
from gpuperf.measure.kernel_records import KernelActivity

CONCURRENT_KERNEL = 10


def fake_record(name: str, start: int, end: int, kind: int = CONCURRENT_KERNEL) -> Any:
    return types.SimpleNamespace(kind=kind, name=name, start=start, end=end, grid_x=64, grid_y=1, grid_z=1,
                                 block_x=128, block_y=1, block_z=1, cluster_x=0, cluster_y=0, cluster_z=0,
                                 registers_per_thread=40, static_shared_memory=1024, dynamic_shared_memory=512,
                                 stream_id=7)


class FakeCupti:
    """The slice of cupti-python's API the tracer uses; ``pending`` is what the next flush delivers."""

    class ActivityKind:
        CONCURRENT_KERNEL = CONCURRENT_KERNEL

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.enabled = False
        self.pending: list[Any] = []
        self.completed: Any = None

    def activity_register_callbacks(self, requested: Any, completed: Any) -> None:
        assert requested() == (cupti_trace.BUFFER_BYTES, 0)
        self.completed = completed

    def activity_enable(self, kind: int) -> None:
        if self.refuse:
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        self.enabled = True

    def activity_disable(self, kind: int) -> None:
        self.enabled = False

    def activity_flush_all(self, flag: int) -> None:
        records, self.pending = self.pending, []
        self.completed(records)


@pytest.fixture
def fake_cupti(monkeypatch: pytest.MonkeyPatch) -> FakeCupti:
    fake = FakeCupti()
    monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=fake))
    monkeypatch.setattr(metadata, "version", lambda name: "13.4.0")
    return fake


def test_without_cupti_python_the_run_says_why_and_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti raises ImportError
    tracer, reason = cupti_trace.open_tracer.__wrapped__()
    assert tracer is None
    assert "cupti-python is not installed" in reason and cuda_extra_command() in reason


def test_a_cupti_that_refuses_to_trace_is_a_reason_not_a_crash(fake_cupti: FakeCupti) -> None:
    fake_cupti.refuse = True
    tracer, reason = cupti_trace.open_tracer.__wrapped__()
    assert tracer is None and "CUPTI refused to trace" in reason and "another profiler" in reason


def test_the_run_header_names_the_timer(fake_cupti: FakeCupti, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cupti_trace, "open_tracer", cupti_trace.open_tracer.__wrapped__)
    assert cupti_trace.timer_description() == ("CUPTI kernel records (cupti-python 13.4.0); CUDA events as the "
                                               "cross-check")
    fake_cupti.refuse = True
    assert cupti_trace.timer_description().startswith("CUDA events only: CUPTI refused to trace")


def test_the_tracer_keeps_kernel_records_only_while_started(fake_cupti: FakeCupti) -> None:
    tracer = cupti_trace.KernelTracer()
    assert not fake_cupti.enabled  # probed at start-up, then off: the event-timed phase runs untraced
    fake_cupti.pending = [fake_record("before", 0, 1)]
    fake_cupti.activity_flush_all(1)
    tracer.start()
    assert fake_cupti.enabled
    fake_cupti.pending = [fake_record("gemv2T_kernel_val", 100, 6300), fake_record("memcpy", 1, 2, kind=1)]
    assert tracer.collect() == [KernelActivity("gemv2T_kernel_val", 100, 6300, grid=(64, 1, 1), block=(128, 1, 1),
                                               cluster=(0, 0, 0), registers=40, shared_memory=1536, stream=7)]
    assert tracer.collect() == []
    tracer.stop()
    assert not fake_cupti.enabled
    fake_cupti.pending = [fake_record("after", 0, 1)]
    fake_cupti.activity_flush_all(1)
    assert tracer.collect() == []
