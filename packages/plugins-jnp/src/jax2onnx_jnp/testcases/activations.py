"""Testcases of :mod:`jax2onnx_jnp.activations` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax2onnx.targets import default_target
from jax2onnx.testing import Component, Testcase

from ..activations import ACTIVATIONS, Activation
from .helpers import fused_in_float32, grad_of_sum, positive_and_negative


def _nn(name: str, **kw: Any) -> Callable[..., Any]:
    """``jax.nn.<name>`` called with ``kw``."""

    def call(x):
        return getattr(jax.nn, name)(x, **kw)

    return call


def _flax_nnx_gelu():
    from flax import nnx  # imported before the export, as in a user's model

    return lambda x: nnx.gelu(x, approximate=False)


def _cases(name: str, spec: Activation, since: str, extra: list[Testcase] = ()) -> Component:
    # float64 keeps the op where the installed onnxruntime runs it exactly in double (the default target's kernel table)
    exact_f64 = np.dtype(np.float64) in default_target().runtime().dtypes(spec.op)
    ops = {"expected_ops": [spec.op]} if exact_f64 else fused_in_float32(spec.op)
    cases = [
        Testcase(name, _nn(name), [("B", 5)], **ops, input_generator=positive_and_negative),
        Testcase(f"{name}_vmap", jax.vmap(_nn(name)), [("B", 2, 5)], input_generator=positive_and_negative),
        Testcase(f"{name}_grad", grad_of_sum(_nn(name)), [("B", 5)], input_generator=positive_and_negative,
                 rtol=1e-3, atol=1e-4),
        *extra,
    ]
    return Component(name=f"nn.{name}", onnx=[spec.op], since=since, testcases=cases)


components = [
    _cases("relu", ACTIVATIONS["relu"], "v0.7.0"),
    _cases("relu6", ACTIVATIONS["relu6"], "v0.7.0"),
    _cases("hard_tanh", ACTIVATIONS["hard_tanh"], "v0.7.0"),
    _cases("sigmoid", ACTIVATIONS["sigmoid"], "v0.7.0"),
    _cases("silu", ACTIVATIONS["silu"], "v0.7.0"),
    _cases("swish", ACTIVATIONS["swish"], "v0.7.0"),
    _cases("gelu", ACTIVATIONS["gelu"], "v0.7.0", [
        Testcase("gelu_exact", _nn("gelu", approximate=False), [("B", 5)], **fused_in_float32("Gelu"),
                 input_generator=positive_and_negative),
        Testcase("gelu_flax_nnx", factory=_flax_nnx_gelu, input_shapes=[("B", 5)], **fused_in_float32("Gelu"),
                 description="flax.nnx.gelu is jax.nn.gelu re-exported: the same library lowering covers it"),
    ]),
    _cases("softplus", ACTIVATIONS["softplus"], "v0.7.0", [
        Testcase("softplus_large", _nn("softplus"), input_values=[np.array([-1e4, -50.0, -1.0, 0.0, 1.0, 50.0, 1e4],
                                                                          np.float32)],
                 **fused_in_float32("Softplus"), description="no overflow for large |x|"),
    ]),
    _cases("elu", ACTIVATIONS["elu"], "v0.7.0", [
        Testcase("elu_alpha", _nn("elu", alpha=0.5), [("B", 5)], **fused_in_float32("Elu"),
                 input_generator=positive_and_negative),
    ]),
    _cases("celu", ACTIVATIONS["celu"], "v0.7.0", [
        Testcase("celu_alpha", _nn("celu", alpha=2.0), [("B", 5)], **fused_in_float32("Celu"),
                 input_generator=positive_and_negative),
    ]),
    _cases("selu", ACTIVATIONS["selu"], "v0.7.0"),
    _cases("leaky_relu", ACTIVATIONS["leaky_relu"], "v0.7.0", [
        Testcase("leaky_relu_slope", _nn("leaky_relu", negative_slope=0.2), [("B", 5)],
                 **fused_in_float32("LeakyRelu"), input_generator=positive_and_negative),
    ]),
    _cases("hard_sigmoid", ACTIVATIONS["hard_sigmoid"], "v0.7.0"),
    _cases("hard_swish", ACTIVATIONS["hard_swish"], "v0.7.0"),
    _cases("mish", ACTIVATIONS["mish"], "v0.7.0"),
]
