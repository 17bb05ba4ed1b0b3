"""``jax.nn.softmax`` → Softmax, ``log_softmax`` → LogSoftmax, ``one_hot`` → OneHot,
``standardize`` → the ReduceMean chain JAX computes."""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.plugin import Lowerings, is_array
from jax2onnx.testing import Component, Testcase

from ._common import is_float, is_static_int, is_static_number, mark, mark_name, normalize_axes, patches_for
from .cases.helpers import grad_of_sum

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


# ---------------------------------------------------------------------------------------------
# testcases


def _softmax(x):
    return jax.nn.softmax(x)


def _log_softmax_axis0(x):
    return jax.nn.log_softmax(x, axis=0)


def _indices_with_negatives(rng, shape, dtype):
    return rng.integers(-2, 5, size=shape).astype(dtype)


_IDX = jax.ShapeDtypeStruct(("B", 4), jnp.int32)

components = [
    Component(
        name="nn.softmax",
        onnx=["Softmax"],
        since="v0.1.0",
        testcases=[
            Testcase("softmax", _softmax, [(3,)], expected_ops=["Softmax"]),
            Testcase("softmax_2d", lambda x: jax.nn.softmax(x, axis=-1), [("B", 4)], expected_ops=["Softmax"]),
            Testcase("softmax_3d", lambda x: jax.nn.softmax(x, axis=1), [("B", 3, 4)], expected_ops=["Softmax"]),
            Testcase("softmax_large_logits", _softmax,
                     input_values=[np.array([[1e4, 1e4 - 1.0, 0.0], [-1e4, 0.0, 1.0]], np.float32)],
                     expected_ops=["Softmax"]),
            Testcase("softmax_multi_axis", lambda x: jax.nn.softmax(x, axis=(1, 2)), [("B", 3, 4)],
                     description="several axes: no single ONNX op, lowered from lax"),
            Testcase("softmax_vmap", jax.vmap(_softmax), [("B", 3, 4)]),
            Testcase("softmax_grad", grad_of_sum(_softmax), [("B", 4)]),
        ],
    ),
    Component(
        name="nn.log_softmax",
        onnx=["LogSoftmax"],
        since="v0.7.0",
        testcases=[
            Testcase("log_softmax", lambda x: jax.nn.log_softmax(x), [("B", 4)], expected_ops=["LogSoftmax"]),
            Testcase("log_softmax_axis0", _log_softmax_axis0, [(3, "B")], expected_ops=["LogSoftmax"]),
            Testcase("log_softmax_vmap", jax.vmap(_log_softmax_axis0), [("B", 3, 4)]),
            Testcase("log_softmax_grad", grad_of_sum(_log_softmax_axis0), [(3, "B")]),
        ],
    ),
    Component(
        name="nn.one_hot",
        onnx=["OneHot"],
        since="v0.7.0",
        testcases=[
            Testcase("one_hot", lambda i: jax.nn.one_hot(i, 3), [_IDX], expected_ops=["OneHot"],
                     input_generator=_indices_with_negatives,
                     description="negative and too-large indices give all-zero rows, as in JAX"),
            Testcase("one_hot_axis0_int", lambda i: jax.nn.one_hot(i, 4, dtype=jnp.int32, axis=0), [_IDX],
                     expected_ops=["OneHot"], input_generator=_indices_with_negatives),
            Testcase("one_hot_vmap", jax.vmap(lambda i: jax.nn.one_hot(i, 5)), [_IDX],
                     input_generator=_indices_with_negatives),
        ],
    ),
    Component(
        name="nn.standardize",
        onnx=["ReduceMean", "Sub", "Sqrt", "Div"],
        since="v0.7.0",
        testcases=[
            Testcase("standardize", lambda x: jax.nn.standardize(x), [("B", 6)], expected_ops=["ReduceMean"]),
            Testcase("standardize_axes", lambda x: jax.nn.standardize(x, axis=(1, 2), epsilon=1e-3), [("B", 3, 4)],
                     expected_ops=["ReduceMean"]),
            Testcase("standardize_vmap", jax.vmap(lambda x: jax.nn.standardize(x)), [("B", 3, 4)]),
            Testcase("standardize_grad", grad_of_sum(lambda x: jax.nn.standardize(x)), [("B", 6)],
                     rtol=1e-3, atol=1e-4),
        ],
    ),
]
