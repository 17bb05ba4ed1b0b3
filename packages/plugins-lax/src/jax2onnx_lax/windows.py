"""lax window reductions: ``reduce_window_{sum,max,min}`` and ``reduce_window`` with an add/mul/max/min body.

ONNX pools reduce the trailing axes of an ``[N, C, spatial...]`` tensor, so the axes the window
moves over are transposed to the end and the others become N and C (merged or inserted when there
are not exactly two); NHWC pooling therefore costs one Transpose at each side.

- max → ``MaxPool`` (its padding never wins, like lax's ``-inf``); min → ``-MaxPool(-x)``; a window
  holding a NaN is NaN, as in XLA (onnxruntime's MaxPool skips NaN: see ``jax2onnx.fusion.max_pool``);
- sum → ``AveragePool(count_include_pad=1) * window size`` (lax pads sums with zeros);
- where onnxruntime has no pooling kernel (integers, float64 AveragePool), a ``base_dilation``,
  or another body: one strided Slice per window tap of the padded input, combined with
  Sum/Max/Min/Mul. Exact, and fine for the small windows pooling uses.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.dtypes import is_bool, is_float
from jax2onnx.fusion import const_array, max_pool, max_pool_dtypes
from jax2onnx.plugin import Lowerings

from .conv import is_symbolic_same

lowerings = Lowerings()

_INT64_MAX = np.iinfo(np.int64).max
#: dtypes with onnxruntime MaxPool / AveragePool kernels.


def _identity(kind: str, dtype: np.dtype):
    if kind == "add":
        return np.zeros((), dtype)
    if kind == "mul":
        return np.ones((), dtype)
    if is_float(dtype):  # bfloat16 too (numpy's kind for it is "V")
        return np.asarray(-np.inf if kind == "max" else np.inf, dtype)
    if dtype == np.bool_:
        return np.asarray(kind == "min", dtype)
    info = np.iinfo(dtype)  # the lowest value, not -max: that is min + 1 for signed ints, and no uint
    return np.asarray(info.min if kind == "max" else info.max, dtype)


def _params(ctx):
    p = ctx.params
    rank = len(p["window_dimensions"])
    return (
        [int(w) for w in p["window_dimensions"]],
        [int(s) for s in p["window_strides"]],
        [(_int_or_symbolic(lo), _int_or_symbolic(hi)) for lo, hi in p["padding"]],
        [int(d) for d in (p.get("base_dilation") or (1,) * rank)],
        [int(d) for d in (p.get("window_dilation") or (1,) * rank)],
    )


def _int_or_symbolic(d):
    return int(d) if isinstance(d, (int, np.integer)) else d


def _is_int(d) -> bool:
    return isinstance(d, int)


def _pad_input(ctx, x, padding, fill):
    """Apply ``padding`` with ``fill``: negative static parts crop, symbolic ones (SAME padding of a
    symbolic dim, never negative) are computed in the graph."""
    crop = [(a, -lo if _is_int(lo) and lo < 0 else 0, hi if _is_int(hi) and hi < 0 else _INT64_MAX)
            for a, (lo, hi) in enumerate(padding) if (_is_int(lo) and lo < 0) or (_is_int(hi) and hi < 0)]
    if crop:
        x = ctx.op.Slice(x, ctx.i64([c[1] for c in crop]), ctx.i64([c[2] for c in crop]), ctx.i64([c[0] for c in crop]))
    pads = [lo if not _is_int(lo) else max(lo, 0) for lo, _ in padding]
    pads += [hi if not _is_int(hi) else max(hi, 0) for _, hi in padding]
    if any(not _is_int(q) or q for q in pads):
        x = ctx.op.Pad(x, ctx.shape_tensor(pads), fill)
    return x


class PoolLayout:
    """ONNX pools reduce the trailing axes of ``[N, C, spatial...]``: the window's moving axes go
    last, the others become N and C (merged, or a unit C inserted, when there are not two)."""

    def __init__(self, rank: int, moving: list[int]):
        self.rank = rank
        self.moving = moving
        self.kept = [a for a in range(rank) if a not in moving]
        self.perm = self.kept + moving

    def to_nc(self, ctx, x, shape):
        if self.perm != list(range(self.rank)):
            x = ctx.op.Transpose(x, perm=self.perm)
        if len(self.kept) != 2:
            x = ctx.op.Reshape(x, ctx.shape_tensor([-1 if self.kept else 1, 1, *(shape[a] for a in self.moving)]))
        return x

    def from_nc(self, ctx, y, shape):
        if len(self.kept) != 2:
            y = ctx.op.Reshape(y, ctx.shape_tensor([shape[a] for a in self.perm]))
        if self.perm != list(range(self.rank)):
            y = ctx.op.Transpose(y, perm=[int(i) for i in np.argsort(self.perm)])
        return y


def _pool(ctx, x, kind, window, strides, padding, wdil):
    """MaxPool/AveragePool over the moving axes, with the layout moves around it."""
    in_shape = list(ctx.avals_in[0].shape)
    out_shape = list(ctx.avals_out[0].shape)
    rank = len(in_shape)
    eff = [(w - 1) * d + 1 for w, d in zip(window, wdil, strict=True)]
    # onnxruntime rejects auto_pad together with dilation; those pad explicitly.
    auto_pad = all(d == 1 for d in wdil) and is_symbolic_same(in_shape, eff, strides, padding)
    if auto_pad:
        padding = [(0, 0) if w == 1 and s == 1 else (1, 1) for w, s in zip(window, strides, strict=True)]
    elif not all(_is_int(d) for pair in padding for d in pair):
        dtype = np.dtype(ctx.avals_in[0].dtype)
        x = _pad_input(ctx, x, padding, _identity(kind, dtype))
        in_shape = [s + lo + hi for s, (lo, hi) in zip(in_shape, padding, strict=True)]
        padding = [(0, 0)] * rank
    moving = [a for a in range(rank) if window[a] != 1 or strides[a] != 1 or padding[a] != (0, 0) or wdil[a] != 1]
    if not moving:
        return ctx.op.Identity(x)
    layout = PoolLayout(rank, moving)
    x = layout.to_nc(ctx, x, in_shape)
    attrs = {
        "kernel_shape": [window[a] for a in moving],
        "strides": [strides[a] for a in moving],
        "dilations": [wdil[a] for a in moving],
    }
    if auto_pad:
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = [padding[a][0] for a in moving] + [padding[a][1] for a in moving]
    if kind == "add":
        y = ctx.op.AveragePool(x, count_include_pad=1, **attrs)
        size = int(np.prod([window[a] for a in moving]))
        y = ctx.op.Mul(y, np.asarray(size, dtype=ctx.avals_out[0].dtype))
    elif kind == "max":
        # XLA's max/min propagate NaN; onnxruntime's MaxPool skips it (max_pool puts NaN back)
        y = max_pool(ctx, x, ctx.avals_in[0].dtype, **attrs)
    else:
        y = ctx.op.Neg(max_pool(ctx, ctx.op.Neg(x), ctx.avals_in[0].dtype, **attrs))
    return layout.from_nc(ctx, y, out_shape)


def _dilate(ctx, x, shape, axis, d, fill):
    """Insert ``d-1`` copies of ``fill`` between neighbours along ``axis``."""
    x = ctx.op.Unsqueeze(x, ctx.i64([axis + 1]))
    pads = [0] * (2 * (len(shape) + 1))
    pads[len(shape) + 1 + axis + 1] = d - 1
    x = ctx.op.Pad(x, ctx.i64(pads), fill)
    shape = list(shape)
    shape[axis] = shape[axis] * d
    x = ctx.op.Reshape(x, ctx.shape_tensor(shape))
    x = ctx.op.Slice(x, ctx.i64([0]), ctx.i64([-(d - 1)]), ctx.i64([axis]))
    shape[axis] = shape[axis] - (d - 1)
    return x, shape


def _by_taps(ctx, x, kind, init, window, strides, padding, base, wdil):
    """Combine one strided Slice per window tap of the padded input (exact for every dtype)."""
    shape = list(ctx.avals_in[0].shape)
    dtype = np.dtype(ctx.avals_in[0].dtype)
    for axis, d in enumerate(base):
        if d > 1:
            x, shape = _dilate(ctx, x, shape, axis, d, init)
    x = _pad_input(ctx, x, padding, init)
    axes = list(range(len(window)))
    eff = [(w - 1) * d + 1 for w, d in zip(window, wdil, strict=True)]
    taps = []
    for tap in np.ndindex(*window):
        starts = [t * d for t, d in zip(tap, wdil, strict=True)]
        ends = [-(e - 1 - s) if e - 1 - s > 0 else _INT64_MAX for s, e in zip(starts, eff, strict=True)]
        taps.append(ctx.op.Slice(x, ctx.i64(starts), ctx.i64(ends), ctx.i64(axes), ctx.i64(strides)))
    if kind in ("max", "min") and is_bool(dtype):  # ONNX's Max/Min take no bool: any / all
        combine = ctx.op.Or if kind == "max" else ctx.op.And
        if not _is_identity(init, kind, dtype):
            taps.append(init)
        out = taps[0]
        for t in taps[1:]:
            out = combine(out, t)
    elif kind == "max":
        out = ctx.op.Max(*taps, init) if not _is_identity(init, kind, dtype) else ctx.op.Max(*taps)
    elif kind == "min":
        out = ctx.op.Min(*taps, init) if not _is_identity(init, kind, dtype) else ctx.op.Min(*taps)
    else:
        binary = "Add" if kind == "add" else "Mul"
        if kind == "add" and dtype.kind == "f" and len(taps) > 1:
            out = ctx.op.Sum(*taps)
        else:
            out = taps[0]
            for t in taps[1:]:
                out = getattr(ctx.op, binary)(out, t)
        if not _is_identity(init, kind, dtype):
            out = getattr(ctx.op, binary)(out, init)
    return out


def _is_identity(init, kind, dtype) -> bool:
    """``init`` is a numpy constant equal to the reduction's identity (a runtime value never is)."""
    return isinstance(init, np.ndarray) and bool(np.all(init == _identity(kind, dtype)))


def _lower_window(ctx, x, kind, init=None):
    window, strides, padding, base, wdil = _params(ctx)
    dtype = np.dtype(ctx.avals_in[0].dtype)
    native = max_pool_dtypes(ctx) if kind in ("max", "min") else ctx.kernel_dtypes("AveragePool") if kind == "add" else set()
    no_crop = all(not _is_int(d) or d >= 0 for pair in padding for d in pair)
    if init is None and dtype in native and all(b == 1 for b in base) and no_crop:
        return _pool(ctx, x, kind, window, strides, padding, wdil)
    return _by_taps(ctx, x, kind, _identity(kind, dtype) if init is None else init, window, strides, padding, base, wdil)


@lowerings.register("reduce_window_sum")
def lower_reduce_window_sum(ctx, x):
    return _lower_window(ctx, x, "add")


@lowerings.register("reduce_window_max")
def lower_reduce_window_max(ctx, x):
    return _lower_window(ctx, x, "max")


@lowerings.register("reduce_window_min")
def lower_reduce_window_min(ctx, x):
    return _lower_window(ctx, x, "min")


_BODY_KINDS = {"add": "add", "mul": "mul", "max": "max", "min": "min"}


@lowerings.register("reduce_window")
def lower_reduce_window(ctx, *operands):
    """Generic ``reduce_window``: one operand, a body that is a single add/mul/max/min."""
    closed = ctx.params["jaxpr"]
    jaxpr = getattr(closed, "jaxpr", closed)
    if len(operands) != 2 or len(jaxpr.eqns) != 1 or jaxpr.eqns[0].primitive.name not in _BODY_KINDS:
        body = ", ".join(e.primitive.name for e in jaxpr.eqns)
        raise NotImplementedError(f"reduce_window with {len(operands) // 2} operand(s) and body [{body}]: only a single "
                                  "add/mul/max/min over one operand is supported")
    x, init = operands
    kind = _BODY_KINDS[jaxpr.eqns[0].primitive.name]
    literal = const_array(init)
    if literal is not None:  # a literal init: the identity needs no extra op
        init = literal
        if _is_identity(init, kind, np.dtype(ctx.avals_in[0].dtype)):
            init = None
    return _lower_window(ctx, x, kind, init)
