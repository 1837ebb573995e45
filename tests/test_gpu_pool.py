"""``GpuPool``'s per-device objects, with a stand-in ``cupy`` (no GPU): the measuring stream is made once per
device and every later test gets that same stream (a new stream per test changed short multi-kernel calls'
figures by 6 % on the H200, depending on how many tests had run before)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from gpuperf.wiring.fixtures import GpuPool

pytest_plugins = ["pytester"]


class _Stream:
    made: list[_Stream] = []

    def __init__(self, non_blocking: bool = False) -> None:
        self.non_blocking = non_blocking
        self.device = _Device.current
        _Stream.made.append(self)


class _Device:
    current: int | None = None

    def __init__(self, index: int) -> None:
        self.index = index

    def __enter__(self) -> _Device:
        _Device.current = self.index
        return self

    def __exit__(self, *exc: Any) -> None:
        _Device.current = None


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> list[_Stream]:
    _Stream.made = []
    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(Stream=_Stream)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)
    return _Stream.made


def _context(index: int) -> Any:
    return types.SimpleNamespace(index=index, device=_Device(index))


def test_one_stream_per_device_for_the_whole_run(fake_cupy: list[_Stream]) -> None:
    pool = GpuPool()
    first = pool.stream(_context(0))
    assert all(pool.stream(_context(0)) is first for _ in range(5))
    assert len(fake_cupy) == 1
    assert first.non_blocking, "the measuring stream must not synchronize with the legacy default stream"
    assert first.device == 0, "the stream belongs to the device it measures"


def test_each_device_has_its_own_stream(fake_cupy: list[_Stream]) -> None:
    pool = GpuPool()
    zero, one = pool.stream(_context(0)), pool.stream(_context(1))
    assert zero is not one
    assert (zero.device, one.device) == (0, 1)
    assert pool.stream(_context(1)) is one and len(fake_cupy) == 2


def test_no_stream_is_made_before_a_test_asks(fake_cupy: list[_Stream]) -> None:
    pool = GpuPool()
    assert fake_cupy == [] and pool.streams == {}


STREAM_CONFTEST = '''
import sys
import types

import pytest

from gpuperf.wiring.fixtures import GpuPool
from gpuperf.wiring.plugin import POOL

pytest_plugins = ["gpuperf.wiring.plugin"]


class Stream:
    made = []

    def __init__(self, non_blocking=False):
        self.non_blocking = non_blocking
        self.synchronized = 0
        Stream.made.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def synchronize(self):
        self.synchronized += 1


class Device:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


cupy = types.ModuleType("cupy")
cupy.cuda = types.SimpleNamespace(Stream=Stream)
sys.modules["cupy"] = cupy


class Pool(GpuPool):
    """The real per-device cache, on one stand-in device."""

    def devices(self):
        return [(0, "Fake GPU")]


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.stash[POOL] = Pool()


@pytest.fixture
def gpu():
    return types.SimpleNamespace(index=0, device=Device())
'''

STREAM_TESTS = '''
import cupy

seen = []


def test_first(stream):
    seen.append(stream)


def test_second(stream):
    seen.append(stream)


def test_third(stream):
    seen.append(stream)
    assert seen[0] is seen[1] is seen[2], "every test must get the same measuring stream"
    assert len(cupy.cuda.Stream.made) == 1 and seen[0].non_blocking
    assert seen[0].synchronized == 2, "the stream is drained after each test"
'''


@pytest.mark.long
def test_every_test_runs_on_the_one_measuring_stream(pytester: pytest.Pytester) -> None:
    """Through pytest: the plugin's ``stream`` fixture hands three tests the same stream, made once by the pool
    and drained after each test."""
    pytester.makeconftest(STREAM_CONFTEST)
    pytester.makepyfile(test_streams=STREAM_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)
