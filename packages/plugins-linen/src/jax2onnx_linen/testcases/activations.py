"""Testcases of :mod:`jax2onnx_linen.activations` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from flax import linen as nn
from jax2onnx.testing import Component, Testcase

from ._testing import applied, float32_ops


def _signed(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Values across [-6, 6], so both sides of every kink are reached."""
    return rng.uniform(-6.0, 6.0, size=shape).astype(dtype)


def _act(name: str, **kw: Any) -> Callable[[Any], Any]:
    return lambda x: getattr(nn, name)(x, **kw)  # looked up at call time, as model code does


class _DropoutMLP(nn.Module):
    """Dense → Dropout → Dense with the flag passed at the call, as Linen models pass ``train``."""

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dropout(0.5, deterministic=not train)(nn.relu(nn.Dense(8)(x)))
        return nn.Dense(3)(x)


components = [
    Component(
        name="linen.activations",
        onnx=["Relu", "Gelu", "Sigmoid", "Softmax", "Tanh"],
        since="v0.1.0",
        description="flax.linen's re-exports of jax.nn forwarded to the jnp pack's lowerings",
        testcases=[
            Testcase("linen_relu", _act("relu"), [("B", 6)], input_generator=_signed, expected_ops=["Relu"],
                     max_nodes=1),
            # Gelu has no float64 onnxruntime kernel: the float64 export is the decomposition.
            Testcase("linen_gelu", _act("gelu"), [("B", 6)], input_generator=_signed,
                     check=float32_ops("Gelu", max_nodes=1)),
            Testcase("linen_gelu_exact", _act("gelu", approximate=False), [("B", 6)], input_generator=_signed,
                     check=float32_ops("Gelu", max_nodes=1)),
            Testcase("linen_sigmoid", _act("sigmoid"), [("B", 6)], input_generator=_signed,
                     expected_ops=["Sigmoid"], max_nodes=1),
            Testcase("linen_softmax", _act("softmax"), [("B", 6)], input_generator=_signed,
                     expected_ops=["Softmax"], max_nodes=1),
            Testcase("linen_tanh", _act("tanh"), [("B", 6)], input_generator=_signed, expected_ops=["Tanh"]),
            Testcase("linen_leaky_relu", _act("leaky_relu", negative_slope=0.1), [("B", 6)],
                     input_generator=_signed),
        ],
    ),
    Component(
        name="linen.dropout",
        onnx=[],
        since="v0.1.0",
        description="deterministic dropout is the identity: no node",
        testcases=[
            Testcase("linen_dropout_deterministic",
                     factory=applied(lambda: nn.Dropout(0.3, deterministic=True), (1, 6)),
                     input_shapes=[("B", 6)], forbidden_ops=["Dropout", "RandomUniformLike"], max_nodes=1),
            Testcase("linen_dropout_in_mlp_eval", factory=applied(_DropoutMLP, (1, 6), low=-1.0, high=1.0),
                     input_shapes=[("B", 6)], expected_ops=["Gemm", "Relu"], forbidden_ops=["Dropout"], max_nodes=3),
        ],
    ),
]
