"""What a run produces: one ``Record`` per checked case and one ``RunInfo`` header per session.

Both are plain data (frozen dataclasses) that travel as dicts: through pytest-xdist from a worker to the
controller (in a test report's ``user_properties``), into results files, and back for plots and diffs.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gpuperf.measure.kernel_records import Kernel
from gpuperf.store.baseline import versions_of
from gpuperf.vocabulary import Status


class Reason:
    """The detail of a status that the status alone does not give (``Record.reason``), carried as data so that no
    reader has to recover it from the note."""

    NONE = ""
    NOISY = "noisy"  # UNRELIABLE: the measurement's own spread would need a band above the cap
    THROTTLED = "throttled"  # UNRELIABLE: measured while throttled or shared (``Record.unreliable_reason`` says how)
    UNKNOWN = "unknown"  # UNRELIABLE, read from a results file written before the reason was stored
    ALL = (NONE, NOISY, THROTTLED, UNKNOWN)


@dataclass(frozen=True)
class Record:
    """One measured, checked case: identity, parameters, the measurement's summary and the verdict."""

    case_id: str
    nodeid: str
    family: str
    params: dict[str, str]
    metric: str
    value: float
    unit: str
    status: str
    note: str = ""
    pct_of_peak: float | None = None
    peak: float | None = None
    flops: float | None = None
    bytes: float | None = None
    arithmetic_intensity: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    median_s: float | None = None
    min_s: float | None = None
    p10_s: float | None = None
    p90_s: float | None = None
    rel_iqr: float | None = None
    rel_stdev: float | None = None
    samples: int | None = None
    calls_per_sample: int | None = None
    method: str = ""
    flush: str = ""
    sm_clock_mhz: tuple[int, int] | None = None  # (before, after) the measurement
    clock_events: tuple[str, ...] = ()
    reliable: bool = True
    baseline: float | None = None
    delta_pct: float | None = None
    tolerance: float | None = None
    gpu: str = ""
    gpu_index: int | None = None
    kernel: str = ""  # what ran: the measurement's label ("cuBLAS fp32 nn", "custom wmma"), "A ÷ B" for a ratio
    precision: str = ""  # the math path whose peak applies (vocabulary.Precision)
    shape: dict[str, int] = field(default_factory=dict)  # {"batch", "m", "n", "k"} as the work was counted
    kernels: tuple[Kernel, ...] = ()  # what one call launched, in order, from the kernel records
    event_median_s: float | None = None  # the event-timed cross-check of a traced figure, per call
    #: The SM clock the calls ran at and the work in cycles, measured on the GPU (``measure/sm_clock.py``):
    #: median cycles per call, their samples' relative IQR, the mean SM clock (MHz), and the primary metric
    #: the same cycles would give at the maximum SM clock (for a ratio: the ratio of those).
    cycles_per_call: float | None = None
    cycles_rel_iqr: float | None = None
    call_clock_mhz: float | None = None
    value_at_max_clock: float | None = None
    max_clock_mhz: int | None = None  # the GPU's maximum SM clock, which value_at_max_clock assumes
    #: Above the roofline's ridge point (for a ratio: both sides), so its time follows the SM clock; ``None``
    #: when unknown (no peaks). Only such a case can be judged on cycles.
    clock_bound: bool | None = None
    judged_on: str = ""  # gate.Basis: what the verdict compared ("time" or "cycles"); empty when not judged
    reason: str = Reason.NONE  # Reason: why the status is what it is, where the status does not say
    #: Why the measurement itself cannot be trusted (clock events, another process on the GPU), as the measuring
    #: loop found it; empty when it was clean or the verdict never got that far.
    unreliable_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sm_clock_mhz"] = list(self.sm_clock_mhz) if self.sm_clock_mhz else None
        data["clock_events"] = list(self.clock_events)
        data["kernels"] = [kernel.to_dict() for kernel in self.kernels]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        if values.get("sm_clock_mhz") is not None:
            values["sm_clock_mhz"] = tuple(values["sm_clock_mhz"])
        values["clock_events"] = tuple(values.get("clock_events") or ())
        values["kernels"] = tuple(Kernel.from_dict(kernel) for kernel in values.get("kernels") or ())
        values["reason"] = stored_reason(values)
        return cls(**values)

    @property
    def failed(self) -> bool:
        return self.status in Status.FAILING


def stored_reason(values: dict[str, Any]) -> str:
    """A record's ``reason`` as stored, or, for a record of an older file that has none, ``Reason.UNKNOWN`` when
    its status needs one (UNRELIABLE): never mistaken for a clean figure."""
    if "reason" in values:
        return str(values["reason"])
    return Reason.UNKNOWN if values.get("status") == Status.UNRELIABLE else Reason.NONE


@dataclass(frozen=True)
class RunInfo:
    """The session header: which GPU, which software, which clocks and flush modes."""

    gpu_name: str
    gpu_slug: str
    compute_capability: str
    driver: str
    cuda_runtime: str
    cublas: str
    cupy: str
    sm_clock_max_mhz: int | None
    mem_clock_mhz: int | None
    flush_modes: tuple[str, ...]
    started: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["flush_modes"] = list(self.flush_modes)
        return data

    @property
    def versions(self) -> dict[str, str]:
        """The versions a baseline header records and a run is compared on (``baseline.versions_of``)."""
        return versions_of(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["flush_modes"] = tuple(values.get("flush_modes") or ())
        return cls(**values)
