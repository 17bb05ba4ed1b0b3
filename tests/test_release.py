"""The release checks (tests/release.py, run on a built wheelhouse by `nox -s release`) hold for the
repository as it is: sibling pins admit each other's versions, every CHANGELOG has its version's
entry, every distribution sorts above the published 0.17.1 on one minor version, and the README
documents the wheelhouse path (with -U, so it upgrades a 0.17 install)."""

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
    assert any("jax2onnx 0.17.0 must be above the published jax2onnx 0.17.1" in p for p in problems), problems


def test_every_distribution_continues_the_published_line_on_one_minor_version():
    """core's version is `jax2onnx.__version__`: a 0.1 core reads as a downgrade from 0.17."""
    dists = copy.deepcopy(release.distributions())
    dists["jax2onnx-core"]["version"] = "0.1.0"
    problems, _ = release.check_metadata(dists)
    assert any("jax2onnx-core 0.1.0 must be above the published jax2onnx 0.17.1" in p for p in problems), problems
    dists = copy.deepcopy(release.distributions())
    dists["jax2onnx-lax"]["version"] = "0.19.0"
    problems, _ = release.check_metadata(dists)
    assert any("every distribution shares one minor version" in p and "jax2onnx-lax 0.19.0" in p for p in problems), problems


def test_the_installed_core_is_the_repositorys_and_above_the_published_line():
    import jax2onnx

    core = release.distributions()["jax2onnx-core"]["version"]
    assert jax2onnx.__version__ == core
    assert release._version_tuple(jax2onnx.__version__) > release._version_tuple(release.LAST_PUBLISHED)


def test_meta_package_depends_on_the_default_surface_with_extras():
    meta = release.distributions()["jax2onnx"]
    names = {(extra, r.split(">")[0].split("[")[0]) for extra, r in meta["requirements"]}
    assert {(None, d) for d in ("jax2onnx-core", "jax2onnx-lax", "jax2onnx-jnp", "jax2onnx-nnx")} <= names
    assert {e for e, _ in names if e} == {"linen", "eqx", "keras", "llm", "runtime", "all"}


def test_readme_documents_the_wheelhouse_installs():
    commands = release.readme_commands()
    # -U: over an installed jax2onnx 0.17 a plain install is a no-op ("already satisfied")
    assert ["install", "-U", "--find-links", "wheelhouse", "jax2onnx-core", "jax2onnx-nnx"] in commands
    assert ["install", "-U", "--find-links", "wheelhouse", "jax2onnx"] in commands
