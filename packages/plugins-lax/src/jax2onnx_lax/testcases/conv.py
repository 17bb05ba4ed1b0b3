"""Testcases of :mod:`jax2onnx_lax.conv` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase


def _kernel(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.5


def _conv(window_strides=(1, 1), padding="VALID", dn=None, kernel=None, **kw):
    """``conv_general_dilated`` with the kernel as a second input, or a closed-over constant."""
    if kernel is None:
        return lambda x, w: lax.conv_general_dilated(x, w, window_strides, padding, dimension_numbers=dn, **kw)
    return lambda x: lax.conv_general_dilated(x, jnp.asarray(kernel, x.dtype), window_strides, padding,
                                              dimension_numbers=dn, **kw)


def expect_conv(op: str, max_transposes: int | None = None):
    """The float32 graph uses ``op``; the float64 graph (no double Conv in onnxruntime) uses Einsum."""

    def check(model, variant):
        from jax2onnx.testing.runner import op_types

        ops = op_types(model)
        double = variant.double  # onnxruntime has no float64 Conv: float64 takes the Einsum form
        want = "Einsum" if double else op
        assert want in ops, f"expected {want} in {sorted(ops)}"
        if double:
            assert "Conv" not in ops and "ConvTranspose" not in ops, "onnxruntime has no float64 Conv"
        if max_transposes is not None:
            n = sum(1 for node in model.graph.node if node.op_type == "Transpose")
            assert n <= max_transposes, f"{n} Transposes, expected at most {max_transposes}"

    return check


def conv_transpose_nhwc(x):
    return lax.conv_transpose(x, jnp.asarray(_kernel((3, 3, 2, 4), 3), x.dtype), (2, 2), "SAME",
                              dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv_grads(x, w):
    """Gradients of a strided, grouped, dilated conv w.r.t. input and kernel: JAX writes them as
    convolutions with lhs_dilation, swapped layouts and batch groups."""

    def loss(a, b):
        y = lax.conv_general_dilated(a, b, (2, 1), ((1, 0), (0, 1)), feature_group_count=2, rhs_dilation=(1, 2))
        return jnp.sum(jnp.sin(y))

    return jax.grad(loss, argnums=(0, 1))(x, w)


_NHWC = ("NHWC", "HWIO", "NHWC")


def _complex_conv(window_strides=(1, 1), padding="VALID", dn=None, **kw):
    """A complex convolution of complex inputs built from real parts (x = xr + i xi, w = wr + i wi)."""
    conv = _conv(window_strides, padding, dn, **kw)
    return lambda xr, xi, wr, wi: conv(lax.complex(xr, xi), lax.complex(wr, wi))


def _complex_kernel_real_input(x, wr, wi):
    # A real input promoted to complex by a complex kernel (jnp promotes before lax binds).
    return lax.conv_general_dilated(x.astype(jnp.result_type(wr.dtype, jnp.complex64)), lax.complex(wr, wi),
                                    (1,), "SAME")


components = [
    Component(
        name="lax.conv",
        onnx=["Conv", "ConvTranspose", "Einsum"],
        since="v0.2.0",
        testcases=[
            Testcase("conv", lambda x, w: lax.conv(x, w, (1, 1), "VALID"), [("B", 2, 5, 5), (3, 2, 2, 2)],
                     check=expect_conv("Conv", max_transposes=0)),
            Testcase("conv2", _conv((2, 2), "SAME", _NHWC, kernel=_kernel((3, 3, 2, 4))), [("B", 6, 6, 2)],
                     check=expect_conv("Conv", max_transposes=2)),
            Testcase("conv_nhwc_kernel_input", _conv((1, 2), ((1, 0), (2, 1)), _NHWC), [("B", 5, 6, 2), (2, 3, 2, 3)],
                     check=expect_conv("Conv")),
            Testcase("conv_rhs_dilation", _conv((1, 1), "SAME", rhs_dilation=(2, 1)), [("B", 2, 7, 6), (4, 2, 3, 2)],
                     check=expect_conv("Conv")),
            Testcase("conv_depthwise", _conv((1, 1), "SAME", _NHWC, kernel=_kernel((3, 3, 1, 6)), feature_group_count=3),
                     [("B", 5, 5, 3)], check=expect_conv("Conv")),
            Testcase("conv_grouped", _conv((1, 1), "VALID", feature_group_count=2), [("B", 4, 5, 5), (6, 2, 2, 2)],
                     check=expect_conv("Conv")),
            Testcase("conv_batch_group", _conv((1, 1), "VALID", batch_group_count=2), [(4, 3, 5, 5), (6, 3, 2, 2)],
                     check=expect_conv("Conv")),
            Testcase("conv_same_strided_symbolic_spatial", _conv((2, 2), "SAME", _NHWC, kernel=_kernel((3, 3, 2, 3), 1)),
                     [("B", "H", "W", 2)], check=expect_conv("Conv")),
            Testcase("conv_same_dilated_symbolic_spatial", _conv((1, 2), "SAME", rhs_dilation=(2, 1)),
                     [("B", 2, "H", "W"), (3, 2, 2, 3)], check=expect_conv("Conv", max_transposes=0)),
            Testcase("conv_1d_nwc", _conv((1,), "SAME", ("NWC", "WIO", "NWC")), [("B", "L", 2), (3, 2, 4)],
                     check=expect_conv("Conv")),
            Testcase("conv_3d", _conv((1, 2, 1), "VALID"), [("B", 2, 4, 5, 4), (3, 2, 2, 2, 2)],
                     check=expect_conv("Conv")),
            Testcase("conv_negative_padding", _conv((1, 1), ((-1, 0), (1, -1))), [("B", 2, 6, 6), (3, 2, 2, 2)],
                     check=expect_conv("Conv")),
            Testcase("conv_transpose", conv_transpose_nhwc, [("B", 4, 4, 2)], check=expect_conv("ConvTranspose")),
            Testcase("conv_transpose_grouped_dilated",
                     _conv((1, 1), ((1, 0), (2, 1)), lhs_dilation=(2, 2), rhs_dilation=(1, 2), feature_group_count=2),
                     [("B", 4, 3, 4), (6, 2, 2, 2)], check=expect_conv("ConvTranspose")),
            Testcase("conv_grads", conv_grads, [("B", 4, 5, 6), (6, 2, 2, 2)], check=expect_conv("Conv")),
            Testcase("conv_lhs_dilation_strided", _conv((2, 1), ((0, 0), (3, 1)), lhs_dilation=(3, 2)),
                     [("B", 2, 4, 3), (3, 2, 2, 2)], check=expect_conv("Conv")),
        ],
    ),
    Component(
        name="lax.conv_complex",
        onnx=["Conv", "Einsum", "Sub", "Add"],
        since="v0.1.0",
        description="complex convolutions as four real convolutions of the (real, imag) parts",
        testcases=[
            Testcase("conv_complex", _complex_conv((1, 1), "SAME"),
                     [("B", 2, 5, 5), ("B", 2, 5, 5), (3, 2, 3, 3), (3, 2, 3, 3)], check=expect_conv("Conv")),
            Testcase("conv_complex_nhwc_strided", _complex_conv((2, 1), ((1, 0), (2, 1)), _NHWC),
                     [("B", 5, 6, 2), ("B", 5, 6, 2), (2, 3, 2, 3), (2, 3, 2, 3)], check=expect_conv("Conv")),
            Testcase("conv_complex_1d_dilated_groups", _complex_conv((1,), "VALID", rhs_dilation=(2,),
                                                                     feature_group_count=2),
                     [("B", 4, 9), ("B", 4, 9), (6, 2, 3), (6, 2, 3)], check=expect_conv("Conv")),
            Testcase("conv_complex_real_input", _complex_kernel_real_input, [("B", 2, 7), (3, 2, 3), (3, 2, 3)],
                     check=expect_conv("Conv")),
        ],
    ),
]
