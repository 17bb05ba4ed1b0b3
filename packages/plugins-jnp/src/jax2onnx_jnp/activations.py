"""``jax.nn`` activation functions → the ONNX activation op of the same name.

One table: each entry says which ONNX op expresses the JAX function exactly, from which opset,
and which static keyword parameters become attributes. Where onnxruntime has no exact float64 kernel
for the op (Gelu, Elu, Selu, Softplus, Mish, ... are float32-only there), a float64 export declines and
the lax decomposition is lowered instead, so the graph still runs and matches JAX.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax2onnx.fusion import call_in_vmaps
from jax2onnx.plugin import Lowerings, is_array

from ._common import is_f64, is_float, is_static_number, mark, mark_name, patches_for

lowerings = Lowerings()

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

# jax.nn.selu's constants (ONNX's Selu defaults are the same numbers rounded to float32).
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@dataclasses.dataclass(frozen=True)
class Activation:
    emit: Callable[..., Any]  # (ctx, x, dtype, **params) -> value
    op: str  # the ONNX op the reader sees
    params: tuple[tuple[str, Any], ...] = ()  # static keyword parameters and their defaults
    min_opset: int = 1
    f64: bool = True  # onnxruntime has a float64 kernel


def _gelu(ctx, x, dtype, approximate):
    return ctx.op.Gelu(x, approximate="tanh" if approximate else "none")


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(lambda ctx, x, dt: ctx.op.Relu(x), "Relu"),
    "relu6": Activation(lambda ctx, x, dt: ctx.op.Clip(x, 0, 6), "Clip"),
    "hard_tanh": Activation(lambda ctx, x, dt: ctx.op.Clip(x, -1, 1), "Clip"),
    "sigmoid": Activation(lambda ctx, x, dt: ctx.op.Sigmoid(x), "Sigmoid"),
    "silu": Activation(lambda ctx, x, dt: ctx.op.Mul(x, ctx.op.Sigmoid(x)), "Sigmoid"),
    "swish": Activation(lambda ctx, x, dt: ctx.op.Mul(x, ctx.op.Sigmoid(x)), "Sigmoid"),
    # float64: onnxruntime expands Gelu with float32 constants (tanh form) or lacks Erf (exact form)
    "gelu": Activation(_gelu, "Gelu", params=(("approximate", True),), min_opset=20, f64=False),
    "softplus": Activation(lambda ctx, x, dt: ctx.op.Softplus(x), "Softplus", f64=False),
    "elu": Activation(lambda ctx, x, dt, alpha: ctx.op.Elu(x, alpha=float(alpha)), "Elu",
                      params=(("alpha", 1.0),), f64=False),
    "celu": Activation(lambda ctx, x, dt, alpha: ctx.op.Celu(x, alpha=float(alpha)), "Celu",
                       params=(("alpha", 1.0),), min_opset=12, f64=False),
    "selu": Activation(lambda ctx, x, dt: ctx.op.Selu(x, alpha=_SELU_ALPHA, gamma=_SELU_SCALE), "Selu", f64=False),
    "leaky_relu": Activation(lambda ctx, x, dt, negative_slope: ctx.op.LeakyRelu(x, alpha=float(negative_slope)),
                             "LeakyRelu", params=(("negative_slope", 0.01),), f64=False),
    # jax.nn.hard_sigmoid(x) = relu6(x + 3) / 6 = clip(x / 6 + 1 / 2, 0, 1)
    "hard_sigmoid": Activation(lambda ctx, x, dt: ctx.op.HardSigmoid(x, alpha=1.0 / 6.0, beta=0.5), "HardSigmoid",
                               f64=False),
    "hard_silu": Activation(lambda ctx, x, dt: ctx.op.HardSwish(x), "HardSwish", min_opset=14, f64=False),
    "hard_swish": Activation(lambda ctx, x, dt: ctx.op.HardSwish(x), "HardSwish", min_opset=14, f64=False),
    "mish": Activation(lambda ctx, x, dt: ctx.op.Mish(x), "Mish", min_opset=18, f64=False),
}


def _call_original(original, x, **params):
    return original(x, **params)


def _make_activation(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    spec = ACTIVATIONS[name]
    names = [p for p, _ in spec.params]
    region = functools.partial(_call_original, original)

    @functools.wraps(original)
    def activation(x, *args, **kwargs):
        params = dict(spec.params)
        ok = is_array(x) and is_float(x.dtype) and len(args) <= len(names) and set(kwargs) <= set(names)
        if ok:
            params.update(zip(names, args, strict=False))
            params.update(kwargs)
            ok = all(isinstance(v, bool) or is_static_number(v) for v in params.values())
        if ok:
            # Inside jax.vmap (an Equinox model applied to a batch) the region is made outside the
            # vmap on the batched x: the function is elementwise, so that is the vmap's result too,
            # and the fused op survives instead of JAX batching the region into its body.
            return call_in_vmaps(lambda xs, _k, _vmapped: mark(name, region, xs[0], **params), [x])
        return original(x, *args, **kwargs)

    return activation


def _lowering(name: str, spec: Activation) -> Callable[..., Any]:
    def lower(ctx, x):
        dtype = ctx.avals_out[0].dtype
        # float16/bfloat16 kernels are patchy in onnxruntime: those keep the lax decomposition.
        if np.dtype(dtype) not in _FLOATS or ctx.opset < spec.min_opset or (is_f64(dtype) and not spec.f64):
            return None
        return spec.emit(ctx, x, dtype, **ctx.marked.params)

    lower.__name__ = f"lower_{name}"
    return lower


for _name, _spec in ACTIVATIONS.items():
    lowerings.register_call(mark_name(_name))(_lowering(_name, _spec))

patches = patches_for("jax.nn", [n for n in ACTIVATIONS if hasattr(jax.nn, n)], _make_activation)
