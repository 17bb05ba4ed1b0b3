"""AutoEncoder example: a Dense encoder to a small code and a Dense decoder back."""

from __future__ import annotations

import jax
from flax import nnx
from jax2onnx.testing import Component, Testcase


class Encoder(nnx.Module):
    def __init__(self, features: int, hidden: int, code: int, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(features, hidden, rngs=rngs)
        self.code = nnx.Linear(hidden, code, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.code(nnx.relu(self.hidden(x)))


class Decoder(nnx.Module):
    def __init__(self, code: int, hidden: int, features: int, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(code, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, features, rngs=rngs)

    def __call__(self, z: jax.Array) -> jax.Array:
        return nnx.sigmoid(self.out(nnx.relu(self.hidden(z))))


class AutoEncoder(nnx.Module):
    def __init__(self, features: int = 16, hidden: int = 8, code: int = 2, *, rngs: nnx.Rngs):
        self.encoder = Encoder(features, hidden, code, rngs=rngs)
        self.decoder = Decoder(code, hidden, features, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.decoder(self.encoder(x))

    def encode(self, x: jax.Array) -> jax.Array:
        return self.encoder(x)


components = [
    Component(
        name="AutoEncoder",
        kind="example",
        description="A simple autoencoder example.",
        onnx=["Gemm", "Relu", "Sigmoid"],
        since="v0.2.0",
        testcases=[
            Testcase("simple_autoencoder", factory=lambda: AutoEncoder(rngs=nnx.Rngs(0)), input_shapes=[("B", 16)]),
        ],
    )
]
