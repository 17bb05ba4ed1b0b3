"""The lowering API packs write against: typed emission, casts, constants, facets, pack objects."""

from __future__ import annotations

import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
import pytest
from jax2onnx import allclose, hookimpl, to_onnx
from jax2onnx.dtypes import FLOAT_MATH, carrier
from jax2onnx.ir.builder import ModelBuilder
from jax2onnx.lower.registry import PackLoadWarning, PluginRegistry
from jax2onnx.plugin import Lowerings, PackModules, is_array, is_symbolic_dim
from mini_pack import registry_in_use


def _scope(dtype=np.float32, shape=(3,)):
    mb = ModelBuilder(opset=23)
    x = mb.main.add_input("x", jax.ShapeDtypeStruct(shape, dtype))
    return mb.main, x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
def test_python_scalar_takes_the_dtype_of_the_other_operand(dtype):
    scope, x = _scope(dtype)
    y = scope.op.Mul(x, 2)
    const = y.producer().inputs[1]
    assert const.const_value.numpy().dtype == np.dtype(dtype)
    assert y.type.dtype == ir.DataType.from_numpy(np.dtype(dtype))


def test_scalar_binds_even_when_it_comes_first():
    scope, x = _scope(np.float64)
    y = scope.op.Sub(1.0, x)
    assert y.producer().inputs[0].const_value.numpy().dtype == np.float64


def test_inexact_literal_for_an_integer_operand_is_an_error():
    scope, x = _scope(np.int32)
    with pytest.raises(TypeError, match="not exactly representable as INT32"):
        scope.op.Mul(x, 0.5)


def test_explicit_numpy_literal_keeps_its_dtype():
    scope, x = _scope(np.float32)
    y = scope.op.Reshape(x, np.asarray([3, 1], dtype=np.int64))
    assert y.producer().inputs[1].const_value.numpy().dtype == np.int64


@pytest.mark.parametrize(
    ("op", "args", "attrs", "want"),
    [
        ("Shape", 1, {}, ir.DataType.INT64),
        ("Equal", 2, {}, ir.DataType.BOOL),
        ("ArgMax", 1, {}, ir.DataType.INT64),
        ("Cast", 1, {"to": int(ir.DataType.INT8)}, ir.DataType.INT8),
        ("Softmax", 1, {}, ir.DataType.FLOAT),
        ("Concat", 3, {"axis": 0}, ir.DataType.FLOAT),
    ],
)
def test_output_dtypes_come_from_the_schema(op, args, attrs, want):
    scope, x = _scope(np.float32)
    y = getattr(scope.op, op)(*([x] * args), **attrs)
    assert y.type.dtype == want


def test_topk_second_output_is_int64_and_where_follows_its_values():
    scope, x = _scope(np.float64)
    vals, idx = scope.op.TopK(x, np.asarray([2], np.int64), _outputs=2)
    assert vals.type.dtype == ir.DataType.DOUBLE and idx.type.dtype == ir.DataType.INT64
    w = scope.op.Where(scope.op.Less(x, 0.0), x, 1.5)
    assert w.type.dtype == ir.DataType.DOUBLE
    assert w.producer().inputs[2].const_value.numpy().dtype == np.float64


def _export_with(lowerings: Lowerings, fn, specs, **kw):
    class Pack:
        @hookimpl
        def jax2onnx_lowerings(self):
            return list(lowerings)

    with registry_in_use(("jax2onnx-apitest", Pack())):
        return to_onnx(fn, specs, **kw)


def test_context_helpers_cast_i64_and_dim_scalar():
    lowerings = Lowerings()
    seen = {}

    @lowerings.register("reduce_sum")
    def lower(ctx, x):
        seen["same"] = ctx.cast(x, ctx.avals_in[0].dtype) is x  # no node when the dtype matches
        total = ctx.op.ReduceSum(x, ctx.i64(list(ctx.params["axes"])), keepdims=0)
        n = ctx.dim_scalar(ctx.avals_in[0].shape[0], np.float32)  # the (symbolic) batch as a float
        return ctx.op.Add(total, ctx.op.Mul(n, 0.0))

    model = _export_with(lowerings, lambda x: jnp.sum(x, axis=0), [("B", 4)])
    assert seen["same"]
    ops = [n.op_type for n in model.graph.node]
    assert "Shape" in ops and "Cast" in ops  # the batch was read from the input in the graph
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    assert allclose(lambda x: jnp.sum(x, axis=0), model, [x])


def test_dtypes_facet_computes_in_a_carrier_and_casts_back():
    """``tan`` registered for float32/float64 only: a float16 operand is computed in float32."""
    lowerings = Lowerings()
    seen = []

    @lowerings.register("tan", dtypes=FLOAT_MATH)
    def lower_tan(ctx, x):
        seen.append(np.dtype(ctx.avals_in[0].dtype))
        return ctx.op.Tan(x)

    fn = lambda x: jnp.tan(x)  # noqa: E731
    model = _export_with(lowerings, fn, [jax.ShapeDtypeStruct((4,), jnp.float16)])
    assert seen == [np.dtype(np.float32)]
    assert [n.op_type for n in model.graph.node] == ["Cast", "Tan", "Cast"]
    assert model.graph.output[0].type.tensor_type.elem_type == 10  # FLOAT16, as JAX returns it
    x = np.linspace(-1, 1, 4).astype(np.float16)
    assert allclose(fn, model, [x], rtol=1e-3, atol=1e-3)


def test_complex_facet_picks_the_complex_variant():
    lowerings = Lowerings()

    def neg_pairs(ctx, x):  # complex as (re, im) pairs: negating both parts is complex negation
        return ctx.op.Neg(x)

    @lowerings.register("neg", complex=neg_pairs)
    def lower_neg(ctx, x):
        raise AssertionError("the real lowering must not see a complex operand")

    fn = lambda z: -z  # noqa: E731
    model = _export_with(lowerings, fn, [jax.ShapeDtypeStruct((3,), jnp.complex64)])
    assert [n.op_type for n in model.graph.node] == ["Neg"]


def test_carrier_rejects_what_no_wider_type_holds():
    assert carrier(np.int8, {np.dtype(np.int32)}) == np.int32
    with pytest.raises(NotImplementedError, match="no onnxruntime kernel for float64"):
        carrier(np.float64, {np.dtype(np.float32)})


def test_public_trace_time_predicates():
    assert is_array(np.zeros(2)) and is_array(jnp.zeros(2)) and not is_array(1.0)
    seen = []
    jax.eval_shape(lambda x: seen.append(x.shape[0]) or x, jax.ShapeDtypeStruct(jax.export.symbolic_shape("B"), jnp.float32))
    assert is_symbolic_dim(seen[0]) and is_symbolic_dim(2 * seen[0]) and not is_symbolic_dim(3)
    # replacements test arbitrary arguments (jnp.arange's bounds): other values are not dims
    assert not any(is_symbolic_dim(v) for v in (2.5, np.float32(1), None, "B", np.zeros(2), jnp.zeros(())))


# ---------------------------------------------------------------------------------------------
# Packs as objects


def test_misspelled_hook_is_reported_by_name():
    from jax2onnx.plugin import hookimpl as mark

    class Typo:
        @mark
        def jax2onnx_lowerngs(self):
            return []

    registry = PluginRegistry(entry_points=[], extra_plugins=[("jax2onnx-typo", Typo())])
    with pytest.warns(PackLoadWarning, match=r"'jax2onnx-typo' implements 'jax2onnx_lowerngs'.*misspelled"):
        registry.lowerings()


def test_pack_modules_is_the_whole_plugin(tmp_path, monkeypatch):
    pkg = tmp_path / "objpack"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "trig.py").write_text(
        "from jax2onnx.plugin import Lowerings\n"
        "lowerings = Lowerings()\n"
        "lowerings.add('sin', lambda ctx, x: ctx.op.Sin(x))\n"
        "lowering = Lowerings()  # a misspelling: never read\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = PackModules("objpack", ["trig"])
    registry = PluginRegistry(entry_points=[], extra_plugins=[("objpack", plugin)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = registry.lowerings()
    assert "sin" in table and table["sin"].pack == "objpack"
    assert any("objpack.trig.lowering" in str(w.message) for w in caught)


def test_pack_modules_read_testcases_only_when_components_are_asked_for(tmp_path, monkeypatch):
    pkg = tmp_path / "casepack"
    (pkg / "testcases").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "trig.py").write_text(
        "from jax2onnx.plugin import Lowerings\n"
        "lowerings = Lowerings()\n"
        "lowerings.add('sin', lambda ctx, x: ctx.op.Sin(x))\n"
    )
    (pkg / "testcases" / "__init__.py").write_text("")
    (pkg / "testcases" / "_shared.py").write_text("SHAPE = [('B', 3)]\n")
    (pkg / "testcases" / "trig.py").write_text(
        "import jax\n"
        "from jax2onnx.testing import Component, Testcase\n"
        "from ._shared import SHAPE\n"
        "components = [Component('casepack.sin', testcases=[Testcase('sin', jax.numpy.sin, SHAPE)])]\n"
    )
    (pkg / "testcases" / "more.py").write_text(
        "from jax2onnx.testing import Component\n"
        "components = [Component('casepack.more')]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = PackModules("casepack", ["trig"])
    registry = PluginRegistry(entry_points=[], extra_plugins=[("casepack", plugin)])

    assert "sin" in registry.lowerings()
    registry.module_patches()
    registry.adapt(object())
    assert not [m for m in sys.modules if m.startswith("casepack.testcases")]

    # Every public module of testcases/ (in name order); `_shared` is a helper, imported by them only.
    assert [c.name for _, c in registry.components()] == ["casepack.more", "casepack.sin"]
    assert "casepack.testcases.trig" in sys.modules

    # A pack without a testcases subpackage has no components.
    (tmp_path / "nocases").mkdir()
    (tmp_path / "nocases" / "__init__.py").write_text("")
    assert PackModules("nocases", []).jax2onnx_components() == []


def test_adapter_hook_first_answer_wins():
    class First:
        @hookimpl
        def jax2onnx_adapt_callable(self, fn):
            return None

    class Second:
        @hookimpl
        def jax2onnx_adapt_callable(self, fn):
            return "adapted"

    registry = PluginRegistry(entry_points=[], extra_plugins=[("a", First()), ("b", Second())])
    assert registry.adapt(object()) == "adapted"


def test_constant_of_shape_with_a_numpy_value_is_typed_as_onnx():
    scope, x = _scope(np.float32)
    y = scope.op.ConstantOfShape(np.asarray([0, 3], np.int64), value=np.zeros(1, np.float32))
    assert y.type.dtype == ir.DataType.FLOAT
