"""A scan over a symbolic length run at length 0: onnxruntime's Scan fails over zero iterations
("Invalid dim0_offset of 0"), so the export branches on length == 0 and returns JAX's answer (the
carry and empty ys). The testcase runner runs symbolic variants only at sizes >= 2."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax import lax
from jax2onnx import compat, to_onnx


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_symbolic_scan_at_length_zero_matches_jax(double, reverse):
    def f(c0, xs):
        return lax.scan(lambda c, x: (c + x, (c * x, jnp.sum(x))), c0, xs, reverse=reverse)

    dtype = np.float64 if double else np.float32
    with compat.x64_enabled(double):
        model = to_onnx(f, [jax.ShapeDtypeStruct((3,), dtype), ("T", 3)], enable_double_precision=double)
        onnx.checker.check_model(model, full_check=True)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        for length in (0, 1, 4):
            c0, xs = rng.standard_normal(3).astype(dtype), rng.standard_normal((length, 3)).astype(dtype)
            got = sess.run(None, {sess.get_inputs()[0].name: c0, sess.get_inputs()[1].name: xs})
            want = jax.tree_util.tree_leaves(jax.jit(f)(c0, xs))
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype, (length, g.shape, w.shape, g.dtype, w.dtype)
                np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6, atol=1e-6)
