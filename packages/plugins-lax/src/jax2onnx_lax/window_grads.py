"""lax ``select_and_scatter_add``: the gradient of max/min pooling (``jax.grad`` through
``reduce_window_max``) → ``MaxPool`` indices + ``ScatterElements(reduction="add")``.

Each window picks the position of its maximum (``select_prim=ge``; ``le``, a minimum, is the
maximum of ``-x``) and the source value of that window is added there. MaxPool's second output is
exactly that position, as a flat index into its ``[N, C, spatial...]`` input that ignores padding,
and both pick the first of equal elements. Padding must be static or SAME: explicit padding of a
symbolic size would shift the indices.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from .conv import is_symbolic_same
from .windows import PoolLayout

lowerings = Lowerings()


@lowerings.register("select_and_scatter_add")
def lower_select_and_scatter_add(ctx, source, operand):
    p = ctx.params
    select = getattr(p["select_prim"], "name", str(p["select_prim"]))
    if select not in ("ge", "le", "gt", "lt"):
        raise NotImplementedError(f"select_and_scatter_add with select_prim={select}")
    window = [int(w) for w in p["window_dimensions"]]
    strides = [int(s) for s in p["window_strides"]]
    padding = [tuple(d if not isinstance(d, (int, np.integer)) else int(d) for d in pair) for pair in p["padding"]]
    shape = list(ctx.avals_in[1].shape)
    src_shape = list(ctx.avals_in[0].shape)
    rank = len(shape)

    auto_pad = is_symbolic_same(shape, window, strides, padding)
    if not auto_pad and not all(isinstance(d, int) and d >= 0 for pair in padding for d in pair):
        raise NotImplementedError("select_and_scatter_add with negative or non-SAME symbolic padding")
    moving = [a for a in range(rank) if window[a] != 1 or strides[a] != 1 or (not auto_pad and padding[a] != (0, 0))]
    if not moving:  # every window is one element: each source value lands on its own position
        return ctx.op.Identity(source)
    layout = PoolLayout(rank, moving)
    x = layout.to_nc(ctx, operand, shape)
    if select in ("le", "lt"):
        x = ctx.op.Neg(x)
    attrs = {"kernel_shape": [window[a] for a in moving], "strides": [strides[a] for a in moving]}
    if auto_pad:
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = [padding[a][0] for a in moving] + [padding[a][1] for a in moving]
    _, where = ctx.op.MaxPool(x, _outputs=2, **attrs)

    flat = np.asarray([-1], dtype=np.int64)
    src = ctx.op.Reshape(layout.to_nc(ctx, source, src_shape), flat)
    zeros = ctx.op.ConstantOfShape(ctx.op.Reshape(ctx.op.Size(x), flat),
                                   value=np.zeros(1, dtype=np.dtype(ctx.avals_out[0].dtype)))
    summed = ctx.op.ScatterElements(zeros, ctx.op.Reshape(where, flat), src, axis=0, reduction="add")
    return layout.from_nc(ctx, ctx.op.Reshape(summed, ctx.op.Shape(x)), shape)
