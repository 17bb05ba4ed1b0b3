"""Testcases of :mod:`jax2onnx_linen.conv` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from flax import linen as nn
from jax2onnx.testing import Component, Testcase

from ._testing import applied, float32_ops

_SIGNED = {"low": -1.0, "high": 1.0}


def _conv(shape, features, ks, **kw):
    return applied(lambda: nn.Conv(features, kernel_size=ks, **kw), shape, **_SIGNED)


def _conv_t(shape, features, ks, **kw):
    return applied(lambda: nn.ConvTranspose(features, kernel_size=ks, **kw), shape, **_SIGNED)


class _TwoConvs(nn.Module):
    """conv → relu → conv → batchnorm: the layout Transposes between layers must cancel."""

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(5, (3, 3), strides=(2, 2))(nn.relu(nn.Conv(4, (3, 3))(x)))
        return nn.BatchNorm(use_running_average=True)(x)


_CONV_CHECK = float32_ops("Conv", max_transposes=2)


components = [
    Component(
        name="linen.conv",
        onnx=["Conv", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_conv", factory=_conv((1, 6, 6, 3), 4, (3, 3)), input_shapes=[("B", 6, 6, 3)],
                     check=float32_ops("Conv", max_nodes=3)),
            Testcase("linen_conv_1d", factory=_conv((1, 7, 2), 3, (3,)), input_shapes=[(2, 7, 2)], check=_CONV_CHECK),
            Testcase("linen_conv_stride2_valid", factory=_conv((1, 7, 7, 3), 4, (3, 3), strides=2, padding="VALID"),
                     input_shapes=[("B", 7, 7, 3)], check=_CONV_CHECK),
            Testcase("linen_conv_explicit_padding_dilated",
                     factory=_conv((1, 6, 7, 2), 3, (2, 3), padding=((1, 0), (2, 1)), kernel_dilation=(1, 2),
                                   use_bias=False),
                     input_shapes=[("B", 6, 7, 2)], check=_CONV_CHECK),
            Testcase("linen_conv_grouped", factory=_conv((1, 5, 5, 4), 6, (3, 3), feature_group_count=2),
                     input_shapes=[("B", 5, 5, 4)], check=_CONV_CHECK),
            Testcase("linen_conv_symbolic_spatial", factory=_conv((1, 6, 6, 2), 3, (3, 3), strides=2),
                     input_shapes=[("B", "H", "W", 2)], check=_CONV_CHECK, run_f64=False),
            Testcase("linen_conv_stack_transposes_cancel", factory=applied(_TwoConvs, (1, 8, 8, 3)),
                     input_shapes=[("B", 8, 8, 3)], check=float32_ops("Conv", "BatchNormalization", max_transposes=2)),
            # Declined: CIRCULAR padding and an unbatched input are flax's code, lowered by lax.
            Testcase("linen_conv_circular", factory=_conv((1, 5, 5, 2), 3, (3, 3), padding="CIRCULAR"),
                     input_shapes=[("B", 5, 5, 2)]),
            Testcase("linen_conv_unbatched", factory=_conv((5, 5, 2), 3, (3, 3)), input_shapes=[(5, 5, 2)]),
        ],
    ),
    Component(
        name="linen.conv_transpose",
        onnx=["ConvTranspose", "Transpose"],
        since="v0.7.0",
        testcases=[
            Testcase("linen_conv_transpose_valid", factory=_conv_t((1, 4, 4, 3), 4, (3, 3), padding="VALID"),
                     input_shapes=[("B", 4, 4, 3)], check=float32_ops("ConvTranspose", max_nodes=3)),
            Testcase("linen_conv_transpose_same_stride2",
                     factory=_conv_t((1, 4, 5, 3), 2, (3, 3), strides=(2, 2), padding="SAME"),
                     input_shapes=[("B", 4, 5, 3)], check=float32_ops("ConvTranspose")),
            Testcase("linen_conv_transpose_explicit_padding",
                     factory=_conv_t((1, 5, 2), 3, (3,), strides=(2,), padding=((2, 1),)),
                     input_shapes=[("B", 5, 2)], check=float32_ops("ConvTranspose")),
            Testcase("linen_conv_transpose_transpose_kernel",
                     factory=_conv_t((1, 4, 4, 3), 2, (3, 3), strides=(2, 2), transpose_kernel=True),
                     input_shapes=[("B", 4, 4, 3)], check=float32_ops("ConvTranspose")),
        ],
    ),
    Component(
        name="linen.conv_local",
        onnx=[],
        since="v0.7.0",
        description="unshared weights per position: no single ONNX op; flax's code lowered by lax",
        testcases=[
            Testcase("linen_conv_local", factory=applied(lambda: nn.ConvLocal(3, (3, 3)), (1, 5, 5, 2),
                                                                        **_SIGNED),
                     input_shapes=[("B", 5, 5, 2)]),
        ],
    ),
]
