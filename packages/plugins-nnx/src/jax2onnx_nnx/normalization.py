"""nnx.BatchNorm, LayerNorm, RMSNorm, GroupNorm → BatchNormalization, LayerNormalization,
RMSNormalization, GroupNormalization.

Each module's ``__call__`` runs as a marked region (see ``_fusion``); the lowering emits the one
ONNX op when the configuration maps onto it exactly and declines otherwise (custom axes, masks,
training-mode batch statistics, ``axis_name``), leaving flax's own math to the lax lowerings.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flax import nnx
from jax2onnx.plugin import Lowerings, Patch, is_array
from jax2onnx.testing import Component, Testcase

from ._fusion import Operands, call_module, const_array, find_eqns, one_output_like, region_body, static_bool
from .cases.helpers import model

lowerings = Lowerings()

BATCH_NORM = "jax2onnx_nnx.batch_norm"
LAYER_NORM = "jax2onnx_nnx.layer_norm"
RMS_NORM = "jax2onnx_nnx.rms_norm"
GROUP_NORM = "jax2onnx_nnx.group_norm"


def _axes(axes: Any, ndim: int) -> tuple[int, ...]:
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(sorted({int(a) % ndim for a in axes}))


def _stash_type(ctx: Any, dtype: Any) -> int:
    """Statistics precision: flax computes them in at least float32, and in float64 for float64."""
    return int(ctx.onnx_dtype(np.float64 if np.dtype(dtype) == np.float64 else np.float32))


def _plain_call(args: tuple, kwargs: dict, allowed: tuple[str, ...] = ("mask",)) -> bool:
    """No extra positional args and only ``None`` for the keyword arguments we do not fuse."""
    return not args and all(k in allowed and v is None for k, v in kwargs.items())


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_batch_norm(original):
    def __call__(self, x, use_running_average=None, **kwargs):
        flag = static_bool(use_running_average if use_running_average is not None else self.use_running_average)
        if (
            flag is not True  # training mode updates the running statistics: flax's own code
            or not _plain_call((), kwargs)
            or getattr(self, "axis_name", None) is not None
            or not is_array(x)
        ):
            return original(self, x, use_running_average, **kwargs)
        return call_module(
            BATCH_NORM, self, lambda m, x: original(m, x, use_running_average=True), {"x": x},
            feature_axes=_axes(self.axis, x.ndim), epsilon=float(self.epsilon),
        )

    return __call__


def _patch_layer_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain_call(args, kwargs) or getattr(self, "axis_name", None) is not None or not is_array(x):
            return original(self, x, *args, **kwargs)
        return call_module(
            LAYER_NORM, self, lambda m, x: original(m, x), {"x": x},
            reduction_axes=_axes(self.reduction_axes, x.ndim), feature_axes=_axes(self.feature_axes, x.ndim),
            epsilon=float(self.epsilon),
        )

    return __call__


def _patch_rms_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain_call(args, kwargs) or getattr(self, "axis_name", None) is not None or not is_array(x):
            return original(self, x, *args, **kwargs)
        return call_module(
            RMS_NORM, self, lambda m, x: original(m, x), {"x": x},
            reduction_axes=_axes(self.reduction_axes, x.ndim), feature_axes=_axes(self.feature_axes, x.ndim),
            epsilon=float(self.epsilon),
        )

    return __call__


def _patch_group_norm(original):
    def __call__(self, x, *args, **kwargs):
        if (
            not _plain_call(args, kwargs)
            or getattr(self, "axis_name", None) is not None
            or getattr(self, "reduction_axes", None) is not None  # only the default: all but batch
            or not is_array(x)
            or x.ndim < 2
            or int(self.feature_axis) % x.ndim != x.ndim - 1
        ):
            return original(self, x, *args, **kwargs)
        return call_module(
            GROUP_NORM, self, lambda m, x: original(m, x), {"x": x},
            num_groups=int(self.num_groups), epsilon=float(self.epsilon),
        )

    return __call__


patches = [
    Patch("flax.nnx.BatchNorm", "__call__", _patch_batch_norm),
    Patch("flax.nnx.LayerNorm", "__call__", _patch_layer_norm),
    Patch("flax.nnx.RMSNorm", "__call__", _patch_rms_norm),
    Patch("flax.nnx.GroupNorm", "__call__", _patch_group_norm),
]


# ---------------------------------------------------------------------------------------------
# Lowerings


def _param(ctx: Any, ops: Operands, name: str, shape: list[Any], dtype: Any, default: float | None) -> Any:
    """A per-feature weight reshaped to ``shape``; ``default`` fills a missing one (None: omit)."""
    v = ops.get(name)
    if v is None:
        return None if default is None else ctx.const(np.full(shape, default, dtype=dtype))
    v = ctx.cast(v, dtype)
    return v if list(ops.shape(name)) == list(shape) else ctx.op.Reshape(v, ctx.i64(shape))


def _trailing_norm(ctx: Any, ins: tuple, with_bias: bool) -> tuple[Any, ...] | None:
    """Common part of LayerNorm and RMSNorm: (x, scale, bias, axis) or None to decline."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    red, feat = p["reduction_axes"], p["feature_axes"]
    if not one_output_like(ctx, shape) or not red:
        return None
    start = red[0]
    # ONNX normalises over the trailing axes [axis, rank) with weights broadcast over them.
    if tuple(red) != tuple(range(start, rank)) or not set(feat) <= set(red):
        return None
    dtype = ctx.avals_out[0].dtype
    wshape = [shape[a] if a in feat else 1 for a in range(start, rank)]
    if any(not isinstance(d, (int, np.integer)) for d in wshape):
        return None
    x = ctx.cast(ops["x"], dtype)
    scale = _param(ctx, ops, "scale", wshape, dtype, 1.0)
    bias = _param(ctx, ops, "bias", wshape, dtype, None) if with_bias else None
    return x, scale, bias, start


@lowerings.register_call(LAYER_NORM)
def lower_layer_norm(ctx, *ins):
    parts = _trailing_norm(ctx, ins, with_bias=True)
    if parts is None:
        return None
    x, scale, bias, axis = parts
    dtype = ctx.avals_out[0].dtype
    return ctx.op.LayerNormalization(x, scale, bias, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                     stash_type=_stash_type(ctx, dtype))


@lowerings.register_call(RMS_NORM)
def lower_rms_norm(ctx, *ins):
    if ctx.opset < 23:  # RMSNormalization is new in opset 23
        return None
    parts = _trailing_norm(ctx, ins, with_bias=False)
    if parts is None:
        return None
    x, scale, _, axis = parts
    dtype = ctx.avals_out[0].dtype
    return ctx.op.RMSNormalization(x, scale, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                   stash_type=_stash_type(ctx, dtype))


@lowerings.register_call(BATCH_NORM)
def lower_batch_norm(ctx, *ins):
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    feat = p["feature_axes"]
    if not one_output_like(ctx, shape) or rank < 2 or len(feat) != 1:
        return None
    axis = feat[0]
    # ONNX puts channels at axis 1: (N, C) and (N, C, ...) as they are, channels-last transposed.
    if axis != 1 and axis != rank - 1:
        return None
    channels = shape[axis]
    dtype = ctx.avals_out[0].dtype
    x = ctx.cast(ops["x"], dtype)
    scale = _param(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = _param(ctx, ops, "bias", [channels], dtype, 0.0)
    mean = _param(ctx, ops, "mean", [channels], dtype, 0.0)
    var = _param(ctx, ops, "var", [channels], dtype, 1.0)
    epsilon = p["epsilon"]
    low = _stats_dtype(ctx)
    if low is not None and low != np.dtype(dtype):
        # flax 0.10 computes rsqrt(var + eps) * scale in the parameters' precision (float32 under a
        # float64 export); fold that multiplier, rounded as flax rounds it, into the scale.
        scale = _low_precision_multiplier(ops, low, epsilon)
        if scale is None:
            return None
        scale = ctx.const(scale.astype(dtype))
        var, epsilon = ctx.const(np.ones([channels], dtype=dtype)), 0.0
    channels_last = axis != 1
    if channels_last:
        x = ctx.op.Transpose(x, perm=[0, rank - 1, *range(1, rank - 1)])
    y = ctx.op.BatchNormalization(x, scale, bias, mean, var, epsilon=epsilon)
    if channels_last:
        y = ctx.op.Transpose(y, perm=[0, *range(2, rank), 1])
    return y


def _stats_dtype(ctx: Any) -> np.dtype | None:
    """The precision of ``rsqrt(var + eps)`` in the region's body (None when absent)."""
    found = find_eqns(region_body(ctx), "rsqrt")
    return np.dtype(found[0].invars[0].aval.dtype) if found else None


def _low_precision_multiplier(ops: Operands, low: np.dtype, epsilon: float) -> np.ndarray | None:
    """``rsqrt(var + eps) * scale`` evaluated by JAX in ``low``, as the region's body does."""
    import jax
    import jax.numpy as jnp

    var = const_array(ops.get("var"))
    scale = const_array(ops.get("scale")) if "scale" in ops else None
    if var is None or ("scale" in ops and scale is None):
        return None
    mul = jax.lax.rsqrt(jnp.asarray(var, low) + epsilon)
    if scale is not None:
        mul = mul * jnp.asarray(scale, low)
    return np.asarray(mul).reshape(-1)


@lowerings.register_call(GROUP_NORM)
def lower_group_norm(ctx, *ins):
    if ctx.opset < 21:  # per-channel scale/bias (flax's) is GroupNormalization-21 semantics
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    if not one_output_like(ctx, shape):
        return None
    channels = shape[-1]
    dtype = ctx.avals_out[0].dtype
    x = ctx.cast(ops["x"], dtype)
    scale = _param(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = _param(ctx, ops, "bias", [channels], dtype, 0.0)
    if rank > 2:
        x = ctx.op.Transpose(x, perm=[0, rank - 1, *range(1, rank - 1)])
    y = ctx.op.GroupNormalization(x, scale, bias, num_groups=p["num_groups"], epsilon=p["epsilon"],
                                  stash_type=_stash_type(ctx, dtype))
    if rank > 2:
        y = ctx.op.Transpose(y, perm=[0, *range(2, rank), 1])
    return y


# ---------------------------------------------------------------------------------------------
# Testcases

_rngs = lambda: nnx.Rngs(0)  # noqa: E731


def _bn(n, **kw):
    return model(lambda: nnx.BatchNorm(n, use_running_average=True, rngs=_rngs(), **kw))


_NO_STATS = ["ReduceMean", "ReduceSum", "Sqrt"]

components = [
    Component(
        name="nnx.batch_norm",
        onnx=["BatchNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("batch_norm_simple", factory=_bn(4), input_shapes=[("B", 4)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
            Testcase("batch_norm_2d", factory=_bn(6), input_shapes=[("B", 6)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("batch_norm_2d_use_bias_false", factory=_bn(6, use_bias=False), input_shapes=[("B", 6)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_2d_use_scale_false", factory=_bn(6, use_scale=False), input_shapes=[("B", 6)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_4d", factory=_bn(3), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization", "Transpose"], forbidden_ops=_NO_STATS, max_nodes=3),
            Testcase("batch_norm_4d_use_bias_false", factory=_bn(3, use_bias=False), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_4d_use_scale_false", factory=_bn(3, use_scale=False), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_minimal", factory=_bn(1), input_shapes=[(2, 1)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            # Built in training mode, exported after model.eval(): the running statistics are used.
            Testcase("batch_norm_eval_mode",
                     factory=model(lambda: nnx.BatchNorm(5, rngs=_rngs()), eval_mode=True),
                     input_shapes=[("B", 5)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            # The batch axis second: BatchNormalization's channel axis is 1 already.
            Testcase("batch_norm_3d_axis1", factory=_bn(4, axis=1), input_shapes=[("B", 4, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"]),
        ],
    ),
    Component(
        name="nnx.layer_norm",
        onnx=["LayerNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("layer_norm", factory=model(lambda: nnx.LayerNorm(6, rngs=_rngs())), input_shapes=[("B", 6)],
                     expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("layer_norm_multiaxis",
                     factory=model(lambda: nnx.LayerNorm(3 * 4 * 2, reduction_axes=(1, 2, 3), feature_axes=(1, 2, 3),
                                                         rngs=_rngs())),
                     input_shapes=[("B", 3, 4, 2)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1),
            Testcase("layer_norm_3d", factory=model(lambda: nnx.LayerNorm(8, rngs=_rngs())),
                     input_shapes=[("B", 5, 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            Testcase("layer_norm_no_bias_no_scale",
                     factory=lambda: nnx.LayerNorm(8, use_bias=False, use_scale=False, rngs=_rngs()),
                     input_shapes=[("B", 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            # Normalise over two trailing axes with one scale per last-axis feature.
            Testcase("layer_norm_features_last",
                     factory=model(lambda: nnx.LayerNorm(4, reduction_axes=(-2, -1), feature_axes=-1, rngs=_rngs())),
                     input_shapes=[("B", 3, 4)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="nnx.rms_norm",
        onnx=["RMSNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("rms_norm", factory=model(lambda: nnx.RMSNorm(6, rngs=_rngs())), input_shapes=[("B", 6)],
                     expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("rms_norm_2", factory=model(lambda: nnx.RMSNorm(5, epsilon=1e-3, rngs=_rngs())),
                     input_shapes=[("B", 3, 5)], expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="nnx.group_norm",
        onnx=["GroupNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("group_norm", factory=model(lambda: nnx.GroupNorm(8, num_groups=4, rngs=_rngs())),
                     input_shapes=[("B", 3, 3, 8)], expected_ops=["GroupNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=3),
            Testcase("group_norm_2", factory=model(lambda: nnx.GroupNorm(6, num_groups=2, rngs=_rngs())),
                     input_shapes=[("B", 6)], expected_ops=["GroupNormalization"],
                     forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
        ],
    ),
]
