"""``jnp.where`` → Where, ``jnp.select`` → a chain of Where, ``jnp.clip`` → Clip; ``jnp.add`` is
``lax.add`` (documented and tested here, lowered by the lax pack).

ONNX Where/Clip broadcast like numpy, so the broadcasts and dtype conversions JAX spells out
around ``select_n``/``max``/``min`` disappear. Python scalars among the operands reach the trace as
literals; they are recorded as static params and become constants of the result dtype.

Found in the trace with nothing patched (:mod:`._library`): ``jnp.clip`` is jitted, ``jnp.where``
calls the jitted ``jax._src.numpy.util._where``, ``jnp.select`` is plain Python (its region is the
equations its call emits: a stack of the conditions, an argmax, one ``select_n``).
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from ._library import arg_names, call_by_name, literal_value, operand_values, split_operands

lowerings = Lowerings()


# ---------------------------------------------------------------------------------------------
# where


def recognize_where(site):
    """``_where(condition, x, y)``: which operands are arrays, the literal ones' values."""
    names = arg_names(site)
    if names != ("condition", "x", "y"):
        return None
    return split_operands(site, names)


@lowerings.register_library("jax._src.numpy.util:_where", recognize=recognize_where, call=call_by_name)
def lower_where(ctx, *inputs):
    # JAX tests a non-bool condition with `!= 0`, which is what a Cast to bool does.
    out = ctx.avals_out[0].dtype
    cond, x, y = operand_values(ctx, inputs, ("condition", "x", "y"), (np.bool_, out, out))
    if cond is None:
        return None
    return ctx.op.Where(cond, x, y)


# ---------------------------------------------------------------------------------------------
# select: the first true condition picks its choice, else the default


def _broadcast_literal(site, var):
    """The literal a ``broadcast_in_dim`` of the region fills ``var`` with, else None."""
    for e in site.eqns("broadcast_in_dim"):
        if e.outvars[0] is var and len(e.invars) == 1 and hasattr(e.invars[0], "val"):
            value = np.asarray(e.invars[0].val)
            if value.ndim == 0:
                return value.item() if getattr(e.invars[0].aval, "weak_type", False) else value[()]
    return None


def recognize_select(site):
    """``select(condlist, choicelist, default)`` from its ``select_n``: case 0 is the default (an
    operand, or a broadcast literal), cases 1.. the choices; the conditions are the region's bool
    operands (first used by the stack the argmax picks from)."""
    picks = site.eqns("select_n")
    if len(picks) != 1:
        return None
    pick = picks[0]
    index = {v: i for i, v in enumerate(site.operands)}
    choices = pick.invars[2:]
    conds = [i for i, a in enumerate(site.avals_in) if np.dtype(a.dtype) == np.bool_ and site.operands[i] not in choices]
    if not choices or len(conds) != len(choices) or any(v not in index for v in choices):
        return None
    order = conds + [index[v] for v in choices]
    params = {"n": len(choices)}
    default = pick.invars[1]
    if default in index:
        order.append(index[default])
    else:
        value = _broadcast_literal(site, default)
        if value is None:
            return None
        params["default"] = value
    if sorted(order) != list(range(len(site.operands))):
        return None
    return params, order


def call_select(original, arrays, params):
    n = params["n"]
    default = arrays[2 * n] if len(arrays) > 2 * n else params["default"]
    return original(list(arrays[:n]), list(arrays[n : 2 * n]), default)


@lowerings.register_library("jax.numpy.select", recognize=recognize_select, call=call_select)
def lower_select(ctx, *inputs):
    n = ctx.marked.params["n"]
    out = ctx.avals_out[0].dtype
    conds = [ctx.cast(c, np.bool_) for c in inputs[:n]]
    choices = [ctx.cast(c, out) for c in inputs[n : 2 * n]]
    result = ctx.cast(inputs[2 * n], out) if len(inputs) > 2 * n else ctx.const(ctx.marked.params["default"], out)
    for cond, choice in reversed(list(zip(conds, choices, strict=True))):
        result = ctx.op.Where(cond, choice, result)
    return result


# ---------------------------------------------------------------------------------------------
# clip


def recognize_clip(site):
    """``clip(arr, min, max)``: the bounds present (a bound left None is no operand), literal or
    array. ONNX's Clip takes scalar bounds: array bounds of rank > 0 decline."""
    names = arg_names(site)
    if not names or names[0] != "arr" or literal_value(site, 0) is not None or not set(names[1:]) <= {"min", "max"}:
        return None
    if any(len(a.shape) for a in site.avals_in[1:]):
        return None
    return split_operands(site, names)


@lowerings.register_library("jax.numpy.clip", recognize=recognize_clip, call=call_by_name)
def lower_clip(ctx, *inputs):
    dtype = ctx.avals_out[0].dtype
    if np.dtype(ctx.avals_in[0].dtype) != np.dtype(dtype):
        return None  # JAX promoted x (e.g. int x, float bounds): the body says how
    x, lo, hi = operand_values(ctx, inputs, ("arr", "min", "max"), (dtype, dtype, dtype))
    return ctx.op.Clip(x, lo, hi)
