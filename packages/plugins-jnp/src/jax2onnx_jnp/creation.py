"""``jnp.arange`` → Range when a bound is a symbolic dimension (``jnp.arange(x.shape[0])``);
with static bounds it is a constant, folded at export. ``jnp.linspace`` needs a static ``num`` in
JAX, so it is a constant too (static bounds) or an iota-based computation (traced bounds).

JAX cannot trace ``jnp.arange`` with array-valued (data-dependent) bounds: the result's length
must be known while tracing. The seed's "concrete_input_val" cases therefore pass concrete values.
"""

from __future__ import annotations

import functools

from jax2onnx.plugin import Lowerings, is_symbolic_dim

from ._common import is_static_int, mark, mark_name, patches_for

lowerings = Lowerings()


def _arange_region(original, *, start, stop, step, dtype):
    return original(start, stop, step, dtype=dtype)


def _make_arange(name, original):
    region = functools.partial(_arange_region, original)

    @functools.wraps(original)
    def arange(start, stop=None, step=None, dtype=None, **kwargs):
        bounds = (start, stop, step)
        symbolic = any(is_symbolic_dim(b) for b in bounds)
        if symbolic and not kwargs and all(b is None or is_static_int(b) or is_symbolic_dim(b) for b in bounds):
            return mark("arange", region, start=start, stop=stop, step=step, dtype=dtype)
        return original(start, stop, step, dtype=dtype, **kwargs)

    return arange


def _scalar(ctx, value, dtype):
    if is_symbolic_dim(value):
        return ctx.dim_scalar(value, dtype)
    return ctx.const(value, dtype)


@lowerings.register_call(mark_name("arange"))
def lower_arange(ctx):
    p = ctx.marked.params
    dtype = ctx.avals_out[0].dtype
    start, stop, step = p["start"], p["stop"], p["step"]
    if stop is None:  # arange(n) counts from 0
        start, stop = 0, start
    step = 1 if step is None else step
    # ONNX Range yields max(ceil((limit - start) / delta), 0) elements, numpy's count.
    return ctx.op.Range(_scalar(ctx, start, dtype), _scalar(ctx, stop, dtype), _scalar(ctx, step, dtype))


patches = patches_for("jax.numpy", ["arange"], _make_arange)
