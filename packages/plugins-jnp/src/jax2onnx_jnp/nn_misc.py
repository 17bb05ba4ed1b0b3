"""``jax.nn.softmax`` → Softmax, ``log_softmax`` → LogSoftmax, ``one_hot`` → OneHot,
``standardize`` → the ReduceMean chain JAX computes.

Found in the trace (``Lowerings.register_library``), no ``jax.nn`` attribute replaced: ``log_softmax``
and ``standardize`` by their ``jit`` equation, ``one_hot`` by the jit of its inner ``_one_hot``,
``softmax`` (a plain function) by the equations its call emits. The parameters are read back from
the body (the reduction's axes, the iota's dimension, literal operands) and verified by core."""

from __future__ import annotations

import functools
import inspect

import jax
import numpy as np
from jax2onnx.dtypes import is_float
from jax2onnx.plugin import Lowerings

from ._common import is_static_int

lowerings = Lowerings()


def _one_axis(site):
    """``{"axis": a}`` for a softmax-like body reducing over one axis (its ``reduce_max``)."""
    if len(site.operands) != 1 or not is_float(site.avals_in[0].dtype):
        return None
    maxes = site.eqns("reduce_max")
    axes = tuple(int(a) for a in maxes[0].params["axes"]) if maxes else ()
    return {"axis": axes[0]} if len(axes) == 1 else None  # several axes: no single ONNX op


@lowerings.register_library("jax.nn.softmax", recognize=_one_axis)
def lower_softmax(ctx, x):
    return ctx.op.Softmax(x, axis=ctx.marked.params["axis"])


@lowerings.register_library("jax.nn.log_softmax", recognize=_one_axis)
def lower_log_softmax(ctx, x):
    return ctx.op.LogSoftmax(x, axis=ctx.marked.params["axis"])


# ---------------------------------------------------------------------------------------------
# one_hot


def recognize_one_hot(site):
    """``_one_hot(x, num_classes, dtype=, axis=)``: the classes run along the iota's dimension."""
    (iota,) = site.eqns("iota")
    out = site.avals_out[0]
    axis = int(iota.params["dimension"])
    if len(site.operands) != 1 or not np.issubdtype(site.avals_in[0].dtype, np.integer) or not is_static_int(out.shape[axis]):
        return None
    return {"num_classes": int(out.shape[axis]), "axis": axis, "dtype": np.dtype(out.dtype)}


# jax.nn.one_hot is a plain function checking its arguments around this jitted one
@lowerings.register_library("jax._src.nn.functions:_one_hot", recognize=recognize_one_hot)
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


_STANDARDIZE = inspect.signature(jax.nn.standardize).parameters


def recognize_standardize(site):
    """``standardize(x, axis, epsilon=, algorithm=)`` without ``mean``/``variance``/``where``: the axes
    are the first reduction's; ``epsilon`` is an operand when the caller gave one; the "fast"
    algorithm squares the input itself, the "stable" one its deviation from the mean."""
    x = site.body.jaxpr.invars[0]
    if not 1 <= len(site.operands) <= 2 or not is_float(site.avals_in[0].dtype):
        return None
    params = {"axis": tuple(int(a) for a in site.eqns("reduce_sum")[0].params["axes"])}
    if len(site.operands) == 2:
        epsilon = site.literal(1)
        if epsilon is None:
            return None
        params["epsilon"] = float(epsilon)
    if "algorithm" in _STANDARDIZE:
        fast = any(e.invars[0] is x for e in site.eqns("square", "integer_pow"))
        params["algorithm"] = "fast" if fast else "stable"
    return params


@lowerings.register_library("jax.nn.standardize", recognize=recognize_standardize)
def lower_standardize(ctx, x):
    p = {"epsilon": _STANDARDIZE["epsilon"].default, **ctx.marked.params}  # a default is no operand
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
    return "algorithm" in _STANDARDIZE
