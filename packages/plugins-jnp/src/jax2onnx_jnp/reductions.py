"""Reductions: ``mean``/``var``/``std`` → ReduceMean, ``logsumexp`` → ReduceLogSumExp,
``linalg.norm`` → ReduceL2 / ReduceL1, ``cumsum`` → CumSum, and ``sum``/``max``/``min``/``prod``
with ``keepdims=True`` → one Reduce* with ``keepdims=1`` (max/min with the NaN check the lax
pack's reduce_max/reduce_min have; without keepdims they are single lax reductions already,
lowered by the lax pack).

Found in the trace with nothing patched (:mod:`._library`): ``jnp.linalg.norm`` and ``jnp.cumsum``
are jitted, ``jnp.var``/``jnp.std`` call the jitted ``_var``/``_std`` of ``jax._src.numpy.reductions``
(the ``ddof`` a literal operand); ``sum``/``max``/``min``/``prod``/``mean`` and ``logsumexp`` are
plain Python, their region the equations one call emits (a reduction and its keepdims broadcast, the
division by the count, logsumexp's max-shifted form). The axes come from the reduction's ``axes``,
``keepdims`` from the ranks.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.dtypes import HALF_FLOATS
from jax2onnx.plugin import Lowerings

from ._common import normalize_axes
from ._library import is_float_array, literal_value, one, reduced_axes

lowerings = Lowerings()


def _axis_params(site):
    """``{"axis": axes, "keepdims": bool}`` of a reduction region over a float array operand (the
    first), or None. Every axis reduced without keepdims is numpy's ``axis=None``."""
    if not site.avals_in or not is_float_array(site.avals_in[0]) or len(site.avals_out) != 1:
        return None
    axes = reduced_axes(site)
    if not axes:
        return None
    rank = len(site.avals_in[0].shape)
    keepdims = len(site.avals_out[0].shape) == rank
    if not keepdims and len(site.avals_out[0].shape) != rank - len(axes):
        return None
    return {"axis": None if not keepdims and axes == tuple(range(rank)) else axes, "keepdims": keepdims}


def _axes(ctx):
    """The recognized ``axis`` as sorted non-negative ints (None: every axis)."""
    return normalize_axes(ctx.marked.params["axis"], len(ctx.avals_in[0].shape))


def _only_array(site):
    return len(site.operands) == 1 and literal_value(site, 0) is None


# ---------------------------------------------------------------------------------------------
# sum / max / min / prod with keepdims


_KEEPDIMS_OPS = {"sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin", "prod": "ReduceProd"}


def recognize_keepdims_reduction(site):
    """``f(a, axis, keepdims=True)``: a reduction and the broadcast that puts the reduced axes back
    as size 1 (without keepdims the reduction alone is the lax pack's single Reduce*)."""
    params = _axis_params(site) if _only_array(site) else None
    return params if params is not None and params["keepdims"] else None


def _keepdims_lowering(op_type):
    def lower(ctx, x):
        axes = ctx.i64(ctx.marked.params["axis"])
        y = getattr(ctx.op, op_type)(x, axes, keepdims=1)
        if op_type in ("ReduceMax", "ReduceMin"):
            # XLA's max/min propagate NaN, onnxruntime's ReduceMax/ReduceMin drop it (the lax pack's
            # reduce_max/reduce_min check the same way)
            y = ctx.op.Where(ctx.op.ReduceMax(ctx.op.IsNaN(x), axes, keepdims=1), np.nan, y)
        return y

    lower.__name__ = f"lower_{op_type.lower()}_keepdims"
    return lower


for _name, _op in _KEEPDIMS_OPS.items():
    lowerings.register_library(f"jax.numpy.{_name}", recognize=recognize_keepdims_reduction)(_keepdims_lowering(_op))


# ---------------------------------------------------------------------------------------------
# mean / var / std


def recognize_mean(site):
    return _axis_params(site) if _only_array(site) else None


def recognize_moment(site):
    """``_var``/``_std(a, axis=, correction=, keepdims=)``: ``correction`` (numpy's ``ddof``) is the
    jit's literal operand; a traced one, ``where`` or ``a_mean`` decline."""
    if len(site.operands) != 2 or literal_value(site, 0) is not None:
        return None
    correction = literal_value(site, 1)
    if not isinstance(correction, (int, np.integer)) or isinstance(correction, (bool, np.bool_)):
        return None
    params = _axis_params(site)
    if params is None:
        return None
    return {**params, "correction": int(correction)}


def call_moment(original, arrays, params):
    return original(*arrays, **params)


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
    axes = ctx.i64(_axes(ctx))
    keep = int(p["keepdims"])
    centered = ctx.op.Sub(x, ctx.op.ReduceMean(x, axes, keepdims=1))
    squares = ctx.op.Mul(centered, centered)
    if p["correction"] == 0:
        return ctx.op.ReduceMean(squares, axes, keepdims=keep)
    # JAX divides the sum of squares by (n - ddof).
    n = ctx.op.Sub(_count(ctx, _axes(ctx)), int(p["correction"]))
    return ctx.op.Div(ctx.op.ReduceSum(squares, axes, keepdims=keep), n)


@lowerings.register_library("jax.numpy.mean", recognize=recognize_mean)
def lower_mean(ctx, x):
    return ctx.op.ReduceMean(x, ctx.i64(_axes(ctx)), keepdims=int(ctx.marked.params["keepdims"]))


@lowerings.register_library("jax._src.numpy.reductions:_var", recognize=recognize_moment, call=call_moment)
def lower_var(ctx, x):
    return _variance(ctx, x)


@lowerings.register_library("jax._src.numpy.reductions:_std", recognize=recognize_moment, call=call_moment)
def lower_std(ctx, x):
    return ctx.op.Sqrt(_variance(ctx, x))


# ---------------------------------------------------------------------------------------------
# logsumexp


def recognize_logsumexp(site):
    """``logsumexp(a, axis, keepdims)`` (no ``b``, ``where`` or ``return_sign``: those add operands
    or results)."""
    return _axis_params(site) if _only_array(site) else None


@lowerings.register_library("jax.nn.logsumexp", recognize=recognize_logsumexp)
def lower_logsumexp(ctx, x):
    # onnxruntime's ReduceLogSumExp subtracts the maximum first, and gives -inf/inf where JAX does.
    return ctx.op.ReduceLogSumExp(x, ctx.i64(_axes(ctx)), keepdims=int(ctx.marked.params["keepdims"]))


# ---------------------------------------------------------------------------------------------
# linalg.norm


def recognize_norm(site):
    """``norm(x, ord, axis, keepdims)`` for the forms that are one Reduce: the 2-norm (and
    Frobenius; ``sqrt(sum(x * x))``) and the 1-norm of vectors (``sum(abs(x))``)."""
    if not _only_array(site) or site.eqns("reduce_max", "reduce_min", "reduce_prod"):
        return None
    params = _axis_params(site)
    if params is None:
        return None
    rank = len(site.avals_in[0].shape)
    if site.eqns("sqrt") and site.eqns("mul"):
        order = None
    elif site.eqns("abs") and not site.eqns("sqrt") and len(params["axis"]) == 1:
        order = 1
    else:
        return None
    axis = params["axis"]
    if axis is None and order is not None and rank != 1:
        axis = tuple(range(rank))  # numpy's axis=None with an ord: a vector (1-D) norm only
    return {"ord": order, "axis": axis, "keepdims": params["keepdims"]}


@lowerings.register_library("jax.numpy.linalg.norm", recognize=recognize_norm)
def lower_linalg_norm(ctx, x):
    p = ctx.marked.params
    op = ctx.op.ReduceL1 if p["ord"] == 1 else ctx.op.ReduceL2
    return op(x, ctx.i64(_axes(ctx)), keepdims=int(p["keepdims"]))


# ---------------------------------------------------------------------------------------------
# cumsum


def recognize_cumsum(site):
    """``cumsum(a, axis)``: the ``cumsum`` primitive's axis, or None (numpy's flattened array) when
    the body reshapes first; a ``dtype`` (a conversion in the body) or a bool operand declines."""
    scan = one(site, "cumsum")
    aval = site.avals_in[0] if site.avals_in else None
    if scan is None or not _only_array(site) or not aval.shape or np.dtype(aval.dtype) == np.bool_:
        return None
    if site.eqns("convert_element_type") or scan.params.get("reverse"):
        return None
    flattened = bool(site.eqns("reshape")) and len(aval.shape) != 1
    return {"axis": None if flattened else int(scan.params["axis"])}


@lowerings.register_library("jax.numpy.cumsum", recognize=recognize_cumsum)
def lower_cumsum(ctx, x):
    if np.dtype(ctx.avals_in[0].dtype) not in ctx.kernel_dtypes("CumSum", without=HALF_FLOATS):
        return None  # no CumSum kernel for it (small and unsigned ints): the lax body uses a carrier
    axis = ctx.marked.params["axis"]
    if axis is None:  # numpy semantics: the flattened array
        x = ctx.op.Reshape(x, ctx.i64([-1]))
        axis = 0
    return ctx.op.CumSum(x, ctx.i64(axis))
