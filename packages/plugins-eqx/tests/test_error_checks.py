"""equinox's error checks: runtime checks leave no node, trace-time-known failures still raise."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
from jax2onnx import to_onnx


def test_a_check_that_fails_at_trace_time_raises_at_export():
    def f(x):
        return eqx.error_if(x, True, "the model was configured wrongly")  # a static predicate

    with pytest.raises(Exception, match="the model was configured wrongly"):
        to_onnx(f, [(3,)])


def test_a_runtime_check_is_dropped_and_the_graph_returns_the_unchecked_value():
    def f(x):
        return eqx.error_if(x * 2.0, x < 0, "negative input")

    model = to_onnx(f, [("B", 3)])
    assert [n.op_type for n in model.graph.node] == ["Mul"]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([[-1.0, 2.0, 3.0]], dtype=np.float32)  # would fail the check in JAX
    (y,) = sess.run(None, {model.graph.input[0].name: x})
    np.testing.assert_array_equal(y, x * 2.0)
    # JAX itself still checks (the patch is only active while exporting).
    with pytest.raises(Exception, match="negative input"):
        eqx.filter_jit(f)(jnp.asarray(x))
