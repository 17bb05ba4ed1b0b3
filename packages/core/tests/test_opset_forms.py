"""Lowerings write the newest form of an op; core emits the form valid at the export's opset, and a
fused op newer than the opset makes core lower the fused region's own body."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import allclose, to_onnx
from jax2onnx.ir.builder import ModelBuilder, OpUnavailableError
from jax2onnx.plugin import Lowerings, marked_call
from mini_pack import lowerings as mini_lowerings
from mini_pack import pack_of, registry_in_use


def _export(extra: Lowerings, fn, specs, **kw):
    with registry_in_use(("jax2onnx-opsettest", pack_of(mini_lowerings, extra))):
        return to_onnx(fn, specs, **kw)


def _scope(opset, shape=(4, 6)):
    mb = ModelBuilder(opset)
    return mb.main, mb.main.add_input("x", jax.ShapeDtypeStruct(shape, np.float32))


def test_reduce_axes_become_an_attribute_before_18():
    scope, x = _scope(17)
    node = scope.op.ReduceMax(x, np.asarray([1], np.int64), keepdims=0).producer()
    assert len(node.inputs) == 1 and list(node.attributes["axes"].value) == [1]
    scope, x = _scope(18)
    node = scope.op.ReduceMax(x, np.asarray([1], np.int64), keepdims=0).producer()
    assert len(node.inputs) == 2 and "axes" not in node.attributes


def test_split_num_outputs_becomes_sizes_before_18():
    scope, x = _scope(17, (4, 7))
    parts = scope.op.Split(x, axis=1, num_outputs=3, _outputs=3)
    sizes = parts[0].producer().inputs[1].const_value.numpy().tolist()
    assert sizes == [3, 3, 1]  # opset-18 semantics: ceil-sized chunks, the last one smaller


def test_an_op_newer_than_the_opset_is_refused_by_name():
    scope, x = _scope(17)
    with pytest.raises(OpUnavailableError, match="Gelu exists from opset 20; this export targets opset 17"):
        scope.op.Gelu(x)
    scope, x = _scope(20)
    scope.op.Gelu(x)
    scope, x = _scope(18)
    with pytest.raises(OpUnavailableError, match="GroupNormalization exists from opset 21"):  # -18 is another op
        scope.op.GroupNormalization(x, x, x, num_groups=1)


def _softplus_region(x):
    return marked_call("test.softplus", lambda y: jnp.log1p(jnp.exp(y)), x)


def test_fused_region_falls_back_to_its_body_when_the_op_is_newer():
    lowerings = Lowerings()

    @lowerings.register_call("test.softplus")
    def lower(ctx, x):
        ctx.op.Exp(x)  # emitted before the refusal: dead, removed by the passes
        return ctx.op.Gelu(x)  # pretend the fused op is opset-20 only

    lowerings.add("log1p", lambda ctx, x: ctx.op.Log(ctx.op.Add(x, 1.0)))  # the body's one primitive the mini pack lacks
    fused = _export(lowerings, _softplus_region, [(3,)], opset=20)
    assert [n.op_type for n in fused.graph.node] == ["Gelu"]
    model = _export(lowerings, _softplus_region, [(3,)], opset=17)
    onnx.checker.check_model(model, full_check=True)
    assert sorted(n.op_type for n in model.graph.node) == ["Add", "Exp", "Log"]
    x = np.linspace(-2, 2, 3).astype(np.float32)
    assert allclose(_softplus_region, model, [x])


def test_bool_reductions_go_through_uint8_before_20():
    scope, x = _scope(17)
    b = scope.op.Less(x, 0.0)
    y = scope.op.ReduceMax(b, np.asarray([1], np.int64), keepdims=0)
    assert y.type.dtype.name == "BOOL" and y.producer().op_type == "Cast"
    assert y.producer().inputs[0].producer().op_type == "ReduceMax"
    scope, x = _scope(20)
    y = scope.op.ReduceMax(scope.op.Less(x, 0.0), np.asarray([1], np.int64), keepdims=0)
    assert y.producer().op_type == "ReduceMax"
