"""A symbolic dim known only through a sum with another (a mask of ``past + sequence`` beside a
static cache buffer): core solves it from that axis's size."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
from jax2onnx import to_onnx


def test_dim_only_inside_a_sum_is_solved():
    def fn(ids, mask):
        past = mask.shape[1] - ids.shape[1]  # the symbol "P", which no input has on its own
        return ids + jnp.arange(past, dtype=jnp.int32).sum() + jnp.zeros((past,), jnp.int32).shape[0]

    specs = [jax.ShapeDtypeStruct(("B", "S"), jnp.int32), jax.ShapeDtypeStruct(("B", "P + S"), jnp.int32)]
    model = to_onnx(fn, specs)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString())
    for s, p in [(3, 0), (2, 5), (1, 9)]:
        ids = np.arange(2 * s, dtype=np.int32).reshape(2, s)
        mask = np.ones((2, p + s), np.int32)
        (got,) = sess.run(None, {sess.get_inputs()[0].name: ids, sess.get_inputs()[1].name: mask})
        np.testing.assert_array_equal(got, np.asarray(fn(ids, mask)))
