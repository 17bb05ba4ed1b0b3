"""Pack discovery through real entry points, conflicts, broken packs, the registry listing."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx import PluginConflictError, to_onnx
from jax2onnx.lower.registry import PackLoadWarning, PluginRegistry
from jax2onnx.plugin import Lowering
from mini_pack import MiniPack, pack_of, registry_in_use


def _install_pack(tmp_path, dist: str, module: str, body: str, monkeypatch) -> None:
    """A throwaway distribution on sys.path: a module plus a dist-info with an entry point."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
    info = tmp_path / f"{dist.replace('-', '_')}-0.3.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3.1\n")
    (info / "entry_points.txt").write_text(f"[jax2onnx]\n{module} = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()


GOOD_PACK = """
    from jax2onnx import hookimpl
    from jax2onnx.plugin import Lowering

    @hookimpl
    def jax2onnx_lowerings():
        return [Lowering("sin", lambda ctx, x: ctx.op.Sin(x))]
"""


def _our_eps(names):
    return [ep for ep in importlib.metadata.entry_points(group="jax2onnx") if ep.value in names]


def test_pack_is_discovered_through_an_entry_point(tmp_path, monkeypatch):
    _install_pack(tmp_path, "throwaway-pack", "throwaway_pack_mod", GOOD_PACK, monkeypatch)
    eps = _our_eps({"throwaway_pack_mod"})
    assert len(eps) == 1, "the throwaway dist-info must be visible to importlib.metadata"
    with registry_in_use(entry_points=eps) as registry:
        model = to_onnx(lambda x: jnp.sin(x), [(3,)])
    assert [n.op_type for n in model.graph.node] == ["Sin"]
    info = {p.name: p for p in registry.describe()}
    assert info["throwaway-pack"].version == "0.3.1"
    assert info["throwaway-pack"].lowered == ["sin"]


def test_default_registry_scans_the_entry_point_group(tmp_path, monkeypatch):
    body = GOOD_PACK.replace('Lowering("sin"', 'Lowering("throwaway_only_prim"')
    _install_pack(tmp_path, "throwaway-scan", "throwaway_scan_mod", body, monkeypatch)
    registry = PluginRegistry()  # no explicit entry points: real discovery
    info = {p.name: p for p in registry.describe()}
    assert info["throwaway-scan"].lowered == ["throwaway_only_prim"]


def test_duplicate_claim_names_both_packs():
    a = pack_of([Lowering("sin", lambda ctx, x: ctx.op.Sin(x))])
    b = pack_of([Lowering("sin", lambda ctx, x: ctx.op.Cos(x))])
    with registry_in_use(("pack-a", a), ("pack-b", b), ("jax2onnx-mini", MiniPack())) as registry:
        assert "sin" in registry.lowerings()  # loading does not fail: the environment stays usable
        assert set(registry.conflicts) == {"sin"}
        to_onnx(lambda x: jnp.cos(x), [(3,)])  # a conversion not using the contested primitive works
        with pytest.raises(PluginConflictError) as err:
            to_onnx(lambda x: jnp.sin(x), [(3,)])
    assert "pack-a" in str(err.value) and "pack-b" in str(err.value) and "'sin'" in str(err.value)


def test_pack_built_for_another_plugin_api_is_skipped(tmp_path, monkeypatch):
    body = GOOD_PACK.replace('Lowering("sin"', 'Lowering("throwaway_api_prim"') + "    JAX2ONNX_PLUGIN_API = '2.0'\n"
    _install_pack(tmp_path, "future-pack", "future_pack_mod", body, monkeypatch)
    registry = PluginRegistry(entry_points=_our_eps({"future_pack_mod"}))
    with pytest.warns(PackLoadWarning, match="built for plugin API 2.0"):
        table = registry.lowerings()
    assert "throwaway_api_prim" not in table
    assert next(p for p in registry.describe() if p.name == "future-pack").error


def test_explicit_priority_resolves_a_duplicate():
    a = pack_of([Lowering("sin", lambda ctx, x: ctx.op.Sin(x))])
    b = pack_of([Lowering("sin", lambda ctx, x: ctx.op.Cos(x), priority=10)])
    registry = PluginRegistry(entry_points=[], extra_plugins=[("pack-a", a), ("pack-b", b)])
    assert registry.lowerings()["sin"].pack == "pack-b"


def test_broken_pack_warns_and_others_still_work(tmp_path, monkeypatch):
    _install_pack(tmp_path, "broken-pack", "broken_pack_mod", "raise ImportError('missing dependency foo')\n", monkeypatch)
    good = tmp_path / "good"
    good.mkdir()
    _install_pack(good, "good-pack", "good_pack_mod", GOOD_PACK, monkeypatch)
    eps = _our_eps({"broken_pack_mod", "good_pack_mod"})
    assert len(eps) == 2
    registry = PluginRegistry(entry_points=eps)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = registry.lowerings()
    messages = [str(w.message) for w in caught if issubclass(w.category, PackLoadWarning)]
    assert any("broken-pack" in m and "missing dependency foo" in m for m in messages), messages
    assert "sin" in table
    broken = next(p for p in registry.packs if p.name == "broken-pack")
    assert broken.error and "ImportError" in broken.error


#: One fresh interpreter serves the two import tests below (each fresh one that imports jax2onnx
#: costs seconds of CPU): it prints whether a pack was imported right after ``import jax2onnx``,
#: whether sympy was after ``import onnx_ir`` too, then uses sympy (absent: "no sympy").
_FRESH_IMPORTS = (
    "import sys, jax2onnx\n"
    "print(any(m.startswith('jax2onnx_') for m in sys.modules))\n"
    "import onnx_ir\n"
    "print('sympy.core' in sys.modules)\n"
    "try:\n"
    "    import sympy\n"
    "except ImportError:\n"
    "    print('no sympy')\n"
    "else:\n"
    "    dim = onnx_ir.SymbolicDim('B')\n"
    "    print(sympy.Symbol('x') + 1, dim + 1 if hasattr(dim, '__add__') else 'B + 1')\n"
)


@pytest.fixture(scope="module")
def fresh_imports() -> list[str]:
    import subprocess

    out = subprocess.run([sys.executable, "-c", _FRESH_IMPORTS], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()


def test_plugin_import_is_lazy(fresh_imports):
    """Importing jax2onnx must not import any pack; the registry loads on first use."""
    assert fresh_imports[0] == "False"


def test_mini_pack_converts(mini_registry):
    model = to_onnx(lambda x: jnp.sin(x) * 2.0, [(3,)])
    assert {n.op_type for n in model.graph.node} == {"Sin", "Mul"}
    np.testing.assert_equal(len(model.graph.input), 1)


def test_sympy_stays_off_the_import_path_but_still_works(fresh_imports):
    """onnx_ir pulls in sympy (1-2 s) for features we don't use; it must load only when used."""
    # Newer onnx_ir depends on sympy; at the floor (onnx_ir 0.1.10) it may be absent, and then
    # there is nothing for jax2onnx to keep off the import path.
    pytest.importorskip("sympy", reason="sympy is not installed (onnx_ir 0.1.10 does not require it)")
    # onnx_ir 0.1.10 (core's floor) has no symbolic-dim arithmetic (the sympy user) and no
    # _symbolic_shapes module: there only sympy itself is checked.
    first, second = fresh_imports[1:]
    assert first == "False"
    assert second == "x + 1 B + 1"
