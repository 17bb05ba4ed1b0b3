"""NNX modules whose call updates their own state export as written (training mode)."""

import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax2onnx import allclose, to_onnx


def test_training_mode_batchnorm_exports_and_leaves_the_model_untouched():
    model = nnx.Sequential(nnx.Linear(6, 4, rngs=nnx.Rngs(0)), nnx.BatchNorm(4, rngs=nnx.Rngs(1)))
    before = np.asarray(model.layers[1].mean.value).copy()
    onnx_model = to_onnx(model, [("B", 6)])
    np.testing.assert_array_equal(np.asarray(model.layers[1].mean.value), before)
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    # JAX in training mode normalises with the batch's statistics; so must the graph.
    got = allclose(lambda v: nnx.merge(*nnx.split(model))(jnp.asarray(v)), onnx_model, [x], rtol=1e-4, atol=1e-5)
    assert got, str(got)


def test_training_mode_dropout_becomes_an_onnx_dropout():
    model = nnx.Sequential(nnx.Linear(6, 4, rngs=nnx.Rngs(0)), nnx.Dropout(0.5, rngs=nnx.Rngs(1)))
    onnx_model = to_onnx(model, [("B", 6)])
    assert "Dropout" in {n.op_type for n in onnx_model.graph.node}
