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

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.dtypes import is_bool, is_float
from jax2onnx.fusion import max_pool
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from .conv import is_symbolic_same

lowerings = Lowerings()

_INT64_MAX = np.iinfo(np.int64).max
#: dtypes with onnxruntime MaxPool / AveragePool kernels.
MAXPOOL_DTYPES = {np.dtype(t) for t in ("float16", "float32", "float64")}
AVGPOOL_DTYPES = {np.dtype(t) for t in ("float16", "float32")}


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
    native = MAXPOOL_DTYPES if kind in ("max", "min") else AVGPOOL_DTYPES if kind == "add" else set()
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
    if init.const_value is not None:  # a literal init: the identity needs no extra op
        init = init.const_value.numpy()
        if _is_identity(init, kind, np.dtype(ctx.avals_in[0].dtype)):
            init = None
    return _lower_window(ctx, x, kind, init)


# ---------------------------------------------------------------------------------------------
# testcases


def _window(reducer, init, window, strides, padding, base=None, wdil=None):
    # A Python scalar init lets JAX recognise add/max/min with their identity and emit
    # reduce_window_{sum,max,min}; anything else stays the generic reduce_window.
    def fn(x):
        return lax.reduce_window(x, init, reducer, window, strides, padding, base, wdil)

    return fn


def _ints(shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def avg_pool_nhwc(x):
    # What nnx.avg_pool computes: a window sum divided by the window size.
    return lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "SAME") / 4.0


def _expect_pool(f32_op: str, f64_op: str):
    """float32 graphs use the pooling op; float64 ones what onnxruntime can run in float64."""

    def check(model, variant):
        from jax2onnx.testing.runner import op_types, unavailable_ops

        want = f64_op if variant.double else f32_op
        if unavailable_ops(model, [want]):  # e.g. a dilated AveragePool before opset 19: a Conv
            return
        assert want in op_types(model), f"expected {want} in {sorted(op_types(model))}"

    return check


components = [
    Component(
        name="lax.reduce_window_sum",
        onnx=["AveragePool", "Mul", "Slice", "Sum"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_sum_nhwc", _window(lax.add, 0.0, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
                     [("B", 4, 5, 3)], check=_expect_pool("AveragePool", "Sum")),
            Testcase("reduce_window_sum_avg_pool_same", avg_pool_nhwc, [("B", 5, 5, 2)]),
            Testcase("reduce_window_sum_dilated_padded", _window(lax.add, 0.0, (1, 1, 3, 2), (1, 1, 1, 2),
                                                               ((0, 0), (0, 0), (2, 1), (1, 0)), wdil=(1, 1, 2, 1)),
                     [("B", 2, 6, 5)]),
            Testcase("reduce_window_sum_1d_last_axis", _window(lax.add, 0.0, (1, 3), (1, 1), ((2, 0), (0, 0))[::-1]),
                     [("B", 6)]),
            Testcase("reduce_window_sum_rank5", _window(lax.add, 0.0, (1, 1, 1, 2, 2), (1, 1, 1, 1, 2), "VALID"),
                     [("B", 2, 2, 3, 4)]),
            Testcase("reduce_window_sum_same_dilated_symbolic", _window(lax.add, 0.0, (1, 2, 2), (1, 2, 1), "SAME",
                                                                       wdil=(1, 2, 1)),
                     [(2, "H", "W")], check=_expect_pool("AveragePool", "Sum")),
            Testcase("reduce_window_sum_int32", _window(lax.add, 0, (2, 2), (1, 1), "SAME"), [_ints(("B", 4))],
                     expected_ops=["Slice"]),
            Testcase("reduce_window_sum_base_dilation", _window(lax.add, 0.0, (2, 2), (1, 1), "VALID", base=(1, 2)),
                     [("B", 3)], expected_ops=["Pad"]),
        ],
    ),
    Component(
        name="lax.reduce_window_max",
        onnx=["MaxPool"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_max_nhwc_same", _window(lax.max, -jnp.inf, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
                     [("B", 5, 6, 2)], expected_ops=["MaxPool"]),
            Testcase("reduce_window_max_nchw_dilated", _window(lax.max, -jnp.inf, (1, 1, 2, 2), (1, 1, 1, 1),
                                                              ((0, 0), (0, 0), (1, 1), (0, 1)), wdil=(1, 1, 2, 1)),
                     [("B", 2, 5, 4)], expected_ops=["MaxPool"]),
            Testcase("reduce_window_max_same_strided_symbolic", _window(lax.max, -jnp.inf, (3, 1), (2, 1), "SAME"),
                     [("B", 3)], check=_expect_pool("MaxPool", "MaxPool"), forbidden_ops=["Pad"]),
            Testcase("reduce_window_max_int32", _window(lax.max, np.int32(np.iinfo(np.int32).min), (3,), (2,), "SAME"),
                     [_ints(("B",))], expected_ops=["Max"]),
            # jnp.max-style windows over the lowest int (the padding must be that value, not -max)
            # and over uint64 on both sides of 2**63 (x64 variant; uint32 without x64)
            Testcase("reduce_window_max_int32_lowest", _window(lax.max, np.int32(np.iinfo(np.int32).min), (3,), (2,),
                                                               "SAME"),
                     input_values=[np.asarray([np.iinfo(np.int32).min] * 2 + [5, np.iinfo(np.int32).min], np.int32)]),
            Testcase("reduce_window_max_uint64",
                     lambda x: lax.reduce_window(x, jnp.zeros((), x.dtype), lax.max, (1, 2), (1, 1), "SAME"),
                     input_values=[np.asarray([[0, 2**63 + 5, 2**64 - 1, 7], [2**63, 1, 2**63 - 1, 2**62]], np.uint64)]),
            # bool windows are any/all (ONNX's Max takes no bool); bfloat16 pads with -inf
            Testcase("reduce_window_max_nan", lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2), (1, 1), "SAME"),
                     input_values=[np.asarray([[np.nan, -np.inf, 2.5, -0.0], [1.5, np.nan, np.nan, 0.5]], np.float32)],
                     expected_ops=["MaxPool"]),
            Testcase("reduce_window_max_bool",
                     lambda x: lax.reduce_window(x, False, lax.max, (1, 3), (1, 2), "SAME"),
                     input_values=[np.asarray([[True, False, False, False, True], [False, False, True, False, False]])]),
            Testcase("reduce_window_max_bfloat16",
                     lambda x: lax.reduce_window(x.astype(jnp.bfloat16), -jnp.inf, lax.max, (1, 2), (1, 1),
                                                 "VALID").astype(x.dtype),
                     input_values=[np.asarray([[np.nan, -np.inf, 2.5, -0.0], [1.5, -2.25, 3.0, 0.5]], np.float32)]),
        ],
    ),
    Component(
        name="lax.reduce_window_min",
        onnx=["MaxPool", "Neg"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_min", _window(lax.min, jnp.inf, (1, 2, 3), (1, 1, 2), ((0, 0), (1, 0), (1, 1))),
                     [("B", 4, 6)], expected_ops=["MaxPool", "Neg"]),
            Testcase("reduce_window_min_int32", _window(lax.min, np.int32(np.iinfo(np.int32).max), (2, 2), (1, 1), "VALID"),
                     [_ints(("B", 3))], expected_ops=["Min"]),
            Testcase("reduce_window_min_nan", lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 2), (1, 1), "VALID"),
                     input_values=[np.asarray([[np.nan, -np.inf, 2.5, -0.0], [1.5, np.nan, np.inf, 0.5]], np.float32)],
                     expected_ops=["MaxPool"]),
        ],
    ),
    Component(
        name="lax.reduce_window",
        onnx=["Slice", "Mul", "Max", "Min", "Add"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_prod", _window(lax.mul, 1.0, (1, 2), (1, 1), "SAME"), [("B", 4)],
                     expected_ops=["Mul"]),
            # A lambda body is not recognised as lax.add, so JAX keeps the generic primitive.
            Testcase("reduce_window_generic_add_body", _window(lambda a, b: a + b, 0.0, (2, 2), (1, 1), ((1, 0), (0, 1))),
                     [("B", 3)], check=_expect_pool("AveragePool", "Sum")),
            Testcase("reduce_window_max_runtime_init", lambda x, v: lax.reduce_window(x, v, lax.max, (1, 3), (1, 1), "SAME"),
                     [("B", 5), ()], expected_ops=["Max"]),
        ],
    ),
]
