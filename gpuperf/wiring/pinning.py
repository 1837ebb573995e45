"""Which GPU an xdist worker owns, decided before CUDA starts in that worker.

A worker is pinned by ``CUDA_VISIBLE_DEVICES`` (set in ``pytest_configure``, before anything touches CUDA),
not merely by choosing a device index: otherwise CUDA start-up in the worker can leave an idle context on
another GPU, which NVML then reports as a second process there, and the other worker's cases come out
``UNRELIABLE`` (seen on a two-H200 machine).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable


class PinningError(ValueError):
    """The GPU selection cannot be honoured; the message names the fix."""


def worker_number(workerid: str) -> int:
    """``"gw3"`` → 3."""
    digits = workerid[2:] if workerid.startswith("gw") else workerid
    if not digits.isdigit():
        raise PinningError(f"unexpected xdist worker id {workerid!r}")
    return int(digits)


def pin(spec: str, worker: int, count: Callable[[], int], visible: str | None) -> tuple[int, str]:
    """``(device index, CUDA_VISIBLE_DEVICES value)`` for worker ``worker`` under ``--gpu spec``.

    Indices in ``spec`` count the devices this process may see: an existing ``CUDA_VISIBLE_DEVICES`` is
    honoured (its n-th entry is device n), so a CI runner that hands out GPUs keeps working.
    """
    ids = [item.strip() for item in visible.split(",") if item.strip()] if visible else None
    if spec == "all":
        indices = list(range(len(ids) if ids is not None else count()))
    else:
        indices = [int(part) for part in spec.split(",")]
    if not indices:
        raise PinningError("no GPU to pin the worker to: this machine reports none")
    chosen = indices[worker % len(indices)]
    if ids is None:
        return chosen, str(chosen)
    if chosen >= len(ids):
        raise PinningError(f"--gpu {spec} names GPU {chosen}, but CUDA_VISIBLE_DEVICES={visible} shows "
                           f"{len(ids)}: use indices below {len(ids)}")
    return chosen, ids[chosen]


def nvml_device_count() -> int:
    """The number of GPUs, from NVML (it does not start CUDA)."""
    import pynvml

    pynvml.nvmlInit()
    return int(pynvml.nvmlDeviceGetCount())
