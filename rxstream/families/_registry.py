"""The registry of model families: every public module of :mod:`rxstream.families` that defines
``FAMILY`` (a :class:`Family`), read once, on first use. Adding a family is adding its module."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType

from ._family import Family

__all__ = ["detect_family", "discover", "families", "family", "family_names", "names_to_families"]

_FAMILIES: list[Family] = []
_BY_NAME: dict[str, Family] = {}


def discover(package: str) -> tuple[list[Family], dict[str, Family]]:
    """The families of ``package``'s public modules (each must define ``FAMILY``), in detection
    order, and name or alias -> family.

    Raises:
        TypeError: a module without a ``FAMILY``; ValueError: a name or alias taken twice.
    """
    path = importlib.import_module(package).__path__
    found: list[Family] = []
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        fam = getattr(module, "FAMILY", None)
        if not isinstance(fam, Family):
            raise TypeError(f"{package}.{info.name} must define FAMILY, a Family")
        found.append(fam)
    by_name: dict[str, Family] = {}
    for fam in found:
        for key in (fam.name, *fam.aliases):
            if key in by_name:
                raise ValueError(f"family name {key!r} is taken by {by_name[key].name!r} and {fam.name!r}")
            by_name[key] = fam
    return sorted(found, key=lambda f: (f.rank, f.name)), by_name


def _load() -> list[Family]:
    if not _FAMILIES:
        found, by_name = discover(__name__.rsplit(".", 1)[0])
        _BY_NAME.update(by_name)
        _FAMILIES.extend(found)
    return _FAMILIES


def families() -> tuple[Family, ...]:
    """Every family, in detection order."""
    return tuple(_load())


def family_names(*, aliases: bool = False) -> tuple[str, ...]:
    """The families' names, sorted (with ``aliases``: their other names too)."""
    _load()
    return tuple(sorted(_BY_NAME if aliases else (f.name for f in _FAMILIES)))


def names_to_families() -> Mapping[str, Family]:
    """Name or alias -> family (read-only)."""
    _load()
    return MappingProxyType(_BY_NAME)


def family(name: str, owner: str = "route") -> Family:
    """The family called ``name`` (or one of its aliases).

    Raises:
        ValueError: an unknown name (one line naming the known ones).
    """
    _load()
    found = _BY_NAME.get(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"{owner}: unknown preset {name!r}; known: {', '.join(sorted(_BY_NAME))}")
    return found


def detect_family(template: str | None) -> Family | None:
    """The family a chat template's source points to (the first whose signature it has, in
    detection order), or None."""
    if not template:
        return None
    return next((f for f in _load() if f.detects(template)), None)
