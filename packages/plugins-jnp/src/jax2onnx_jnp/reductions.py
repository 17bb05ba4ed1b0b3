"""Reductions: ``mean``/``var``/``std`` → ReduceMean, ``logsumexp`` → ReduceLogSumExp,
``linalg.norm`` → ReduceL2 / ReduceL1, ``cumsum`` → CumSum, and ``sum``/``max``/``min``/``prod``
with ``keepdims=True`` → one Reduce* with ``keepdims=1`` (without keepdims they are single lax
reductions already, lowered by the lax pack)."""

from __future__ import annotations

import functools

import numpy as np
from jax2onnx.dtypes import HALF_FLOATS, is_float
from jax2onnx.plugin import Lowerings, is_array

from ._common import is_static_int, mark, mark_name, normalize_axes, patches_for

lowerings = Lowerings()


def _call(original, x, **params):
    return original(x, **params)


def _plain_float(x) -> bool:
    return is_array(x) and is_float(x.dtype) and np.ndim(x) >= 1


# ---------------------------------------------------------------------------------------------
# sum / max / min / prod with keepdims


_KEEPDIMS_OPS = {"sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin", "prod": "ReduceProd"}


def _make_keepdims_reduction(name, original):
    region = functools.partial(_call, original)

    @functools.wraps(original)
    def reduction(a, axis=None, *args, **kwargs):
        # Only the positional (a, axis) form plus keepdims=True; dtype/out/initial/where decline.
        axes = normalize_axes(axis, np.ndim(a)) if _plain_float(a) and not args else None
        if axes and set(kwargs) == {"keepdims"} and kwargs["keepdims"] is True:
            return mark(f"{name}_keepdims", region, a, axis=axes, keepdims=True)
        return original(a, axis, *args, **kwargs)

    return reduction


def _keepdims_lowering(op_type):
    def lower(ctx, x):
        return getattr(ctx.op, op_type)(x, ctx.i64(ctx.marked.params["axis"]), keepdims=1)

    lower.__name__ = f"lower_{op_type.lower()}_keepdims"
    return lower


for _name, _op in _KEEPDIMS_OPS.items():
    lowerings.register_call(mark_name(f"{_name}_keepdims"))(_keepdims_lowering(_op))


# ---------------------------------------------------------------------------------------------
# mean / var / std


def _make_moment(name, original):
    region = functools.partial(_call, original)

    @functools.wraps(original)
    def moment(a, axis=None, *args, **kwargs):
        axes = normalize_axes(axis, np.ndim(a)) if _plain_float(a) and not args else None
        allowed = {"keepdims"} | ({"ddof"} if name != "mean" else set())
        if not axes or not set(kwargs) <= allowed:
            return original(a, axis, *args, **kwargs)
        keepdims, ddof = kwargs.get("keepdims", False), kwargs.get("ddof", 0)
        if not isinstance(keepdims, bool) or not is_static_int(ddof):
            return original(a, axis, *args, **kwargs)
        params = {"axis": axes, "keepdims": keepdims}
        if name != "mean":
            params["ddof"] = int(ddof)
        return mark(name, region, a, **params)

    return moment


def _count(ctx, axes):
    """Number of reduced elements, as a float scalar of the output dtype (symbolic dims included)."""
    shape = ctx.avals_in[0].shape
    dtype = ctx.avals_out[0].dtype
    if all(isinstance(shape[a], (int, np.integer)) for a in axes):
        return ctx.const(np.prod([shape[a] for a in axes]), dtype)
    size = ctx.op.ReduceProd(ctx.shape_tensor([shape[a] for a in axes]), keepdims=0)
    return ctx.cast(size, dtype)


def _variance(ctx, x):
    p = ctx.marked.params
    axes = ctx.i64(p["axis"])
    keep = int(p["keepdims"])
    centered = ctx.op.Sub(x, ctx.op.ReduceMean(x, axes, keepdims=1))
    squares = ctx.op.Mul(centered, centered)
    if p["ddof"] == 0:
        return ctx.op.ReduceMean(squares, axes, keepdims=keep)
    # JAX divides the sum of squares by (n - ddof).
    n = ctx.op.Sub(_count(ctx, p["axis"]), int(p["ddof"]))
    return ctx.op.Div(ctx.op.ReduceSum(squares, axes, keepdims=keep), n)


@lowerings.register_call(mark_name("mean"))
def lower_mean(ctx, x):
    p = ctx.marked.params
    return ctx.op.ReduceMean(x, ctx.i64(p["axis"]), keepdims=int(p["keepdims"]))


@lowerings.register_call(mark_name("var"))
def lower_var(ctx, x):
    return _variance(ctx, x)


@lowerings.register_call(mark_name("std"))
def lower_std(ctx, x):
    return ctx.op.Sqrt(_variance(ctx, x))


# ---------------------------------------------------------------------------------------------
# logsumexp


def _make_logsumexp(name, original):
    region = functools.partial(_call, original)

    @functools.wraps(original)
    def logsumexp(a, axis=None, *args, **kwargs):
        axes = normalize_axes(axis, np.ndim(a)) if _plain_float(a) and not args else None
        keepdims = kwargs.get("keepdims", False)
        if axes and set(kwargs) <= {"keepdims", "b", "return_sign", "where"} and isinstance(keepdims, bool) and all(
            kwargs.get(k) in (None, False) for k in ("b", "return_sign", "where")
        ):
            return mark("logsumexp", region, a, axis=axes, keepdims=keepdims)
        return original(a, axis, *args, **kwargs)

    return logsumexp


@lowerings.register_call(mark_name("logsumexp"))
def lower_logsumexp(ctx, x):
    # onnxruntime's ReduceLogSumExp subtracts the maximum first, and gives -inf/inf where JAX does.
    p = ctx.marked.params
    return ctx.op.ReduceLogSumExp(x, ctx.i64(p["axis"]), keepdims=int(p["keepdims"]))


# ---------------------------------------------------------------------------------------------
# linalg.norm


def _norm_region(original, x, ord, axis, keepdims, _reduce):
    # `_reduce` is recorded for the lowering only.
    return original(x, ord, axis, keepdims)


def _make_norm(name, original):
    region = functools.partial(_norm_region, original)

    @functools.wraps(original)
    def norm(x, ord=None, axis=None, keepdims=False):
        if _plain_float(x) and isinstance(keepdims, bool) and (ord is None or isinstance(ord, (int, str))):
            axes = normalize_axes(axis, np.ndim(x))
            # axis=None: numpy flattens for ord=None, and treats 1-D as a vector, 2-D as a matrix.
            vector = axes is not None and (len(axes) == 1 or (axis is None and ord is None))
            matrix = axes is not None and len(axes) == 2 and (axis is not None or np.ndim(x) == 2)
            reduce = None
            if vector and (ord is None or ord == 2):
                reduce = "ReduceL2"  # a flattened array with ord=None is also the 2-norm
            elif vector and ord == 1 and len(axes) == 1:
                reduce = "ReduceL1"
            elif matrix and ord in (None, "fro"):
                reduce = "ReduceL2"  # Frobenius
            if reduce is not None:
                return mark("linalg_norm", region, x, ord=ord, axis=axis, keepdims=keepdims, _reduce=reduce)
        return original(x, ord, axis, keepdims)

    return norm


@lowerings.register_call(mark_name("linalg_norm"))
def lower_linalg_norm(ctx, x):
    p = ctx.marked.params
    axes = normalize_axes(p["axis"], len(ctx.avals_in[0].shape))
    return getattr(ctx.op, p["_reduce"])(x, ctx.i64(axes), keepdims=int(p["keepdims"]))


# ---------------------------------------------------------------------------------------------
# cumsum


def _make_cumsum(name, original):
    region = functools.partial(_call, original)

    @functools.wraps(original)
    def cumsum(a, axis=None, dtype=None, out=None):
        if is_array(a) and np.ndim(a) >= 1 and dtype is None and out is None and a.dtype != np.bool_:
            if axis is None:
                return mark("cumsum", region, a, axis=None)
            ax = normalize_axes(axis, np.ndim(a)) if is_static_int(axis) else None
            if ax is not None:
                return mark("cumsum", region, a, axis=ax[0])
        return original(a, axis, dtype, out)

    return cumsum


@lowerings.register_call(mark_name("cumsum"))
def lower_cumsum(ctx, x):
    if np.dtype(ctx.avals_in[0].dtype) not in ctx.kernel_dtypes("CumSum", without=HALF_FLOATS):
        return None  # no CumSum kernel for it (small and unsigned ints): the lax body uses a carrier
    axis = ctx.marked.params["axis"]
    if axis is None:  # numpy semantics: the flattened array
        x = ctx.op.Reshape(x, ctx.i64([-1]))
        axis = 0
    return ctx.op.CumSum(x, ctx.i64(axis))


patches = (
    patches_for("jax.numpy", list(_KEEPDIMS_OPS), _make_keepdims_reduction)
    + patches_for("jax.numpy", ["mean", "var", "std"], _make_moment)
    + patches_for("jax.nn", ["logsumexp"], _make_logsumexp)
    + patches_for("jax.scipy.special", ["logsumexp"], _make_logsumexp, reexports=())
    + patches_for("jax.numpy.linalg", ["norm"], _make_norm, reexports=())
    + patches_for("jax.numpy", ["cumsum"], _make_cumsum)
)
