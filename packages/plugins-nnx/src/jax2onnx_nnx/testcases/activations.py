"""Testcases of :mod:`jax2onnx_nnx.activations` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import fused_budget, model


def _signed(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Values across [-6, 6], so both sides of every kink and the clipping ranges are reached."""
    return rng.uniform(-6.0, 6.0, size=shape).astype(dtype)


def _nnx(name: str, **kw: Any) -> Callable[..., Any]:
    """``nnx.<name>`` looked up at call time (a reference taken earlier would bypass the patch)."""
    return lambda x: getattr(nnx, name)(x, **kw)


def _case(name: str, fn: Callable[..., Any], shape: Any, ops: tuple[str, ...], f64_kernel: bool,
          **kw: Any) -> Testcase:
    """Assert ``ops`` in every export when onnxruntime runs them in float64, else in float32 only
    (the float64 export takes the exact decomposition)."""
    f64 = {} if f64_kernel else {"expected_ops_f64": ()}
    return Testcase(name, fn, [shape], expected_ops=list(ops), **f64, input_generator=_signed, **kw)


def _component(name: str, op: str, cases: list[Testcase], since: str = "v0.1.0") -> Component:
    return Component(name=f"nnx.{name}", onnx=[op], since=since, testcases=cases)


def _prelu_cases() -> list[Component]:
    if not hasattr(nnx, "PReLU"):  # flax < 0.11
        return []
    prelu = model(lambda: nnx.PReLU(negative_slope_init=0.1), low=0.05, high=0.3)
    return [_component("prelu", "PRelu", [
        Testcase("prelu", factory=prelu, input_shapes=[("B", 4, 3)], expected_ops=["PRelu"], expected_ops_f64=(), check=fused_budget(max_nodes=1),
                 input_generator=_signed),
    ], since="v0.7.0")]


components = [
    _component("relu", "Relu", [
        _case("relu_1d", _nnx("relu"), (5,), ("Relu",), True, max_nodes=1),
        _case("relu_4d", _nnx("relu"), ("B", 3, 4, 2), ("Relu",), True, max_nodes=1),
    ]),
    _component("gelu", "Gelu", [
        _case("gelu", _nnx("gelu", approximate=False), (4, 3), ("Gelu",), False),
        _case("gelu_1", _nnx("gelu"), (4, 3), ("Gelu",), False),
        _case("gelu_2", _nnx("gelu", approximate=True), (2, 3, 4, 2), ("Gelu",), False),
        _case("gelu_3", _nnx("gelu", approximate=False), ("B", 10), ("Gelu",), False),
    ]),
    _component("elu", "Elu", [_case("elu", _nnx("elu"), ("B", 5), ("Elu",), False)]),
    _component("leaky_relu", "LeakyRelu", [
        _case("leaky_relu", _nnx("leaky_relu", negative_slope=0.1), ("B", 5), ("LeakyRelu",), False),
    ]),
    _component("sigmoid", "Sigmoid", [_case("sigmoid", _nnx("sigmoid"), ("B", 5), ("Sigmoid",), True, max_nodes=1)]),
    _component("softplus", "Softplus", [_case("softplus", _nnx("softplus"), ("B", 5), ("Softplus",), False)]),
    _component("tanh", "Tanh", [_case("tanh", _nnx("tanh"), ("B", 5), ("Tanh",), True, max_nodes=1)]),
    _component("softmax", "Softmax", [
        _case("softmax", _nnx("softmax"), ("B", 6), ("Softmax",), True, forbidden_ops=["ReduceMax", "Exp"],
              max_nodes=1),
        _case("softmax_axis0", _nnx("softmax", axis=0), ("B", 3), ("Softmax",), True, max_nodes=1),
    ]),
    _component("log_softmax", "LogSoftmax", [
        _case("log_softmax", _nnx("log_softmax"), ("B", 6), ("LogSoftmax",), True, forbidden_ops=["Log"],
              max_nodes=1),
    ]),
    _component("relu6", "Clip", [_case("nnx_relu6", _nnx("relu6"), ("B", 5), ("Clip",), True, max_nodes=1)],
               since="v0.7.0"),
    _component("hard_tanh", "Clip", [_case("nnx_hard_tanh", _nnx("hard_tanh"), ("B", 5), ("Clip",), True)],
               since="v0.7.0"),
    _component("silu", "Sigmoid", [
        _case("nnx_silu", _nnx("silu"), ("B", 5), ("Sigmoid", "Mul"), True, max_nodes=2),
        _case("nnx_swish", _nnx("swish"), ("B", 5), ("Sigmoid", "Mul"), True, max_nodes=2),
    ], since="v0.7.0"),
    _component("celu", "Celu", [_case("nnx_celu", _nnx("celu"), ("B", 5), ("Celu",), False)], since="v0.7.0"),
    _component("selu", "Selu", [_case("nnx_selu", _nnx("selu"), ("B", 5), ("Selu",), False)], since="v0.7.0"),
    _component("hard_sigmoid", "HardSigmoid", [
        _case("nnx_hard_sigmoid", _nnx("hard_sigmoid"), ("B", 5), ("HardSigmoid",), False),
    ], since="v0.7.0"),
    _component("hard_swish", "HardSwish", [
        _case("nnx_hard_swish", _nnx("hard_swish"), ("B", 5), ("HardSwish",), False),
        _case("nnx_hard_silu", _nnx("hard_silu"), ("B", 5), ("HardSwish",), False),
    ], since="v0.7.0"),
    # Functions without a single ONNX op of their own: numbers only, through their decompositions.
    Component(name="nnx.activations_other", onnx=[], since="v0.7.0", testcases=[
        _case("nnx_log_sigmoid", _nnx("log_sigmoid"), ("B", 5), (), True),
        _case("nnx_soft_sign", _nnx("soft_sign"), ("B", 5), (), True),
        _case("nnx_glu", _nnx("glu"), ("B", 6), (), True),
        _case("nnx_logsumexp", _nnx("logsumexp", axis=-1), ("B", 6), (), True),
        _case("nnx_standardize", _nnx("standardize"), ("B", 6), (), True),
    ]),
    *_prelu_cases(),
]
