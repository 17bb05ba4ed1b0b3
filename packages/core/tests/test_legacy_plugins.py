"""A plugin written in jax2onnx 0.17's style (``jax2onnx.plugins.plugin_system``: a custom primitive,
its abstract eval, a ``patch_info`` monkey patch and ``lower(ctx, eqn)`` through ``ctx.builder``)
converts through the adapter onto the lowering API; what the adapter does not offer fails with one
line naming the new API and the guide."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import allclose, to_onnx
from jax2onnx.errors import Jax2OnnxError
from jax2onnx.lower import legacy_plugins

try:
    from jax.extend.core import Primitive
except ImportError:  # older JAX
    from jax.core import Primitive

#: The library a 0.17 plugin patched: its function computes 2*sin(x).
library = types.SimpleNamespace(twice_sin=lambda x: 2.0 * jnp.sin(x))


def _user_fn(x):
    return library.twice_sin(x) + 1.0


@pytest.fixture
def legacy_plugin():
    """The plugin module as a 0.17 user wrote it (imports from 0.17's module path)."""
    from jax2onnx.plugins.plugin_system import PrimitiveLeafPlugin, register_primitive

    prim = Primitive("legacy_twice_sin")
    prim.def_impl(lambda x: 2.0 * jnp.sin(x))

    @register_primitive(jaxpr_primitive=prim.name, since="0.17.1", context="primitives.legacy", component="twice_sin")
    class TwiceSinPlugin(PrimitiveLeafPlugin):
        _PRIM = prim

        @staticmethod
        def abstract_eval(x):
            return jax.core.ShapedArray(x.shape, x.dtype)

        def lower(self, ctx, eqn):
            x_var, out_var = eqn.invars[0], eqn.outvars[0]
            x_val = ctx.get_value_for_var(x_var, name_hint=ctx.fresh_name("twice_sin_in"))
            out_spec = ctx.get_value_for_var(out_var, name_hint=ctx.fresh_name("twice_sin_out"))
            s = ctx.builder.Sin(x_val)
            result = ctx.builder.Add(s, s, _outputs=[out_spec.name])
            result.type = out_spec.type
            result.shape = out_spec.shape
            ctx.bind_value_for_var(out_var, result)

        @staticmethod
        def patch_info():
            return {"patch_targets": [library], "target_attribute": "twice_sin",
                    "patch_function": lambda original: (lambda x: prim.bind(x))}

    try:
        yield TwiceSinPlugin
    finally:
        legacy_plugins._plugins.pop(prim.name, None)


def test_a_0_17_plugin_converts_through_the_adapter(mini_registry, legacy_plugin, tmp_path):
    path = str(tmp_path / "legacy.onnx")
    with pytest.warns(legacy_plugins.LegacyPatchWarning):  # its patch_info, named
        to_onnx(_user_fn, [("B", 5)], return_mode="file", output_path=path)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Sin", "Add", "Add"]
    x = np.linspace(-2, 2, 15, dtype=np.float32).reshape(3, 5)
    is_match, msg = allclose(_user_fn, path, [x])
    assert is_match, msg
    assert library.twice_sin(np.float32(1.0)) == pytest.approx(2 * np.sin(1.0))  # the patch was undone


def test_a_0_17_patch_holds_for_the_trace_only_and_is_named(mini_registry, legacy_plugin):
    before = library.twice_sin
    seen = []

    def user_fn(x):
        seen.append(library.twice_sin)  # what the trace calls: the plugin's replacement
        return library.twice_sin(x) + 1.0

    with pytest.warns(legacy_plugins.LegacyPatchWarning, match=r"TwiceSinPlugin replaces .*twice_sin"):
        to_onnx(user_fn, [(3, 5)])
    assert seen and seen[0] is not before and library.twice_sin is before

    def failing(x):
        library.twice_sin(x)
        raise RuntimeError("the user's function fails")

    with pytest.warns(legacy_plugins.LegacyPatchWarning), pytest.raises(Exception, match="fails"):
        to_onnx(failing, [(3, 5)])
    assert library.twice_sin is before  # restored however the trace ended


def test_plugin_module_path_and_attribute_access():
    import jax2onnx
    import jax2onnx.plugins.plugin_system as ps

    assert jax2onnx.plugins.plugin_system is ps is legacy_plugins
    assert ps.PLUGIN_REGISTRY is legacy_plugins._plugins


def test_what_the_adapter_lacks_names_the_new_api(mini_registry):
    from jax2onnx.plugins.plugin_system import PrimitiveLeafPlugin, register_primitive

    prim = Primitive("legacy_uses_more_of_0_17")
    prim.def_impl(lambda x: x)
    prim.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))

    @register_primitive(jaxpr_primitive=prim.name)
    class Needy(PrimitiveLeafPlugin):
        def lower(self, ctx, eqn):
            ctx.get_symbolic_dim_origin("B")  # a 0.17 context method the adapter does not offer

    try:
        with pytest.raises(Jax2OnnxError, match=r"get_symbolic_dim_origin.*jax2onnx.plugin.Lowerings.*migrating-from-0.17.md"):
            to_onnx(lambda x: prim.bind(x), [(3,)])
    finally:
        legacy_plugins._plugins.pop(prim.name, None)


def test_register_primitive_needs_a_leaf_plugin_and_a_name():
    from jax2onnx.plugins.plugin_system import PrimitiveLeafPlugin, register_primitive

    with pytest.raises(Jax2OnnxError, match="PrimitiveLeafPlugin subclass"):
        register_primitive(jaxpr_primitive="x")(object)
    with pytest.raises(Jax2OnnxError, match="needs jaxpr_primitive"):
        register_primitive()(type("P", (PrimitiveLeafPlugin,), {}))


@pytest.mark.parametrize("path", ["jax2onnx.converter.ir_context", "jax2onnx.plugins.jax.lax.sin", "jax2onnx.user_interface"])
def test_removed_0_17_modules_say_what_replaced_them(path):
    import importlib

    with pytest.raises(ModuleNotFoundError, match=r"0.17's internals are gone.*migrating-from-0.17.md"):
        importlib.import_module(path)
