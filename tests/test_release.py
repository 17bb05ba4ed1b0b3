"""The release checks (tests/release.py, run on a built wheelhouse by `nox -s release`) hold for the
repository as it is: sibling pins admit each other's versions, every CHANGELOG has its version's
entry, the `jax2onnx` meta package sorts above 0.17, and the README documents the wheelhouse path."""

from __future__ import annotations

import copy
import importlib.util
import os

import pytest

pytest.importorskip("packaging")
_spec = importlib.util.spec_from_file_location("release", os.path.join(os.path.dirname(__file__), "release.py"))
release = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release)


def test_versions_pins_and_changelogs_agree():
    problems, missing = release.check_metadata()
    assert problems == []
    # A pin to a pack packages/ does not hold yet fails `nox -s release`; only the meta package's extras may.
    assert all(m.startswith("jax2onnx[") for m in missing), missing


def test_the_checker_catches_a_pin_that_excludes_a_sibling():
    dists = copy.deepcopy(release.distributions())
    dists["jax2onnx-nnx"]["requirements"].append((None, "jax2onnx-core>=9"))
    dists["jax2onnx"]["version"] = "0.17.0"
    problems, _ = release.check_metadata(dists)
    assert any("jax2onnx-nnx requires 'jax2onnx-core>=9'" in p for p in problems), problems
    assert any("must be above the published 0.17.1" in p for p in problems), problems


def test_meta_package_depends_on_the_default_surface_with_extras():
    meta = release.distributions()["jax2onnx"]
    names = {(extra, r.split(">")[0].split("[")[0]) for extra, r in meta["requirements"]}
    assert {(None, d) for d in ("jax2onnx-core", "jax2onnx-lax", "jax2onnx-jnp", "jax2onnx-nnx")} <= names
    assert {e for e, _ in names if e} == {"linen", "eqx", "keras", "llm", "runtime", "all"}


def test_readme_documents_the_wheelhouse_installs():
    commands = release.readme_commands()
    assert ["install", "--find-links", "wheelhouse", "jax2onnx-core", "jax2onnx-nnx"] in commands
    assert ["install", "--find-links", "wheelhouse", "jax2onnx"] in commands
