"""Testcases of :mod:`jax2onnx_nnx.conv` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import fused_budget, model

_rngs = lambda: nnx.Rngs(0)  # noqa: E731


_SIGNED = {"low": -1.0, "high": 1.0}


def _conv(cin, cout, ks, **kw):
    return model(lambda: nnx.Conv(cin, cout, kernel_size=ks, rngs=_rngs(), **kw), **_SIGNED)


def _conv_t(cin, cout, ks, **kw):
    return model(lambda: nnx.ConvTranspose(cin, cout, kernel_size=ks, rngs=_rngs(), **kw), **_SIGNED)


class _TwoConvs(nnx.Module):
    """conv → relu → conv → batchnorm: the layout Transposes between layers must cancel."""

    def __init__(self, rngs: nnx.Rngs):
        self.c1 = nnx.Conv(3, 4, kernel_size=(3, 3), rngs=rngs)
        self.c2 = nnx.Conv(4, 5, kernel_size=(3, 3), strides=(2, 2), rngs=rngs)
        self.bn = nnx.BatchNorm(5, use_running_average=True, rngs=rngs)

    def __call__(self, x):
        return self.bn(self.c2(nnx.relu(self.c1(x))))


#: float64 convolutions take the exact decomposition (no double Conv/ConvTranspose in onnxruntime).
_CONV = {"expected_ops": ["Conv"], "expected_ops_f64": ()}


_CONV_T = {"expected_ops": ["ConvTranspose"], "expected_ops_f64": ()}


_CONV_CHECK = {**_CONV, "check": fused_budget(max_transposes=2)}


components = [
    Component(
        name="nnx.conv",
        onnx=["Conv", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("conv_basic_bias", factory=_conv(3, 4, (3, 3)), input_shapes=[("B", 6, 6, 3)],
                     **_CONV, check=fused_budget(max_nodes=3)),
            Testcase("conv_basic_bias_2", factory=_conv(1, 4, (3, 3)), input_shapes=[(2, 5, 5, 1)],
                     **_CONV_CHECK),
            Testcase("conv_basic_bias_3", factory=_conv(2, 3, (3,)), input_shapes=[(2, 7, 2)], **_CONV_CHECK),
            Testcase("conv_stride2_bias", factory=_conv(3, 4, (3, 3), strides=(2, 2)), input_shapes=[(2, 7, 7, 3)],
                     **_CONV_CHECK),
            Testcase("conv_no_bias", factory=_conv(3, 4, (3, 3), use_bias=False), input_shapes=[("B", 5, 5, 3)],
                     **_CONV_CHECK),
            Testcase("conv_valid_padding", factory=_conv(3, 4, (3, 3), padding="VALID"), input_shapes=[(2, 6, 6, 3)],
                     **_CONV_CHECK),
            Testcase("conv_stride1", factory=_conv(3, 2, (3, 3), strides=1, padding=((1, 0), (2, 1))),
                     input_shapes=[(2, 5, 5, 3)], **_CONV_CHECK),
            Testcase("conv_stride2", factory=_conv(3, 2, (2, 2), strides=2, padding="SAME"),
                     input_shapes=[(2, 7, 6, 3)], **_CONV_CHECK),
            Testcase("conv_different_kernel", factory=_conv(2, 3, (1, 3), kernel_dilation=(1, 2)),
                     input_shapes=[(2, 5, 7, 2)], **_CONV_CHECK),
            Testcase("conv_float64", factory=_conv(2, 2, (2, 2)), input_shapes=[(1, 4, 4, 2)], **_CONV_CHECK),
            Testcase("conv_single_batch", factory=_conv(3, 4, (3, 3)), input_shapes=[(1, 5, 5, 3)],
                     **_CONV_CHECK),
            Testcase("conv_large_batch", factory=_conv(3, 4, (3, 3)), input_shapes=[(16, 5, 5, 3)],
                     **_CONV_CHECK),
            Testcase("conv_grouped", factory=_conv(4, 6, (3, 3), feature_group_count=2), input_shapes=[("B", 5, 5, 4)],
                     **_CONV_CHECK),
            Testcase("conv_3d", factory=_conv(2, 3, (2, 2, 2)), input_shapes=[("B", 3, 4, 3, 2)], **_CONV_CHECK),
            # Symbolic spatial sizes: SAME padding is left to ONNX (auto_pad) as it cannot be precomputed.
            # float64 declines to the lax pack, whose exact tap-slice conv needs static spatial sizes.
            Testcase("conv_symbolic_spatial", factory=_conv(2, 3, (3, 3), strides=2),
                     input_shapes=[("B", "H", "W", 2)], **_CONV_CHECK, run_f64=False),
            Testcase("conv_stack_transposes_cancel",
                     factory=model(lambda: _TwoConvs(_rngs())),
                     input_shapes=[("B", 8, 8, 3)], expected_ops=["Conv", "BatchNormalization"],
                     expected_ops_f64=["BatchNormalization"], check=fused_budget(max_transposes=2)),
        ],
    ),
    Component(
        name="nnx.conv_transpose",
        onnx=["ConvTranspose", "Transpose"],
        since="v0.7.0",
        testcases=[
            Testcase("conv_transpose_valid", factory=_conv_t(3, 4, (3, 3), padding="VALID"),
                     input_shapes=[("B", 4, 4, 3)], **_CONV_T, check=fused_budget(max_nodes=3)),
            Testcase("conv_transpose_same_stride2", factory=_conv_t(3, 2, (3, 3), strides=(2, 2), padding="SAME"),
                     input_shapes=[("B", 4, 5, 3)], **_CONV_T),
            Testcase("conv_transpose_same_k2_stride2", factory=_conv_t(2, 2, (2, 2), strides=2),
                     input_shapes=[("B", 3, 3, 2)], **_CONV_T),
            Testcase("conv_transpose_explicit_padding", factory=_conv_t(2, 3, (3,), strides=2, padding=((2, 1),)),
                     input_shapes=[("B", 5, 2)], **_CONV_T),
            Testcase("conv_transpose_dilated", factory=_conv_t(2, 3, (2, 2), kernel_dilation=(2, 1), use_bias=False),
                     input_shapes=[("B", 4, 4, 2)], **_CONV_T),
            Testcase("conv_transpose_transpose_kernel",
                     factory=_conv_t(3, 2, (3, 3), strides=2, padding="SAME", transpose_kernel=True),
                     input_shapes=[("B", 4, 4, 3)], **_CONV_T),
        ],
    ),
]
