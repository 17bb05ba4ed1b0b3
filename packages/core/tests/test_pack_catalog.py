"""Core alone knows the published packs as data (lower/pack_catalog.json): which pack lowers a
primitive, and what makes an install broken (``jax2onnx packs`` names each problem, exit 1).

Installs are simulated with ``.dist-info`` folders in a temporary site folder (real package
metadata, read by importlib.metadata), so the checks hold whatever this environment has installed.
"""

from __future__ import annotations

import importlib.metadata

import pytest
from jax2onnx.cli import main
from jax2onnx.lower import pack_catalog
from mini_pack import registry_in_use

CORE = "jax2onnx-core"


def _dist(site, name: str, version: str, *requires: str) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (folder / "METADATA").write_text("\n".join(lines) + "\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """An install made of the ``.dist-info`` folders a test writes into ``site``."""
    folder = tmp_path / "site"
    folder.mkdir()
    real = pack_catalog._installed_project_distributions
    monkeypatch.setattr(pack_catalog, "_installed_project_distributions", lambda: real(path=[str(folder)]))
    return folder


def _healthy(site, core_version: str = "0.18.0") -> None:
    _dist(site, CORE, core_version, "jax>=0.6.2", "onnxruntime>=1.31; extra == 'runtime'")
    _dist(site, "jax2onnx-lax", "0.18.0", "jax2onnx-core>=0.18,<0.19")
    _dist(site, "jax2onnx-jnp", "0.18.0", "jax2onnx-core>=0.18,<0.19", "jax2onnx-lax>=0.18,<0.19")


def test_the_catalog_is_well_formed_data():
    packs = pack_catalog.catalog()
    names = [p.distribution for p in packs]
    assert len(names) == len(set(names)) and all(n.startswith("jax2onnx-") for n in names), names
    assert [p.distribution for p in packs if p.needed_by_most_exports], "some pack is needed by most exports"
    assert all(p.what for p in packs), "each pack says what it converts"


def test_a_jax_primitive_is_named_with_its_pack():
    lax_pack = pack_catalog.pack_for("sin")
    assert lax_pack is not None and pack_catalog.pack_for("cos") == lax_pack
    assert pack_catalog.pack_for("no_such_primitive_anywhere") is None
    assert pack_catalog.pack_for("call:some.mark") is None


def test_a_jax_primitive_the_catalog_does_not_list_belongs_to_the_pack_owning_its_module():
    # A primitive JAX defines (in jax._src...) that no catalog entry names: the module prefix decides.
    from jax2onnx import compat

    listed = {n for p in pack_catalog.catalog() for n in p.primitives}
    by_module = compat.primitives_by_module()
    unlisted = sorted(n for names in by_module.values() for n in names - listed)
    assert unlisted, "JAX defines primitives no pack lowers (callbacks, sharding internals, ...)"
    owner = next(p.distribution for p in pack_catalog.catalog() if "jax." in p.primitive_modules)
    assert pack_catalog.pack_for(unlisted[0]) == owner


def test_a_healthy_install_has_no_problem(site):
    _healthy(site)
    assert pack_catalog.problems([]) == []


def test_a_missing_pack_everything_needs_is_one_line_naming_who_needs_it(site):
    needed = next(p for p in pack_catalog.catalog() if p.needed_by_most_exports).distribution
    _dist(site, CORE, "0.18.0")
    _dist(site, "jax2onnx-nnx", "0.18.0", "jax2onnx-core>=0.18,<0.19", f"{needed}>=0.18,<0.19", "flax>=0.10.6",
          'jax2onnx-examples; extra == "demo"')
    problems = pack_catalog.problems([])
    assert problems == [f"{needed} is not installed (required by jax2onnx-nnx 0.18.0; almost every export needs it: "
                        f"{next(p.what for p in pack_catalog.catalog() if p.distribution == needed)}): pip install {needed}"]


def test_core_alone_misses_the_pack_everything_needs(site):
    _dist(site, CORE, "0.18.0")
    problems = pack_catalog.problems([])
    assert len(problems) == 1 and "is not installed" in problems[0] and "almost every export needs it" in problems[0]


def test_a_pack_built_for_another_core_is_a_version_mismatch(site):
    _healthy(site, core_version="0.19.0")
    problems = pack_catalog.problems([])
    assert "jax2onnx-lax 0.18.0 requires jax2onnx-core<0.19,>=0.18, but jax2onnx-core 0.19.0 is installed: " \
           "install matching versions (pip install -U jax2onnx-lax jax2onnx-core)" in problems, problems
    assert len(problems) == 2, problems  # lax and jnp, one line each


def test_the_published_017_left_beside_core_is_reported(site):
    # `pip install -U jax2onnx-core jax2onnx-nnx` over 0.17.1 keeps the 0.17.1 distribution installed
    _healthy(site)
    _dist(site, "jax2onnx", "0.17.1", "jax>=0.5", "flax>=0.10")
    assert pack_catalog.problems([]) == [
        "jax2onnx 0.17.1 (the published single package) is installed beside jax2onnx-core 0.18.0 and shares its "
        "import folder: upgrade it (pip install -U jax2onnx) or remove it (pip uninstall jax2onnx)"]


def test_the_meta_package_of_cores_line_is_no_problem(site):
    _healthy(site)
    _dist(site, "jax2onnx", "0.18.0", "jax2onnx-core>=0.18,<0.19", "jax2onnx-lax>=0.18,<0.19")
    assert pack_catalog.problems([]) == []


def test_a_pack_that_does_not_load_is_one_line_with_the_fix():
    class Info:
        name, version, error = "jax2onnx-foo", "0.18.0", "ImportError: no module named foo_dep"

    (line,) = [p for p in pack_catalog.problems([Info()]) if "jax2onnx-foo" in p]
    assert line == ("jax2onnx-foo 0.18.0 is installed but does not load (ImportError: no module named foo_dep): "
                    "reinstall it (pip install -U --force-reinstall jax2onnx-foo)")


def test_packs_reports_a_broken_install_and_exits_1(site, capsys):
    _dist(site, CORE, "0.18.0")
    with registry_in_use():
        assert main(["packs"]) == 1
    out = capsys.readouterr().out
    problems = [line for line in out.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 1 and "almost every export needs it" in problems[0], out


def test_packs_on_a_healthy_install_exits_0_and_offers_the_other_packs(site, capsys):
    _healthy(site)
    with registry_in_use():
        assert main(["packs"]) == 0
    out = capsys.readouterr().out
    assert "problem:" not in out, out
    offered = [p.distribution for p in pack_catalog.catalog() if p.distribution not in ("jax2onnx-lax", "jax2onnx-jnp")]
    for name in offered:
        assert f"not installed: {name} (" in out and f"pip install {name}" in out, out


def test_installed_packs_are_read_from_entry_points():
    listed = dict(pack_catalog.installed_packs())
    declared = {ep.dist.name: ep.dist.version for ep in importlib.metadata.entry_points(group=pack_catalog.ENTRY_POINT_GROUP)}
    # with core alone no pack declares an entry point: then the listing is empty too
    assert {name: listed.get(name) for name in declared} == declared
    assert set(listed) <= set(declared) | {"jax2onnx-core"}, listed
