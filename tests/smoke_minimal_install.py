"""Run in an environment with only jax2onnx-core + jax2onnx-nnx (and what nnx pulls in) installed."""

import importlib.util

import numpy as np
from flax import nnx
from jax2onnx import allclose, onnx_function, to_onnx  # noqa: F401 - the public API must import

assert importlib.util.find_spec("jax2onnx_examples") is None, "the minimal install must not need the examples pack"
model = nnx.Sequential(nnx.Linear(8, 16, rngs=nnx.Rngs(0)), nnx.relu, nnx.Linear(16, 4, rngs=nnx.Rngs(1)))
onnx_model = to_onnx(model, [("B", 8)])
x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
result = allclose(model, onnx_model, [x])
print(f"minimal install: {len(onnx_model.graph.node)} nodes, {result}")
assert result
