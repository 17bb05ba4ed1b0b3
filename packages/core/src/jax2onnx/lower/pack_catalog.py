"""The published plugin packs as data (``pack_catalog.json``), and what is wrong with an install.

Core names no pack in its code (tests/test_layout_rules.py): packs are found through their entry
points. Yet with core alone nothing lowers ``sin``, and the error must still say which pack to
install; ``jax2onnx packs`` must say that a pack everything needs is missing, that an installed pack
does not load, or that the installed versions do not fit each other. The catalog is the data
those answers come from; tests/test_pack_catalog.py keeps it equal to what the packs lower.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata as metadata
import json
import os
from collections.abc import Iterable
from typing import Any

from ..compat import primitives_by_module

_CATALOG = os.path.join(os.path.dirname(__file__), "pack_catalog.json")
#: The entry-point group packs register under (the registry's ``ENTRY_POINT_GROUP``).
ENTRY_POINT_GROUP = "jax2onnx"
#: Distribution names of this project: requirements between them are what ``problems`` checks.
PROJECT_PREFIX = "jax2onnx"


@dataclasses.dataclass(frozen=True)
class CatalogPack:
    """One published pack: its distribution, what it converts, and the primitives it lowers."""

    distribution: str
    what: str
    needed_by_most_exports: bool
    primitives: frozenset[str]
    primitive_modules: tuple[str, ...]
    libraries: tuple[str, ...]


@functools.cache
def catalog() -> tuple[CatalogPack, ...]:
    """The published packs, in the catalog's order (the first match wins)."""
    with open(_CATALOG, encoding="utf-8") as f:
        data = json.load(f)
    return tuple(
        CatalogPack(p["distribution"], p["what"], bool(p.get("needed_by_most_exports")), frozenset(p.get("primitives", ())),
                    tuple(p.get("primitive_modules", ())), tuple(p.get("libraries", ())))
        for p in data["packs"]
    )


def pack_for(primitive: str) -> str | None:
    """The published pack that lowers ``primitive`` (by name, else by the module defining it), or None."""
    for pack in catalog():
        if primitive in pack.primitives:
            return pack.distribution
    prefixes = tuple(p for pack in catalog() for p in pack.primitive_modules)
    if not prefixes:
        return None
    modules = sorted(m for m, names in primitives_by_module(prefixes).items() if primitive in names)
    for pack in catalog():
        if any(m.startswith(pack.primitive_modules) for m in modules if pack.primitive_modules):
            return pack.distribution
    return None


def installed_packs() -> list[tuple[str, str]]:
    """``(distribution, version)`` of every installed pack, from package metadata (nothing imported)."""
    found = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        if dist is not None and getattr(dist, "name", None):
            found[dist.name] = dist.version
    return sorted(found.items())


def problems(packs: Iterable[Any]) -> list[str]:
    """One line per way the install is broken, each naming the fix. ``packs``: the registry's
    ``PackInfo`` list (a pack whose plugin failed to load carries its ``error``)."""
    lines = []
    for info in packs:
        if info.error:
            fix = "" if "pip install" in info.error else f": reinstall it (pip install -U --force-reinstall {info.name})"
            lines.append(f"{info.name} {info.version} is installed but does not load ({info.error}){fix}")
    installed = _installed_project_distributions()
    required_by: dict[str, list[str]] = {}
    for name, dist in sorted(installed.items()):
        for req in _project_requirements(dist):
            have = installed.get(req.name)
            if have is None:
                required_by.setdefault(req.name, []).append(f"{name} {dist.version}")
            elif not req.specifier.contains(have.version, prereleases=True):
                lines.append(f"{name} {dist.version} requires {req}, but {req.name} {have.version} is installed: "
                             f"install matching versions (pip install -U {name} {req.name})")
    lines += _stale_meta_package(installed)
    for pack in catalog():
        if pack.distribution in installed or not (pack.needed_by_most_exports or pack.distribution in required_by):
            continue
        why = [f"required by {', '.join(required_by[pack.distribution])}"] if pack.distribution in required_by else []
        if pack.needed_by_most_exports:
            why.append(f"almost every export needs it: {pack.what}")
        lines.append(f"{pack.distribution} is not installed ({'; '.join(why)}): pip install {pack.distribution}")
    for missing, dependents in sorted(required_by.items()):
        if all(p.distribution != missing for p in catalog()):
            lines.append(f"{missing} is not installed (required by {', '.join(dependents)}): pip install {missing}")
    return lines


def _stale_meta_package(installed: dict[str, metadata.Distribution]) -> list[str]:
    """The ``jax2onnx`` distribution of an older line beside this core: the published single
    package (0.17) still installed, its files in the folder core owns. Every distribution shares
    core's minor version (the version scheme), and 0.17 requires none of them to say so itself."""
    meta, core = installed.get(PROJECT_PREFIX), installed.get(f"{PROJECT_PREFIX}-core")
    if meta is None or core is None or _minor(meta.version) >= _minor(core.version):
        return []
    return [f"{PROJECT_PREFIX} {meta.version} (the published single package) is installed beside {PROJECT_PREFIX}-core "
            f"{core.version} and shares its import folder: upgrade it (pip install -U {PROJECT_PREFIX}) or remove it "
            f"(pip uninstall {PROJECT_PREFIX})"]


def _minor(version: str) -> tuple[int, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).release[:2]
    except InvalidVersion:
        return ()


def not_installed() -> list[CatalogPack]:
    """The published packs this environment lacks (for ``jax2onnx packs`` to offer)."""
    installed = _installed_project_distributions()
    return [p for p in catalog() if p.distribution not in installed]


def _installed_project_distributions(path: list[str] | None = None) -> dict[str, metadata.Distribution]:
    """name -> distribution of every installed ``jax2onnx*`` distribution (on ``path``: sys.path)."""
    found = {}
    for dist in metadata.distributions(**({"path": path} if path is not None else {})):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith(PROJECT_PREFIX) and name not in found:
            found[name] = dist
    return found


def _project_requirements(dist: metadata.Distribution) -> list[Any]:
    """The unconditional requirements of ``dist`` on other distributions of this project."""
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for text in dist.requires or ():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        req.name = req.name.lower().replace("_", "-")
        if not req.name.startswith(PROJECT_PREFIX + "-") or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        out.append(req)
    return out
