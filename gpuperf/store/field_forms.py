"""The forms of the text fields that are not free text: a time, a version, a compute capability, a GPU UUID, a
git commit. A results file's run header and a baseline's header are checked against them where they are read
(``results.py``, ``baseline.py``), so a date that is not a date or a version that is not a version is refused
with the file, the place and the field named, instead of reaching a banner, a table or the history.

Each form accepts what gpuperf itself writes there (``measure/device.py``: a driver NVML could not read is
``CUDA driver API 13.0``, a cuBLAS that could not be loaded ``unavailable (ImportError)``) and nothing with a
control character, a line break, markup or more than ``MAX_FORM_CHARS`` characters. Pure.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: No field of these forms is longer (a time with microseconds and its zone is 32 characters).
MAX_FORM_CHARS = 64


def _timestamp(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _pattern(regex: str) -> Callable[[str], bool]:
    compiled = re.compile(regex)
    return lambda text: compiled.fullmatch(text) is not None


@dataclass(frozen=True)
class Form:
    """One form: its rule over the text, and the words and example an error gives."""

    check: Callable[[str], bool]
    words: str

    def fault(self, value: Any) -> str:
        """Why ``value`` is not of this form (``""`` when it is)."""
        if isinstance(value, str) and len(value) <= MAX_FORM_CHARS and value.isprintable() and self.check(value):
            return ""
        return f"must be {self.words}, got {_shown(value)}"


TIMESTAMP = Form(_timestamp, "an ISO 8601 time such as 2026-11-30T12:49:51+00:00")
VERSION = Form(_pattern(r"(CUDA driver API )?\d+(\.\d+)*([.+-]?[0-9A-Za-z]+)*|unavailable \([A-Za-z]+\)|"),
               "a version such as 580.159.04 or 13.1.0 (empty when unknown)")
COMPUTE_CAPABILITY = Form(_pattern(r"\d{1,2}\.\d{1,2}"), "a compute capability such as 9.0")
#: NVML's ``GPU-<uuid>`` (``MIG-…`` for a MIG instance); the part after the prefix is not held to the UUID's
#: 8-4-4-4-12 grouping, which older drivers' MIG names and short test doubles lack.
GPU_UUID = Form(_pattern(r"(GPU|MIG)-[0-9A-Za-z-]{1,60}(/\d+/\d+)?"),
                "a GPU UUID as NVML gives it, such as GPU-1e941103-ff1c-325f-eeae-bf46624cb93a")
COMMIT = Form(_pattern(r"[0-9a-f]{7,64}"), "a git commit (7 to 64 lower-case hex digits)")

#: The run header's fields of a form (``RunInfo``), and those of its ``extra`` by their path there; a field
#: of ``extra`` may be absent or null (not recorded).
RUN_FORMS: dict[str, Form] = {"started": TIMESTAMP, "compute_capability": COMPUTE_CAPABILITY, "driver": VERSION,
                              "cuda_runtime": VERSION, "cublas": VERSION, "cupy": VERSION}
RUN_EXTRA_FORMS: dict[tuple[str, ...], Form] = {("uuid",): GPU_UUID, ("provenance", "git_commit"): COMMIT}
#: A baseline header's fields of a form (each may be absent: an older file).
HEADER_FORMS: dict[str, Form] = {"recorded": TIMESTAMP, "compute_capability": COMPUTE_CAPABILITY,
                                 "driver": VERSION, "cuda_runtime": VERSION, "cublas": VERSION, "cupy": VERSION}


def run_fault(run: Mapping[str, Any]) -> tuple[str, str]:
    """The first field of a run header (as a results file holds it) that is not of its form, and why; ``("", "")``
    when every one is. A field that is missing is the reader's to name, not this."""
    for name, form in RUN_FORMS.items():
        if name in run and (fault := form.fault(run[name])):
            return name, fault
    extra = run.get("extra")
    for path, form in RUN_EXTRA_FORMS.items():
        value = _at(extra, path)
        if value is not None and (fault := form.fault(value)):
            return "extra." + ".".join(path), fault
    return "", ""


def header_fault(header: Mapping[str, Any]) -> tuple[str, str]:
    """``run_fault`` for a baseline header: its first field not of its form, and why."""
    for name, form in HEADER_FORMS.items():
        if header.get(name) is not None and (fault := form.fault(header[name])):
            return name, fault
    return "", ""


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _shown(value: Any) -> str:
    """``value`` as an error shows it: its ``repr`` (control characters escaped), cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
