"""Every distribution is ready to publish: license, metadata, typing marker, README and changelog
that work on PyPI, onnxruntime optional, pack ranges that admit this core, a release workflow
that knows every package, and the plugin-API check."""

from __future__ import annotations

import glob
import os
import re
import tomllib

import pytest
from jax2onnx import __version__
from jax2onnx.lower.plugin_api import PLUGIN_API, check_plugin_api, declared_api

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
#: Every distribution in the repository: a new pack is held to the same standard without a list.
FOLDERS = sorted(
    os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "packages", "*", "pyproject.toml"))
)
#: The `jax2onnx` distribution: a metadata-only package depending on core and the default packs.
META = "jax2onnx"
PACKS = [f for f in FOLDERS if f != "core"]
pytestmark = pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "packages", "core")), reason="needs the source checkout")


def _project(folder):
    with open(os.path.join(ROOT, "packages", folder, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def test_root_license_is_apache():
    assert "Apache License" in _read("LICENSE") and "Version 2.0" in _read("LICENSE")


@pytest.mark.parametrize("folder", FOLDERS)
def test_package_metadata(folder):
    data = _project(folder)
    project = data["project"]
    assert _read("packages", folder, "LICENSE") == _read("LICENSE"), "the wheel/sdist ships the repository's license"
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in project["classifiers"])
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(project["urls"])
    assert project["urls"]["Changelog"].endswith(f"packages/{folder}/CHANGELOG.md")
    assert data["build-system"]["requires"] == ["hatchling>=1.27"]  # PEP 639 license-files
    wheel = data["tool"]["hatch"]["build"]["targets"]["wheel"]
    if folder == META:  # metadata only: it must own no file of the jax2onnx/ folder (docs/architecture.md)
        assert wheel.get("bypass-selection") is True and "packages" not in wheel and "force-include" not in wheel
        return
    assert "Typing :: Typed" in project["classifiers"]
    (package,) = wheel["packages"]
    assert os.path.isfile(os.path.join(ROOT, "packages", folder, package, "py.typed"))


@pytest.mark.parametrize("folder", FOLDERS)
def test_readme_and_changelog_work_on_pypi(folder):
    readme = _read("packages", folder, "README.md")
    assert len(readme.splitlines()) >= 20, "the README is the PyPI page"
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", readme)
    assert not relative, f"relative links are broken on PyPI: {relative}"
    assert "jax2onnx-core" in readme, "a pack README says which core it works with"
    changelog = _read("packages", folder, "CHANGELOG.md")
    assert changelog.startswith("# Changelog") and "## [" in changelog


def test_onnxruntime_is_an_extra_of_core():
    project = _project("core")["project"]
    assert not any(d.startswith("onnxruntime") for d in project["dependencies"])
    assert any(d.startswith("onnxruntime") for d in project["optional-dependencies"]["runtime"])
    examples = _project("examples")["project"]["dependencies"]
    assert any(d.startswith("jax2onnx-core[runtime]") for d in examples), "the quickstart verifies"


def _admits(spec: str, version: str) -> bool:
    v = tuple(int(x) for x in version.split(".")[:3])
    for clause in spec.split(","):
        op, bound = re.fullmatch(r"\s*(>=|<=|<|>|==)\s*([\d.]+)\s*", clause).groups()
        b = tuple(int(x) for x in bound.split("."))
        b = b + (0,) * (3 - len(b))
        ok = {">=": v >= b, "<=": v <= b, "<": v < b, ">": v > b, "==": v == b}[op]
        if not ok:
            return False
    return True


@pytest.mark.parametrize("folder", PACKS)
def test_packs_declare_a_core_range_that_admits_this_core(folder):
    deps = _project(folder)["project"]["dependencies"]
    (core,) = [d for d in deps if d.startswith("jax2onnx-core")]
    spec = re.sub(r"^jax2onnx-core(\[[^\]]*\])?", "", core)
    assert "<" in spec, "a pack states the core versions it works with (an upper bound)"
    assert _admits(spec, __version__), (core, __version__)


def test_release_workflow_covers_every_package():
    """The workflow maps a tag <prefix>-v<version> to packages/<prefix> or packages/plugins-<prefix>:
    every folder must be reachable that way, and the tag pattern must admit it."""
    import fnmatch

    workflow = _read(".github", "workflows", "release.yml")
    assert '"*-v[0-9]*"' in workflow
    assert 'f"packages/{prefix}", f"packages/plugins-{prefix}"' in workflow
    for folder in FOLDERS:
        prefix = folder.removeprefix("plugins-")
        assert fnmatch.fnmatch(f"{prefix}-v0.2.0", "*-v[0-9]*")
        assert "-v" not in prefix, f"{folder}: its tag prefix would be ambiguous"
    assert "id-token: write" in workflow and "nox -s build" in workflow


# -- plugin API ----------------------------------------------------------------------------------
def test_plugin_api_accepts_compatible_declarations():
    major, minor = PLUGIN_API
    for declared in (None, f"{major}.{minor}", f"{major}", major, (major, 0)):
        assert check_plugin_api(declared, "pack-x") is None, declared


@pytest.mark.parametrize(
    ("declared", "fragment"),
    [
        (f"{PLUGIN_API[0] + 1}.0", "pip install -U jax2onnx-core"),
        (f"{PLUGIN_API[0]}.{PLUGIN_API[1] + 1}", "pip install -U jax2onnx-core"),
        ("0.9", "pip install -U pack-x"),
        ("soon", "not a version"),
    ],
)
def test_plugin_api_rejects_incompatible_declarations(declared, fragment):
    if declared == "0.9" and PLUGIN_API[0] == 0:
        pytest.skip("no older major to test against")
    msg = check_plugin_api(declared, "pack-x")
    assert msg is not None and "pack-x" in msg and "skipped" in msg and fragment in msg, msg


def test_declared_api_is_read_from_the_plugin_or_its_module():
    class Plugin:
        JAX2ONNX_PLUGIN_API = "1.0"

    assert declared_api(Plugin()) == "1.0"
    import types

    module = types.ModuleType("fake_pack_plugin_mod")
    module.JAX2ONNX_PLUGIN_API = "7.1"
    import sys

    sys.modules["fake_pack_plugin_mod"] = module
    try:
        obj = type("P", (), {"__module__": "fake_pack_plugin_mod"})()
        assert declared_api(obj) == "7.1"
    finally:
        del sys.modules["fake_pack_plugin_mod"]
