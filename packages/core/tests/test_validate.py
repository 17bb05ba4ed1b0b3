"""The final validation of every export (``jax2onnx.verification.validate``): a model the ONNX checker (full
check, strict shape inference) rejects, or one holding unused initializers, is an internal
:class:`InvalidModelError` naming the node and the lowering that made it, and nothing is written."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import InvalidModelError, Jax2OnnxError, to_onnx
from jax2onnx.plugin import Lowerings
from jax2onnx.verification.validate import validate_model
from mini_pack import MiniPack, pack_of, registry_in_use

_broken = Lowerings()


@_broken.register("sin", priority=1)
def _sin_as_bad_concat(ctx, x):
    return ctx.op.Concat(x, x, axis=5)  # axis 5 of a rank-2 tensor: strict shape inference rejects it


@_broken.register("cos", priority=1)
def _cos_leaving_a_constant(ctx, x):
    ctx.const(np.arange(7.0, dtype=np.float32))  # made and never read: an unused initializer
    return ctx.op.Cos(x)


@_broken.register("tan", priority=1)
def _tan_as_good_tan(ctx, x):
    return ctx.op.Tan(x)


@pytest.fixture
def broken_registry():
    with registry_in_use(("jax2onnx-mini", MiniPack()), ("jax2onnx-broken", pack_of(_broken))) as registry:
        yield registry


def _bad_sin(x):
    return jnp.tan(x) + jnp.sin(x) * 2.0  # the line the error must point at


def test_an_invalid_node_is_an_internal_error_naming_node_and_lowering(broken_registry, tmp_path):
    target = tmp_path / "model.onnx"
    with pytest.raises(InvalidModelError) as err:
        to_onnx(_bad_sin, [("B", 3)], output_path=str(target))
    text = str(err.value)
    assert isinstance(err.value, Jax2OnnxError)
    assert "internal error" in text and "(Concat)" in text
    assert "the lowering of 'sin' from jax2onnx-broken" in text
    assert "test_validate.py" in text and "_bad_sin" in text  # the user's line
    assert not target.exists() and list(tmp_path.iterdir()) == []  # nothing written, no temp left


def test_every_return_mode_validates(broken_registry):
    for mode in ("proto", "ir"):
        with pytest.raises(InvalidModelError):
            to_onnx(_bad_sin, [("B", 3)], return_mode=mode)


def test_an_unused_initializer_is_rejected(broken_registry):
    fn = lambda x: jnp.cos(x) + 1.0  # noqa: E731
    with pytest.raises(InvalidModelError, match="initializers no node reads"):
        to_onnx(fn, [("B", 3)], optimize=False)
    # With the passes, dead code removes it and the export is valid.
    model = to_onnx(fn, [("B", 3)])
    onnx.checker.check_model(model, full_check=True)
    assert not model.graph.initializer or all(i.name for i in model.graph.initializer)


def test_a_valid_model_passes_unchanged(broken_registry):
    model = to_onnx(lambda x: jnp.tan(x), [("B", 3)], return_mode="ir")
    before = ir.to_proto(model).SerializeToString()
    validate_model(model)
    assert ir.to_proto(model).SerializeToString() == before


def test_a_checker_error_names_the_node():
    """A node the checker rejects (Concat without its required axis) in a hand-built model: no
    lowering recorded it, so the error says a graph pass made it."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    concat = ir.node("Concat", [x, x], name="the_concat")
    concat.outputs[0].name = "y"
    concat.outputs[0].type, concat.outputs[0].shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape([6])
    model = ir.Model(ir.Graph([x], [concat.outputs[0]], nodes=[concat], opset_imports={"": 21}, name="g"), ir_version=10)
    with pytest.raises(InvalidModelError, match=r"node 'the_concat' \(Concat\), made by a graph pass"):
        validate_model(model)
