"""inputs_as_nchw / outputs_as_nchw on a channels-last conv stack: the boundary Transposes cancel
against the Conv's own layout Transposes, so the graph is the NCHW model with none left."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax import lax
from jax2onnx import to_onnx
from jax2onnx.verification.compare import run_onnx

_W1 = np.random.default_rng(0).standard_normal((3, 3, 3, 4)).astype(np.float32)  # HWIO
_W2 = np.random.default_rng(1).standard_normal((3, 3, 4, 5)).astype(np.float32)
_DN = ("NHWC", "HWIO", "NHWC")


def _cnn(x):
    y = lax.conv_general_dilated(x, _W1, (1, 1), "SAME", dimension_numbers=_DN)
    y = jax.nn.relu(y)
    return lax.conv_general_dilated(y, _W2, (1, 1), "SAME", dimension_numbers=_DN)


def _ops(model):
    return [n.op_type for n in model.graph.node]


@pytest.mark.parametrize("opset", [17, 23])
def test_nchw_io_around_nhwc_convs_leaves_no_transpose(opset):
    model = to_onnx(_cnn, [("B", 8, 8, 3)], opset=opset, inputs_as_nchw=[0], outputs_as_nchw=[0])
    onnx.checker.check_model(model, full_check=True)
    assert _ops(model) == ["Conv", "Relu", "Conv"]
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    assert dims(model.graph.input[0]) == ["B", 3, 8, 8] and dims(model.graph.output[0]) == ["B", 5, 8, 8]
    x = np.random.default_rng(2).standard_normal((2, 8, 8, 3)).astype(np.float32)
    (got,) = run_onnx(model, [x.transpose(0, 3, 1, 2)])
    np.testing.assert_allclose(got, np.asarray(_cnn(jnp.asarray(x))).transpose(0, 3, 1, 2), rtol=1e-4, atol=1e-4)


def test_nhwc_io_keeps_one_transpose_per_boundary():
    # Without the options the graph takes and returns NHWC: one Transpose at each side of the stack.
    assert _ops(to_onnx(_cnn, [("B", 8, 8, 3)])) == ["Transpose", "Conv", "Relu", "Conv", "Transpose"]


def test_only_outputs_as_nchw():
    model = to_onnx(_cnn, [(1, 8, 8, 3)], outputs_as_nchw=[0])
    assert _ops(model) == ["Transpose", "Conv", "Relu", "Conv"]
    assert model.graph.output[0].name == "output"
