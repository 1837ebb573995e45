"""Pinning xdist workers to GPUs."""

from __future__ import annotations

import pytest

from gpuperf.wiring.pinning import PinningError, pin, worker_number


def never() -> int:
    raise AssertionError("the device count is only needed for --gpu all without CUDA_VISIBLE_DEVICES")


@pytest.mark.parametrize(("spec", "worker", "expected"), [
    ("0", 0, (0, "0")), ("0", 5, (0, "0")), ("0,1", 0, (0, "0")), ("0,1", 1, (1, "1")), ("0,1", 2, (0, "0")),
    ("1,3", 1, (3, "3")),
])
def test_workers_go_round_robin_over_the_selection(spec: str, worker: int, expected: tuple[int, str]) -> None:
    assert pin(spec, worker, never, None) == expected


def test_all_uses_the_device_count() -> None:
    assert [pin("all", w, lambda: 3, None)[0] for w in range(4)] == [0, 1, 2, 0]


def test_an_existing_cuda_visible_devices_is_honoured() -> None:
    assert pin("1", 0, never, "4,6") == (1, "6")
    assert pin("all", 1, never, "GPU-aaa, GPU-bbb") == (1, "GPU-bbb")
    with pytest.raises(PinningError, match="CUDA_VISIBLE_DEVICES=4,6 shows 2"):
        pin("2", 0, never, "4,6")


def test_worker_ids() -> None:
    assert worker_number("gw12") == 12
    with pytest.raises(PinningError):
        worker_number("master")
