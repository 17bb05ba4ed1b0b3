"""nn.BatchNorm (running averages), nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.InstanceNorm →
BatchNormalization, LayerNormalization, RMSNormalization, GroupNormalization, InstanceNormalization.

Each module's ``__call__`` runs as a marked region (see ``_fusion``); the lowering emits the one
ONNX op when the configuration maps onto it exactly and declines otherwise (masks, ``axis_name``,
non-trailing reduction axes, training-mode BatchNorm, which updates ``batch_stats``), leaving
flax's own math to the lax lowerings. InstanceNormalization has no float64 kernel in onnxruntime:
float64 instance norms use the decomposition.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flax import linen as nn
from jax2onnx.plugin import Lowerings, Patch
from jax2onnx.testing import Component, Testcase

from ._fusion import (
    Operands,
    call_module,
    const_array,
    find_eqns,
    fusable,
    is_array,
    one_output_like,
    region_body,
    reshape_const,
    static_bool,
    to_nchw,
    to_nhwc,
)
from ._testing import applied, float32_ops

lowerings = Lowerings()

BATCH_NORM = "jax2onnx_linen.batch_norm"
LAYER_NORM = "jax2onnx_linen.layer_norm"
RMS_NORM = "jax2onnx_linen.rms_norm"
GROUP_NORM = "jax2onnx_linen.group_norm"
INSTANCE_NORM = "jax2onnx_linen.instance_norm"
_INSTANCE_DTYPES = {np.dtype(np.float32), np.dtype(np.float16)}


def _axes(axes: Any, ndim: int) -> tuple[int, ...]:
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(sorted({int(a) % ndim for a in axes}))


def _stash_type(ctx: Any, dtype: Any) -> int:
    """Statistics precision: flax computes them in at least float32, and in float64 for float64."""
    return int(ctx.onnx_dtype(np.float64 if np.dtype(dtype) == np.float64 else np.float32))


def _plain(self: Any, x: Any, args: tuple, kwargs: dict, reads: tuple[str, ...] = ("params",)) -> bool:
    """An array input, no mask or extra argument, no cross-device statistics, bound in apply mode."""
    return (
        not args
        and all(k == "mask" and v is None for k, v in kwargs.items())
        and getattr(self, "axis_name", None) is None
        and is_array(x)
        and fusable(self, reads=reads)
    )


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_batch_norm(original):
    def __call__(self, x, use_running_average=None, *args, **kwargs):
        flag = static_bool(use_running_average if use_running_average is not None else self.use_running_average)
        # Training mode computes batch statistics and updates batch_stats: flax's own code.
        if flag is not True or not _plain(self, x, args, kwargs, reads=("params", "batch_stats")):
            return original(self, x, use_running_average, *args, **kwargs)
        return call_module(BATCH_NORM, self, lambda m, x: original(m, x, use_running_average), {"x": x},
                           collections=("params", "batch_stats"), feature_axes=_axes(self.axis, x.ndim),
                           epsilon=float(self.epsilon))

    return __call__


def _patch_trailing_norm(mark: str):
    def make(original):
        def __call__(self, x, *args, **kwargs):
            if not _plain(self, x, args, kwargs):
                return original(self, x, *args, **kwargs)
            return call_module(mark, self, lambda m, x: original(m, x), {"x": x},
                               reduction_axes=_axes(self.reduction_axes, x.ndim),
                               feature_axes=_axes(self.feature_axes, x.ndim), epsilon=float(self.epsilon))

        return __call__

    return make


def _patch_group_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain(self, x, args, kwargs) or self.reduction_axes is not None or x.ndim < 2:
            return original(self, x, *args, **kwargs)
        channels = int(x.shape[-1])
        groups = self.num_groups if self.num_groups is not None else (
            channels // self.group_size if self.group_size and channels % self.group_size == 0 else None)
        if groups is None:  # flax raises its own error for an invalid configuration
            return original(self, x, *args, **kwargs)
        return call_module(GROUP_NORM, self, lambda m, x: original(m, x), {"x": x},
                           num_groups=int(groups), epsilon=float(self.epsilon))

    return __call__


def _patch_instance_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain(self, x, args, kwargs) or x.ndim < 3:
            return original(self, x, *args, **kwargs)
        return call_module(INSTANCE_NORM, self, lambda m, x: original(m, x), {"x": x},
                           feature_axes=_axes(self.feature_axes, x.ndim), epsilon=float(self.epsilon))

    return __call__


patches = [
    Patch("flax.linen.BatchNorm", "__call__", _patch_batch_norm),
    Patch("flax.linen.LayerNorm", "__call__", _patch_trailing_norm(LAYER_NORM)),
    Patch("flax.linen.RMSNorm", "__call__", _patch_trailing_norm(RMS_NORM)),
    Patch("flax.linen.GroupNorm", "__call__", _patch_group_norm),
    Patch("flax.linen.InstanceNorm", "__call__", _patch_instance_norm),
]


# ---------------------------------------------------------------------------------------------
# Lowerings


def _param(ctx: Any, ops: Operands, name: str, shape: list[Any], dtype: Any, default: float | None) -> Any:
    """A per-feature weight reshaped to ``shape``; ``default`` fills a missing one (None: omit)."""
    v = ops.get(name)
    if v is None:
        return None if default is None else ctx.const(np.full(shape, default, dtype=dtype))
    v = ctx.cast(v, dtype)
    return v if list(ops.shape(name)) == list(shape) else reshape_const(ctx, v, shape)


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
    return ctx.op.LayerNormalization(x, scale, bias, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                     stash_type=_stash_type(ctx, ctx.avals_out[0].dtype))


@lowerings.register_call(RMS_NORM)
def lower_rms_norm(ctx, *ins):
    if ctx.opset < 23:  # RMSNormalization is new in opset 23
        return None
    parts = _trailing_norm(ctx, ins, with_bias=False)
    if parts is None:
        return None
    x, scale, _, axis = parts
    return ctx.op.RMSNormalization(x, scale, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                   stash_type=_stash_type(ctx, ctx.avals_out[0].dtype))


@lowerings.register_call(BATCH_NORM)
def lower_batch_norm(ctx, *ins):
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    feat = p["feature_axes"]
    if not one_output_like(ctx, shape) or rank < 2 or len(feat) != 1 or "mean" not in ops or "var" not in ops:
        return None
    axis = feat[0]
    # ONNX puts channels at axis 1: (N, C) and (N, C, ...) as they are, channels-last transposed.
    if axis != 1 and axis != rank - 1:
        return None
    channels = shape[axis]
    dtype = np.dtype(ctx.avals_out[0].dtype)
    x = ctx.cast(ops["x"], dtype)
    scale = _param(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = _param(ctx, ops, "bias", [channels], dtype, 0.0)
    mean = _param(ctx, ops, "mean", [channels], dtype, 0.0)
    var = _param(ctx, ops, "var", [channels], dtype, 1.0)
    epsilon = p["epsilon"]
    found = find_eqns(region_body(ctx), "rsqrt")
    low = np.dtype(found[0].invars[0].aval.dtype) if found else None
    if low is not None and low != dtype:
        # flax keeps batch_stats in float32 and computes rsqrt(var + eps) * scale there even in a
        # float64 model; fold that multiplier, rounded as flax rounds it, into the scale.
        multiplier = _low_precision_multiplier(ops, low, epsilon)
        if multiplier is None:
            return None
        scale = ctx.const(multiplier.astype(dtype))
        var, epsilon = ctx.const(np.ones([channels], dtype=dtype)), 0.0
    channels_last = axis != 1
    if channels_last:
        x = to_nchw(ctx, x, rank)
    y = ctx.op.BatchNormalization(x, scale, bias, mean, var, epsilon=epsilon)
    return to_nhwc(ctx, y, rank) if channels_last else y


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
        x = to_nchw(ctx, x, rank)
    y = ctx.op.GroupNormalization(x, scale, bias, num_groups=p["num_groups"], epsilon=p["epsilon"],
                                  stash_type=_stash_type(ctx, dtype))
    return to_nhwc(ctx, y, rank) if rank > 2 else y


@lowerings.register_call(INSTANCE_NORM)
def lower_instance_norm(ctx, *ins):
    ops = Operands(ctx, ins)
    shape = ops.shape("x")
    rank = len(shape)
    feat = ctx.marked.params["feature_axes"]
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype not in _INSTANCE_DTYPES or not one_output_like(ctx, shape) or len(feat) != 1 or feat[0] not in (1, rank - 1):
        return None
    channels = shape[feat[0]]
    x = ctx.cast(ops["x"], dtype)
    scale = _param(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = _param(ctx, ops, "bias", [channels], dtype, 0.0)
    channels_last = feat[0] != 1
    if channels_last:
        x = to_nchw(ctx, x, rank)
    y = ctx.op.InstanceNormalization(x, scale, bias, epsilon=ctx.marked.params["epsilon"])
    return to_nhwc(ctx, y, rank) if channels_last else y


# ---------------------------------------------------------------------------------------------
# Testcases

_NO_STATS = ["ReduceMean", "ReduceSum", "Sqrt"]


def _bn(shape, **kw):
    return applied(lambda: nn.BatchNorm(use_running_average=True, **kw), shape)


components = [
    Component(
        name="linen.batch_norm",
        onnx=["BatchNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_batch_norm", factory=_bn((1, 4)), input_shapes=[("B", 4)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
            Testcase("linen_batch_norm_no_scale_no_bias", factory=_bn((1, 6), use_scale=False, use_bias=False),
                     input_shapes=[("B", 6)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("linen_batch_norm_4d", factory=_bn((1, 4, 5, 3)), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization", "Transpose"], forbidden_ops=_NO_STATS, max_nodes=3),
            Testcase("linen_batch_norm_axis1", factory=_bn((1, 4, 3), axis=1), input_shapes=[("B", 4, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"]),
            # use_running_average given at the call, as Linen models pass `train` through.
            Testcase("linen_batch_norm_call_flag",
                     factory=applied(lambda: nn.BatchNorm(), (1, 5), init_kwargs={"use_running_average": True},
                                     use_running_average=True),
                     input_shapes=[("B", 5)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="linen.layer_norm",
        onnx=["LayerNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_layer_norm", factory=applied(lambda: nn.LayerNorm(), (1, 6)), input_shapes=[("B", 6)],
                     expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("linen_layer_norm_3d", factory=applied(lambda: nn.LayerNorm(epsilon=1e-3), (1, 5, 8)),
                     input_shapes=[("B", 5, 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            Testcase("linen_layer_norm_multiaxis",
                     factory=applied(lambda: nn.LayerNorm(reduction_axes=(1, 2, 3), feature_axes=(1, 2, 3)),
                                     (1, 3, 4, 2)),
                     input_shapes=[("B", 3, 4, 2)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1),
            Testcase("linen_layer_norm_features_last",
                     factory=applied(lambda: nn.LayerNorm(reduction_axes=(-2, -1), feature_axes=-1), (1, 3, 4)),
                     input_shapes=[("B", 3, 4)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            Testcase("linen_layer_norm_no_bias_no_scale",
                     factory=applied(lambda: nn.LayerNorm(use_bias=False, use_scale=False), (1, 8)),
                     input_shapes=[("B", 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            # Normalising a middle axis is no LayerNormalization: flax's math, lowered by lax.
            Testcase("linen_layer_norm_middle_axis",
                     factory=applied(lambda: nn.LayerNorm(reduction_axes=1, feature_axes=1), (1, 4, 3)),
                     input_shapes=[("B", 4, 3)], forbidden_ops=["LayerNormalization"]),
        ],
    ),
    Component(
        name="linen.rms_norm",
        onnx=["RMSNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("linen_rms_norm", factory=applied(lambda: nn.RMSNorm(), (1, 6)), input_shapes=[("B", 6)],
                     expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("linen_rms_norm_3d", factory=applied(lambda: nn.RMSNorm(epsilon=1e-3), (1, 3, 5)),
                     input_shapes=[("B", 3, 5)], expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="linen.group_norm",
        onnx=["GroupNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("linen_group_norm", factory=applied(lambda: nn.GroupNorm(num_groups=4), (1, 3, 3, 8)),
                     input_shapes=[("B", 3, 3, 8)], expected_ops=["GroupNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=3),
            Testcase("linen_group_norm_group_size", factory=applied(lambda: nn.GroupNorm(num_groups=None, group_size=3),
                                                                    (1, 6)),
                     input_shapes=[("B", 6)], expected_ops=["GroupNormalization"],
                     forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
        ],
    ),
    Component(
        name="linen.instance_norm",
        onnx=["InstanceNormalization", "Transpose"],
        since="v0.7.0",
        testcases=[
            Testcase("linen_instance_norm", factory=applied(lambda: nn.InstanceNorm(), (1, 5, 5, 4)),
                     input_shapes=[("B", 5, 5, 4)], check=float32_ops("InstanceNormalization", max_nodes=3)),
            Testcase("linen_instance_norm_channels_first",
                     factory=applied(lambda: nn.InstanceNorm(feature_axes=1), (1, 3, 6)),
                     input_shapes=[("B", 3, 6)], check=float32_ops("InstanceNormalization", max_nodes=1)),
        ],
    ),
]
