"""``jax.nn.softmax`` → Softmax, ``log_softmax`` → LogSoftmax, ``one_hot`` → OneHot,
``standardize`` → the ReduceMean chain JAX computes."""

from __future__ import annotations

import functools
import inspect

import jax
import numpy as np
from jax2onnx.dtypes import is_float
from jax2onnx.plugin import Lowerings, is_array

from ._common import is_static_int, is_static_number, mark, mark_name, normalize_axes, patches_for

lowerings = Lowerings()


def _call(original, x, **params):
    return original(x, **params)


# ---------------------------------------------------------------------------------------------
# softmax / log_softmax: one axis, no `where`


def _make_softmax(name, original):
    region = functools.partial(_call, original)

    @functools.wraps(original)
    def softmax(x, axis=-1, where=None, **kwargs):
        if is_array(x) and is_float(x.dtype) and is_static_int(axis) and where is None and not kwargs:
            ax = normalize_axes(axis, np.ndim(x))
            if ax is not None and len(ax) == 1:
                return mark(name, region, x, axis=ax[0])
        return original(x, axis=axis, where=where, **kwargs)

    return softmax


@lowerings.register_call(mark_name("softmax"))
def lower_softmax(ctx, x):
    return ctx.op.Softmax(x, axis=ctx.marked.params["axis"])


@lowerings.register_call(mark_name("log_softmax"))
def lower_log_softmax(ctx, x):
    return ctx.op.LogSoftmax(x, axis=ctx.marked.params["axis"])


# ---------------------------------------------------------------------------------------------
# one_hot


def _make_one_hot(name, original):
    region = functools.partial(_call, original)

    @functools.wraps(original)
    def one_hot(x, num_classes, *args, **kwargs):
        if (
            not args
            and is_array(x)
            and np.issubdtype(x.dtype, np.integer)
            and is_static_int(num_classes)
            and set(kwargs) <= {"dtype", "axis"}
            and is_static_int(kwargs.get("axis", -1))
        ):
            ndim = np.ndim(x) + 1
            axis = int(kwargs.get("axis", -1))
            if -ndim <= axis < ndim:
                params = {"num_classes": int(num_classes), "axis": axis % ndim}
                if kwargs.get("dtype") is not None:
                    params["dtype"] = kwargs["dtype"]
                return mark(name, region, x, **params)
        return original(x, num_classes, *args, **kwargs)

    return one_hot


@lowerings.register_call(mark_name("one_hot"))
def lower_one_hot(ctx, x):
    p = ctx.marked.params
    depth = np.asarray(p["num_classes"], dtype=np.int64)
    idx = ctx.cast(x, np.int64)
    # JAX compares with arange: a negative index matches nothing. ONNX counts negative indices
    # from the end, so they are moved out of range (to `depth`), where OneHot yields all zeros.
    idx = ctx.op.Where(ctx.op.Less(idx, 0), ctx.const(depth), idx)
    out_dtype = ctx.avals_out[0].dtype
    # onnxruntime's OneHot kernels take int64 indices with float32 or int64 values.
    values_dtype = np.float32 if np.dtype(out_dtype) == np.float32 else np.int64
    hot = ctx.op.OneHot(idx, ctx.const(depth), ctx.const(np.asarray([0, 1], dtype=values_dtype)), axis=p["axis"])
    return ctx.cast(hot, out_dtype)


# ---------------------------------------------------------------------------------------------
# standardize


def _make_standardize(name, original):
    region = functools.partial(_call, original)

    @functools.wraps(original)
    def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, **kwargs):
        algorithm = kwargs.get("algorithm", "fast")
        axes = normalize_axes(axis, np.ndim(x)) if is_array(x) else None
        if (
            axes
            and is_float(x.dtype)
            and mean is None
            and variance is None
            and where is None
            and is_static_number(epsilon)
            and set(kwargs) <= {"algorithm"}
            and algorithm in ("fast", "stable")
        ):
            params = {"axis": axes, "epsilon": float(epsilon)}
            if "algorithm" in kwargs:
                params["algorithm"] = algorithm
            return mark(name, region, x, **params)
        return original(x, axis, mean, variance, epsilon, where, **kwargs)

    return standardize


@lowerings.register_call(mark_name("standardize"))
def lower_standardize(ctx, x):
    p = ctx.marked.params
    axes = ctx.i64(p["axis"])
    mean = ctx.op.ReduceMean(x, axes, keepdims=1)
    centered = ctx.op.Sub(x, mean)
    algorithm = p.get("algorithm", "fast")
    if algorithm == "stable":
        var = ctx.op.ReduceMean(ctx.op.Mul(centered, centered), axes, keepdims=1)
    else:
        var = ctx.op.Sub(ctx.op.ReduceMean(ctx.op.Mul(x, x), axes, keepdims=1), ctx.op.Mul(mean, mean))
        if _jax_clips_fast_variance():
            var = ctx.op.Max(var, 0)
    denom = ctx.op.Sqrt(ctx.op.Add(var, float(p["epsilon"])))
    return ctx.op.Div(centered, denom)


@functools.cache
def _jax_clips_fast_variance() -> bool:
    # JAX added the clip of the "fast" variance (mean(x^2) - mean(x)^2 can come out slightly
    # negative) together with the `algorithm` parameter ("stable" = two-pass).
    return "algorithm" in inspect.signature(_ORIGINAL_STANDARDIZE).parameters


_ORIGINAL_STANDARDIZE = jax.nn.standardize

patches = (
    patches_for("jax.nn", ["softmax", "log_softmax"], _make_softmax)
    + patches_for("jax.nn", ["one_hot"], _make_one_hot)
    + patches_for("jax.nn", ["standardize"], _make_standardize)
)
