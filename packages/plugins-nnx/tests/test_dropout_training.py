"""Dropout in training mode cannot be compared with JAX sample by sample: check its distribution."""

import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
from flax import nnx
from jax2onnx import to_onnx


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _check_dropped(x, y, rate):
    keep = 1.0 - rate
    zero = y == 0
    np.testing.assert_allclose(y[~zero], x[~zero] / keep, rtol=1e-6)
    assert abs(zero.mean() - rate) < 0.05, f"dropped fraction {zero.mean():.3f}, expected about {rate}"


def test_training_mode_export_is_a_training_dropout_and_leaves_the_module_usable():
    layer = nnx.Dropout(0.4, rngs=nnx.Rngs(0))  # deterministic=False: training mode
    model = to_onnx(layer, [("B", 1000)])
    assert [n.op_type for n in model.graph.node] == ["Dropout"]
    x = np.random.default_rng(0).uniform(1.0, 2.0, (3, 1000)).astype(np.float32)
    (y,) = _session(model).run(None, {model.graph.input[0].name: x})
    _check_dropped(x, y, 0.4)
    # The export did not consume the module's RNG stream inside the trace: it still runs in JAX.
    out = layer(jnp.ones((2, 1000)))
    assert out.shape == (2, 1000)


def test_runtime_flag_false_drops_true_passes_through():
    class Net(nnx.Module):
        def __init__(self):
            self.dropout = nnx.Dropout(0.25, rngs=nnx.Rngs(0))

        def __call__(self, x, deterministic):
            return self.dropout(x, deterministic=deterministic)

    model = to_onnx(Net(), [("B", 1000)], input_params={"deterministic": True})
    sess = _session(model)
    names = [i.name for i in model.graph.input]
    x = np.random.default_rng(1).uniform(1.0, 2.0, (4, 1000)).astype(np.float32)
    (y_eval,) = sess.run(None, {names[0]: x, names[1]: np.array(True)})
    np.testing.assert_array_equal(y_eval, x)
    (y_train,) = sess.run(None, {names[0]: x, names[1]: np.array(False)})
    _check_dropped(x, y_train, 0.25)
