"""``jax.nn`` activation functions → the ONNX activation op of the same name.

One table: each entry says which ONNX op expresses the JAX function exactly and which keyword
parameters become attributes. The calls are found in the trace (``Lowerings.register_library``):
the jitted functions by their ``jit`` equation, ``gelu`` (a plain function) by its equations'
traceback; no ``jax.nn`` attribute is ever replaced. Where the target onnxruntime has no exact
kernel of the op for the dtype at the export's opset (jax2onnx.ir.runtime: none before the op's
opset, Elu, Selu, Softplus, Mish, ... have no float64
kernel, Gelu's float64 one computes in float32), the region declines and the lax decomposition is
lowered instead, so the graph still runs and matches JAX.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax2onnx.dtypes import HALF_FLOATS, is_float
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()

# jax.nn.selu's constants (ONNX's Selu defaults are the same numbers rounded to float32).
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@dataclasses.dataclass(frozen=True)
class Activation:
    emit: Callable[..., Any]  # (ctx, x, dtype, **params) -> value
    op: str  # the ONNX op the reader sees
    params: tuple[tuple[str, Any], ...] = ()  # static keyword parameters and their defaults
    #: the parameters (and fixed constants) the op reads as float attributes, which ONNX stores in
    #: float32: with a float64 operand a value float32 cannot hold exactly would make the op inexact
    #: (leaky_relu's 0.01), so the lax decomposition is exported instead
    attributes: tuple[str, ...] = ()
    constants: tuple[float, ...] = ()


def _gelu(ctx, x, dtype, approximate):
    return ctx.op.Gelu(x, approximate="tanh" if approximate else "none")


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(lambda ctx, x, dt: ctx.op.Relu(x), "Relu"),
    "relu6": Activation(lambda ctx, x, dt: ctx.op.Clip(x, 0, 6), "Clip"),
    "hard_tanh": Activation(lambda ctx, x, dt: ctx.op.Clip(x, -1, 1), "Clip"),
    "sigmoid": Activation(lambda ctx, x, dt: ctx.op.Sigmoid(x), "Sigmoid"),
    "silu": Activation(lambda ctx, x, dt: ctx.op.Mul(x, ctx.op.Sigmoid(x)), "Sigmoid"),
    "swish": Activation(lambda ctx, x, dt: ctx.op.Mul(x, ctx.op.Sigmoid(x)), "Sigmoid"),
    "gelu": Activation(_gelu, "Gelu", params=(("approximate", True),)),
    "softplus": Activation(lambda ctx, x, dt: ctx.op.Softplus(x), "Softplus"),
    "elu": Activation(lambda ctx, x, dt, alpha: ctx.op.Elu(x, alpha=float(alpha)), "Elu",
                      params=(("alpha", 1.0),), attributes=("alpha",)),
    "celu": Activation(lambda ctx, x, dt, alpha: ctx.op.Celu(x, alpha=float(alpha)), "Celu",
                       params=(("alpha", 1.0),), attributes=("alpha",)),
    "selu": Activation(lambda ctx, x, dt: ctx.op.Selu(x, alpha=_SELU_ALPHA, gamma=_SELU_SCALE), "Selu",
                       constants=(_SELU_ALPHA, _SELU_SCALE)),
    "leaky_relu": Activation(lambda ctx, x, dt, negative_slope: ctx.op.LeakyRelu(x, alpha=float(negative_slope)),
                             "LeakyRelu", params=(("negative_slope", 0.01),),
                             attributes=("negative_slope",)),
    # jax.nn.hard_sigmoid(x) = relu6(x + 3) / 6 = clip(x / 6 + 1 / 2, 0, 1)
    "hard_sigmoid": Activation(lambda ctx, x, dt: ctx.op.HardSigmoid(x, alpha=1.0 / 6.0, beta=0.5), "HardSigmoid"),
    "hard_silu": Activation(lambda ctx, x, dt: ctx.op.HardSwish(x), "HardSwish"),
    "hard_swish": Activation(lambda ctx, x, dt: ctx.op.HardSwish(x), "HardSwish"),
    "mish": Activation(lambda ctx, x, dt: ctx.op.Mish(x), "Mish"),
}


def _recognize(name: str, spec: Activation) -> Callable[[Any], Any]:
    """The parameters of a call of ``jax.nn.<name>`` (a jit equation): a parameter the caller
    passed is an operand after ``x`` (a literal when it is a constant; a computed one declines),
    one left at its default is not passed at all."""
    names = [p for p, _ in spec.params]

    def recognize(site):
        if not is_float(site.avals_in[0].dtype) or len(site.operands) > 1 + len(names):
            return None
        params = {}
        for i, pname in enumerate(names[: len(site.operands) - 1], start=1):
            value = site.literal(i)
            if value is None:
                return None
            params[pname] = float(value)
        return params

    return recognize


def _recognize_gelu(site):
    """``jax.nn.gelu`` is a plain function (its region: the equations of the call): the tanh form
    computes ``tanh``, the exact one ``erf``/``erfc``."""
    if len(site.operands) != 1 or not is_float(site.avals_in[0].dtype):
        return None
    ops = {e.primitive.name for e in site.eqns()}
    if "tanh" in ops:
        return {"approximate": True}
    return {"approximate": False} if ops & {"erf", "erfc"} else None


def _lowering(name: str, spec: Activation) -> Callable[..., Any]:
    def lower(ctx, x):
        dtype = ctx.avals_out[0].dtype
        # float16/bfloat16 keep the lax decomposition: XLA computes their math in float32
        if np.dtype(dtype) not in ctx.kernel_dtypes(spec.op, without=HALF_FLOATS):
            return None
        params = {**dict(spec.params), **ctx.marked.params}  # a default is not in the call
        if np.dtype(dtype) == np.float64:
            values = [params.get(n) for n in spec.attributes] + list(spec.constants)
            if any(v is not None and float(np.float32(v)) != float(v) for v in values):
                return None
        return spec.emit(ctx, x, dtype, **params)

    lower.__name__ = f"lower_{name}"
    return lower


# One registration per function object: ``jax.nn.swish`` is ``silu``, ``hard_swish`` is ``hard_silu``,
# and ``flax.nnx``/``flax.linen`` re-export these very objects, so each key covers every name.
# ``sigmoid`` is an inlined jit (a single ``logistic``, lowered to Sigmoid by the lax pack).
for _name, _spec in ACTIVATIONS.items():
    if _name in ("swish", "hard_swish", "sigmoid") or not hasattr(jax.nn, _name):
        continue
    _recognizer = _recognize_gelu if _name == "gelu" else _recognize(_name, _spec)
    lowerings.register_library(f"jax.nn.{_name}", recognize=_recognizer, elementwise=True)(_lowering(_name, _spec))
