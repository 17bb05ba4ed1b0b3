"""Core's catalog of the published packs (packages/core/src/jax2onnx/lower/pack_catalog.json) agrees
with the packs of this repository: every pack is in it, and the primitives it lists for a pack are
exactly those the installed pack lowers (a new lowering, or a removed one, must update the catalog,
or core alone would name the wrong pack to install)."""

from __future__ import annotations

import glob
import os
import tomllib
from collections import defaultdict

import pytest
from jax2onnx.lower import pack_catalog
from jax2onnx.lower.registry import PluginRegistry

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def _repository_packs() -> set[str]:
    """Distribution names of every pack in packages/ (a package with a ``plugin.py``)."""
    names = set()
    for plugin in glob.glob(os.path.join(ROOT, "packages", "*", "src", "*", "plugin.py")):
        with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(plugin))), "pyproject.toml"), "rb") as f:
            names.add(tomllib.load(f)["project"]["name"])
    return names - {"jax2onnx-core"}  # core's plugin.py is the pack authors' API, not a pack


def test_every_pack_of_the_repository_is_in_the_catalog():
    assert {p.distribution for p in pack_catalog.catalog()} == _repository_packs()


def _lowered_primitives() -> dict[str, set[str]]:
    """pack -> every JAX primitive it lowers (``call:`` marks and ``library:`` functions excluded:
    an unlowered mark or library call is not an error, its body is lowered instead), including those
    another pack's lowering outranks."""
    lowered: dict[str, set[str]] = defaultdict(set)
    for pack, low in PluginRegistry()._collect("jax2onnx_lowerings"):
        if not low.name.startswith(("call:", "library:")):
            lowered[pack].add(low.name)
    return lowered


@pytest.mark.parametrize("pack", [p.distribution for p in pack_catalog.catalog()])
def test_the_catalog_lists_what_the_installed_pack_lowers(pack):
    installed = dict(pack_catalog.installed_packs())
    if pack not in installed:
        pytest.skip(f"{pack} is not installed here")
    listed = next(p.primitives for p in pack_catalog.catalog() if p.distribution == pack)
    lowered = _lowered_primitives().get(pack, set())
    assert sorted(lowered - listed) == [], f"{pack} lowers these; add them to its 'primitives' in pack_catalog.json"
    assert sorted(listed - lowered) == [], f"{pack} no longer lowers these; remove them from pack_catalog.json"
