"""The custom kernels' build catalogues (``kernels/custom_builds.yaml``), read and checked: pure, no GPU.

A catalogue section holds ``defaults`` (role → build name) and ``builds`` (name → fields). Each build becomes an
instance of the dataclass its ``core`` names, every field checked against that class: a missing or unknown
field, a value of the wrong kind, a name that is not the one the build's geometry gives, or a default that names
no build is a ``CatalogueError`` naming the file, the entry and the fix, raised when ``kernels.custom_plan`` is
imported (so at collection, never on the GPU).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuperf.store.reading import InputError, load_yaml, read_text

CATALOGUE = Path(__file__).resolve().with_name("custom_builds.yaml")
#: Larger than the catalogue will ever be; a bound so a wrong path cannot read a huge file.
CATALOGUE_LIMIT = 1 << 20
_FIX = "fix the entry in kernels/custom_builds.yaml (its header says what each field means)"


class CatalogueError(InputError):
    """A catalogue entry that cannot be a build; the message names the entry and the fix."""


@dataclass(frozen=True)
class Catalogue:
    """One section: its builds by name, in the file's order, and the builds the suite runs by role."""

    builds: dict[str, Any]
    defaults: dict[str, str]


def _check_value(where: str, name: str, kind: str, value: Any) -> None:
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    else:
        raise CatalogueError(f"{where}: field {name!r} has type {kind}, which a catalogue cannot hold")
    if not ok:
        expected = "true or false" if kind == "bool" else "a whole number ≥ 0"
        raise CatalogueError(f"{where}: {name} must be {expected}, got {value!r}; {_FIX}")


def _build(where: str, cls: type[Any], fields: Mapping[str, Any]) -> Any:
    """``cls(**fields)``, each field known to ``cls`` and of its declared kind, every required one present."""
    declared = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - set(declared))
    if unknown:
        raise CatalogueError(f"{where}: unknown field(s) {', '.join(unknown)} for {cls.__name__} (known: "
                             f"{', '.join(declared)}); {_FIX}")
    missing = [name for name, f in declared.items() if name not in fields
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise CatalogueError(f"{where}: lacks {', '.join(missing)}; {_FIX}")
    for name, value in fields.items():
        _check_value(where, name, str(declared[name].type), value)
    return cls(**fields)


def _entry(path: Path, section: str, name: Any, raw: Any, kinds: Mapping[str, type[Any]], default_kind: str | None
           ) -> Any:
    where = f"{path}: {section}.builds.{name}"
    if not isinstance(name, str) or not isinstance(raw, dict):
        raise CatalogueError(f"{where}: a build is a name holding a mapping of fields; {_FIX}")
    fields = dict(raw)
    kind = fields.pop("core", default_kind)
    if kind not in kinds:
        raise CatalogueError(f"{where}: core {kind!r} is not one of {', '.join(map(repr, kinds))}; {_FIX}")
    build = _build(where, kinds[kind], fields)
    derived = getattr(build, "name", None)
    if derived is not None and derived != name:
        raise CatalogueError(f"{where}: its fields make the build {derived!r}; name the entry {derived!r} (the "
                             "name of a build is its geometry and options)")
    return build


def load_section(section: str, kinds: Mapping[str, type[Any]], roles: Sequence[str], *,
                 default_kind: str | None = None, path: Path = CATALOGUE) -> Catalogue:
    """The ``section`` of the catalogue: each build an instance of ``kinds[core]`` (``core`` defaults to
    ``default_kind``), and a default build for each of ``roles``."""
    try:
        data = load_yaml(path, read_text(path, CATALOGUE_LIMIT, "the kernel build catalogue", _FIX), _FIX)
    except FileNotFoundError:
        raise CatalogueError(f"{path}: the kernel build catalogue is missing; restore it from git") from None
    body = data.get(section) if isinstance(data, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("builds"), dict) or not body["builds"]:
        raise CatalogueError(f"{path}: no section {section!r} with a mapping of builds; {_FIX}")
    extra = sorted(set(body) - {"defaults", "builds"})
    if extra:
        raise CatalogueError(f"{path}: section {section!r} holds {', '.join(extra)}; only defaults and builds")
    builds = {name: _entry(path, section, name, raw, kinds, default_kind) for name, raw in body["builds"].items()}
    defaults = body.get("defaults")
    if not isinstance(defaults, dict) or sorted(defaults) != sorted(roles):
        raise CatalogueError(f"{path}: {section}.defaults must name a build for each of {', '.join(roles)}; {_FIX}")
    for role, name in defaults.items():
        if name not in builds:
            raise CatalogueError(f"{path}: {section}.defaults.{role} is {name!r}, which is not one of the section's "
                                 f"builds; {_FIX}")
    return Catalogue(builds, dict(defaults))
