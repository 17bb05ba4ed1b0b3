"""CNN example: two Conv + ReLU + average-pool stages, then two Dense layers (MNIST-sized input)."""

from __future__ import annotations

import jax
from flax import nnx
from jax2onnx.testing import Component, Testcase

from ._common import small_normal_init

#: float64 convolutions take the lax decomposition (onnxruntime has no double Conv kernel).
CONV = {"expected_ops": ["Conv"], "expected_ops_f64": ()}


class CNN(nnx.Module):
    """A small LeNet-style CNN for 28x28x1 images (channels kept small so tests stay fast)."""

    def __init__(self, *, channels: tuple[int, int] = (4, 8), hidden: int = 32, rngs: nnx.Rngs):
        c1, c2 = channels
        self.conv1 = nnx.Conv(1, c1, kernel_size=(3, 3), kernel_init=small_normal_init, rngs=rngs)
        self.conv2 = nnx.Conv(c1, c2, kernel_size=(3, 3), kernel_init=small_normal_init, rngs=rngs)
        self.linear1 = nnx.Linear(7 * 7 * c2, hidden, rngs=rngs)
        self.linear2 = nnx.Linear(hidden, 10, kernel_init=small_normal_init, rngs=rngs)

    @staticmethod
    def pool(x: jax.Array) -> jax.Array:
        return nnx.avg_pool(x, window_shape=(2, 2), strides=(2, 2))

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.pool(nnx.relu(self.conv1(x)))
        x = self.pool(nnx.relu(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)
        x = nnx.relu(self.linear1(x))
        return self.linear2(x)


def _cnn() -> CNN:
    return CNN(rngs=nnx.Rngs(0))


components = [
    Component(
        name="CNN",
        kind="example",
        description="A simple convolutional neural network (CNN).",
        onnx=["Conv", "Relu", "AveragePool", "Reshape", "Gemm"],
        since="v0.1.0",
        testcases=[
            Testcase("simple_cnn_explicit_dimensions", factory=_cnn, input_shapes=[(3, 28, 28, 1)], **CONV),
            Testcase("simple_cnn", factory=_cnn, input_shapes=[("B", 28, 28, 1)], **CONV),
        ],
    )
]
