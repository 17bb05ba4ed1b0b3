"""``jnp.where`` → Where, ``jnp.select`` → a chain of Where, ``jnp.clip`` → Clip; ``jnp.add`` is
``lax.add`` (documented and tested here, lowered by the lax pack).

ONNX Where/Clip broadcast like numpy, so the broadcasts and dtype conversions JAX spells out
around ``select_n``/``max``/``min`` disappear. Python scalars among the operands are recorded as
static params and become constants of the result dtype.
"""

from __future__ import annotations

import functools

import numpy as np
from jax2onnx.plugin import Lowerings, is_array

from ._common import is_static_number, mark, mark_name, patches_for

lowerings = Lowerings()


def _split_operands(args):
    """(arrays, consts): the array operands, and ``(position, value)`` for each static scalar.
    None when an operand is neither."""
    arrays, consts = [], []
    for i, a in enumerate(args):
        if is_array(a):
            arrays.append(a)
        elif is_static_number(a) or isinstance(a, bool):
            consts.append((i, a))
        else:
            return None
    return arrays, tuple(consts)


def _merge_operands(arrays, consts, n):
    out, it, fixed = [], iter(arrays), dict(consts)
    for i in range(n):
        out.append(fixed[i] if i in fixed else next(it))
    return out


def _operand_values(ctx, inputs, consts, n, dtypes):
    """The lowering's view of the operands: graph values, constants for the static scalars, each
    converted to ``dtypes[i]``."""
    fixed = dict(consts)
    it = iter(inputs)
    out = []
    for i in range(n):
        if i in fixed:
            out.append(ctx.const(fixed[i], dtypes[i]))
        else:
            out.append(ctx.cast(next(it), dtypes[i]))
    return out


# ---------------------------------------------------------------------------------------------
# where


def _where_region(original, *arrays, consts):
    return original(*_merge_operands(arrays, consts, 3))


def _make_where(name, original):
    region = functools.partial(_where_region, original)

    @functools.wraps(original)
    def where(condition, x=None, y=None, /, **kwargs):
        split = _split_operands([condition, x, y]) if x is not None and y is not None and not kwargs else None
        if split is not None and split[0]:
            arrays, consts = split
            return mark("where", region, *arrays, consts=consts)
        if x is None and y is None:
            return original(condition, **kwargs)
        return original(condition, x, y, **kwargs)

    return where


@lowerings.register_call(mark_name("where"))
def lower_where(ctx, *inputs):
    # JAX tests a non-bool condition with `!= 0`, which is what a Cast to bool does.
    out = ctx.avals_out[0].dtype
    cond, x, y = _operand_values(ctx, inputs, ctx.marked.params["consts"], 3, [np.bool_, out, out])
    return ctx.op.Where(cond, x, y)


# ---------------------------------------------------------------------------------------------
# select: the first true condition picks its choice, else the default


def _select_region(original, *arrays, n, consts):
    ops = _merge_operands(arrays, consts, 2 * n + 1)
    return original(ops[:n], ops[n : 2 * n], ops[2 * n])


def _make_select(name, original):
    region = functools.partial(_select_region, original)

    @functools.wraps(original)
    def select(condlist, choicelist, default=0):
        if isinstance(condlist, (list, tuple)) and isinstance(choicelist, (list, tuple)) and condlist:
            n = len(condlist)
            split = _split_operands([*condlist, *choicelist, default]) if len(choicelist) == n else None
            if split is not None and all(is_array(c) and c.dtype == np.bool_ for c in condlist):
                arrays, consts = split
                return mark("select", region, *arrays, n=n, consts=consts)
        return original(condlist, choicelist, default)

    return select


@lowerings.register_call(mark_name("select"))
def lower_select(ctx, *inputs):
    n = ctx.marked.params["n"]
    out = ctx.avals_out[0].dtype
    ops = _operand_values(ctx, inputs, ctx.marked.params["consts"], 2 * n + 1, [np.bool_] * n + [out] * (n + 1))
    result = ops[2 * n]
    for cond, choice in reversed(list(zip(ops[:n], ops[n : 2 * n], strict=True))):
        result = ctx.op.Where(cond, choice, result)
    return result


# ---------------------------------------------------------------------------------------------
# clip


def _clip_region(original, *arrays, consts):
    x, lo, hi = _merge_operands(arrays, consts, 3)
    return original(x, lo, hi)


def _make_clip(name, original):
    region = functools.partial(_clip_region, original)

    @functools.wraps(original)
    def clip(arr=None, /, min=None, max=None, **kwargs):
        # ONNX Clip takes scalar bounds; array bounds (and the deprecated a_min/a_max) decline.
        bounds_ok = all(b is None or (np.ndim(b) == 0 and (is_array(b) or is_static_number(b))) for b in (min, max))
        if is_array(arr) and bounds_ok and not kwargs:
            consts = tuple((i, b) for i, b in ((1, min), (2, max)) if not is_array(b))
            arrays = [a for a in (arr, min, max) if is_array(a)]
            return mark("clip", region, *arrays, consts=consts)
        return original(arr, min, max, **kwargs)

    return clip


@lowerings.register_call(mark_name("clip"))
def lower_clip(ctx, *inputs):
    dtype = ctx.avals_out[0].dtype
    if np.dtype(ctx.avals_in[0].dtype) != np.dtype(dtype):
        return None  # JAX promoted x (e.g. int x, float bounds): the body says how
    consts = dict(ctx.marked.params["consts"])
    it = iter(inputs)
    x = next(it)
    bounds = []
    for i in (1, 2):
        if i in consts:
            bounds.append(None if consts[i] is None else ctx.const(consts[i], dtype))
        else:
            bounds.append(ctx.cast(next(it), dtype))
    return ctx.op.Clip(x, *bounds)


patches = (
    patches_for("jax.numpy", ["where"], _make_where)
    + patches_for("jax.numpy", ["select"], _make_select)
    + patches_for("jax.numpy", ["clip"], _make_clip)
)
