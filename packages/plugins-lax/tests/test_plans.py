"""The plans of the longest lowerings (gather, scatter, conv_general_dilated), checked without ONNX.

Each plan is built from the params and avals of an equation JAX itself traced, so these tests see
the dimension numbers real programs produce; nothing is exported or run in onnxruntime here (the
testcases in the pack's modules do that end to end).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import export, lax
from jax2onnx import compat
from jax2onnx.ir import runtime
from jax2onnx_lax.conv import ConvPlan, split_padding
from jax2onnx_lax.indexing import GatherPlan
from jax2onnx_lax.scatter import ScatterPlan

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _eqn(fn, *specs, primitive):
    """The first equation of ``primitive`` in ``fn``'s jaxpr (looking into nested jaxprs too)."""

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == primitive:
                return eqn
            for value in eqn.params.values():
                inner = getattr(value, "jaxpr", None)
                if inner is not None:
                    found = walk(inner if hasattr(inner, "eqns") else inner.jaxpr)
                    if found is not None:
                        return found
        return None

    eqn = walk(jax.make_jaxpr(fn)(*specs).jaxpr)
    assert eqn is not None, f"{primitive} not in the jaxpr"
    return eqn


def gather_plan(fn, *specs):
    eqn = _eqn(fn, *specs, primitive="gather")
    plan = GatherPlan.of(eqn.params, eqn.invars[0].aval, eqn.invars[1].aval, eqn.outvars[0].aval)
    # Whatever the path: squeezing then transposing the raw result gives exactly the output's axes.
    out_rank = len(eqn.outvars[0].aval.shape) + (1 if jnp.issubdtype(eqn.invars[0].aval.dtype, jnp.complexfloating) else 0)
    assert len(plan.labels) - len(plan.squeeze) == out_rank
    assert sorted(plan.perm) == list(range(out_rank))
    return plan


def scatter_plan(fn, *specs, primitive="scatter"):
    eqn = _eqn(fn, *specs, primitive=primitive)
    plan = ScatterPlan.of(eqn.params, *(v.aval for v in eqn.invars))
    # Every operand dim is either indexed (a row column) or written whole, exactly once.
    assert sorted(plan.data_perm) == list(range(plan.rank))
    assert len(plan.extra_sources) == len(plan.extra)
    return plan


def conv_plan(fn, *specs):
    eqn = _eqn(fn, *specs, primitive="conv_general_dilated")
    kernels = runtime.installed()
    return ConvPlan.of(eqn.params, *(v.aval for v in eqn.invars), eqn.outvars[0].aval,
                       conv_dtypes=kernels.dtypes("Conv") & kernels.dtypes("ConvTranspose"))


# ---------------------------------------------------------------------------------------------
# gather


def test_gather_rows_is_one_gather_on_axis_0():
    plan = gather_plan(lambda x, i: x[i], S((5, 3), F32), S((4,), I32))
    assert (plan.path, plan.indexed, plan.flat, plan.nb) == ("gather", (0,), True, 1)
    assert plan.labels == (("b", 0), ("o", 1)) and plan.perm == (0, 1)
    assert plan.clamp_upper == [4]  # a row start may be 0..4
    assert not plan.fill  # jnp's x[i] promises in-bounds indices


def test_gather_fill_mode_keeps_a_mask_over_the_window():
    plan = gather_plan(lambda x, i: x.at[i].get(mode="fill"), S((5, 3), F32), S((4,), I32))
    assert plan.fill and plan.mask_axes == (1,)


def test_take_along_axis_is_gather_elements():
    plan = gather_plan(lambda x, i: jnp.take_along_axis(x, i, axis=1), S((3, 4), F32), S((3, 2), I32))
    assert plan.path == "elements" and plan.indexed == (1,)
    assert plan.elements_order == (0, 1)  # index batch axis 0 pairs with operand axis 0


def test_scalar_index_is_one_slice_and_the_collapsed_axis_is_squeezed():
    plan = gather_plan(lambda x, i: jnp.take(x, i, axis=1), S((3, 4), F32), S((), I32))
    assert (plan.path, plan.nb, plan.indexed) == ("slice", 0, (1,))
    assert plan.labels == (("o", 0), ("o", 1)) and plan.squeeze == (1,) and plan.perm == (0,)


def test_vmapped_dynamic_slice_is_gather_nd_with_a_window_axis():
    fn = jax.vmap(lambda r, j: lax.dynamic_slice_in_dim(r, j, 2))
    plan = gather_plan(fn, S((4, 6), F32), S((4,), I32))
    assert plan.path == "nd" and plan.nd_batch == 1  # the vmapped axis pairs operand and index
    assert plan.nd_windowed == (0,)  # the window of 2 becomes an index axis
    assert plan.clamp_upper == [4]  # starts along the length-6 axis stop at 6 - 2


def test_point_gather_is_gather_nd_without_windows():
    plan = gather_plan(lambda x, i: x[i[:, 0], i[:, 1]], S((5, 3, 2), F32), S((4, 2), I32))
    assert (plan.path, plan.indexed, plan.rest) == ("nd", (0, 1), (2,))
    assert plan.nd_windowed == () and plan.labels == (("b", 0), ("o", 2))


def test_full_size_window_is_not_indexed():
    # A start along an axis taken whole clamps to 0: that axis needs no index column at all.
    fn = jax.vmap(lambda r, j: lax.dynamic_slice(r, (j, 0), (2, 3)))
    plan = gather_plan(fn, S((4, 5, 3), F32), S((4,), I32))
    assert plan.start_map == (1, 2) and plan.keep == (0,) and plan.indexed == (1,)


def test_complex_gather_keeps_the_pair_axis_last():
    plan = gather_plan(lambda x, i: x[i], S((5, 3), jnp.complex64), S((4,), I32))
    assert plan.op_shape == (5, 3, 2) and plan.sizes[-1] == 2
    assert plan.labels[-1] == ("o", 2) and plan.perm[-1] == 2


# ---------------------------------------------------------------------------------------------
# scatter


def test_row_scatter_writes_whole_rows():
    plan = scatter_plan(lambda x, i, u: x.at[i].set(u), S((5, 3), F32), S((2,), I32), S((2, 3), F32))
    assert (plan.scatter_map, plan.extra, plan.full, plan.expanded) == ((0,), (), (1,), ())
    assert plan.data_perm == (0, 1) and plan.depth == 1 and plan.clamp_upper == [4]
    assert plan.fill  # .at[].set drops out-of-range updates


def test_column_scatter_moves_the_indexed_axis_first():
    plan = scatter_plan(lambda x, i, u: x.at[:, i].add(u), S((5, 3), F32), S((2,), I32), S((5, 2), F32),
                        primitive="scatter-add")
    assert plan.data_perm == (1, 0) and plan.upd_perm == (1, 0)  # ScatterND indexes leading dims


def test_vmapped_scatter_indexes_the_batch_dim_with_iota():
    fn = jax.vmap(lambda r, j, v: r.at[j].set(v))
    plan = scatter_plan(fn, S((4, 6), F32), S((4,), I32), S((4,), F32))
    assert plan.scatter_map == (1,) and plan.extra == (0,)
    assert plan.extra_sources == (("iota", 0, 4),)  # row b of the update goes to operand row b
    assert plan.data_perm == (1, 0)


def test_vmapped_dynamic_update_slice_expands_the_window_into_index_axes():
    fn = jax.vmap(lambda r, j, v: lax.dynamic_update_slice_in_dim(r, v, j, 0))
    plan = scatter_plan(fn, S((4, 6), F32), S((4,), I32), S((4, 2), F32))
    assert plan.expanded == (1,) and plan.size[1] == 2 and plan.lead == 2
    assert plan.offset_columns == (0,)  # the window counts along the traced start's column
    assert plan.clamp_upper == [4] and not plan.fill


def test_complex_scatter_keeps_the_pair_axis_whole():
    plan = scatter_plan(lambda x, i, u: x.at[i].set(u), S((5, 3), jnp.complex64), S((2,), I32),
                        S((2, 3), jnp.complex64))
    assert plan.op_shape == (5, 3, 2) and plan.full == (1, 2) and plan.data_perm == (0, 1, 2)


# ---------------------------------------------------------------------------------------------
# conv_general_dilated

_NHWC = ("NHWC", "HWIO", "NHWC")


def _conv(strides, padding, dn=None, **kw):
    return lambda x, w: lax.conv_general_dilated(x, w, strides, padding, dimension_numbers=dn, **kw)


def test_nhwc_conv_transposes_to_nchw_and_back():
    plan = conv_plan(_conv((1, 1), "SAME", _NHWC), S((1, 5, 5, 2), F32), S((3, 3, 2, 4), F32))
    assert plan.lhs_perm == (0, 3, 1, 2) and plan.rhs_perm == (3, 2, 0, 1) and plan.out_perm == (0, 2, 3, 1)
    assert plan.path == "conv" and plan.conv_pads == (1, 1, 1, 1) and plan.kernel == (3, 3)
    assert plan.x_shape == (1, 2, 5, 5) and plan.out_nc == (1, 4, 5, 5)


def test_symbolic_same_padding_is_auto_pad():
    b, h, w = export.symbolic_shape("B, H, W")
    plan = conv_plan(_conv((2, 2), "SAME", _NHWC), S((b, h, w, 2), F32), S((3, 3, 2, 4), F32))
    assert plan.path == "conv_same"


def test_symbolic_same_padding_with_rhs_dilation_pads_explicitly():
    # onnxruntime rejects auto_pad together with dilations
    h, w = export.symbolic_shape("H, W")
    plan = conv_plan(_conv((1, 2), "SAME", rhs_dilation=(2, 1)), S((1, 2, h, w), F32), S((3, 2, 2, 3), F32))
    assert plan.path == "conv" and plan.explicit_pads is not None and plan.conv_pads == (0, 0, 0, 0)


def test_unit_stride_transposed_conv_is_conv_transpose():
    fn = lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=_NHWC)  # noqa: E731
    plan = conv_plan(fn, S((1, 4, 4, 2), F32), S((3, 3, 2, 4), F32))
    assert plan.path == "conv_transpose" and plan.lhs_dilation == (2, 2)
    assert plan.ct_pads == (0, 0, 1, 1) and plan.dilate_steps == ()


def test_strided_lhs_dilation_inserts_zeros_then_crops_the_tail():
    plan = conv_plan(_conv((2, 1), ((0, 0), (3, 1)), lhs_dilation=(3, 2)), S((1, 2, 4, 3), F32), S((3, 2, 2, 2), F32))
    assert plan.path == "conv"
    # 4 rows dilated by 3 are 12 (lax's 10 plus 2 trailing zeros), 3 columns by 2 are 6
    assert plan.dilate_steps == ((2, 3, (1, 2, 12, 3)), (3, 2, (1, 2, 12, 6)))
    assert plan.crop == ((0,), (-2,), (2,))  # the 2 trailing zero rows come off
    assert plan.conv_pads == (0, 3, 0, 0)  # columns: 3 low, 1 - 1 high


def test_int_conv_is_an_einsum_with_explicit_padding():
    plan = conv_plan(_conv((1, 1), ((-1, 0), (1, -1))), S((1, 2, 6, 6), I32), S((3, 2, 2, 2), I32))
    assert plan.path == "einsum" and plan.compute == jnp.int32
    assert plan.crop == ((1, 0), (2**63 - 1, -1), (2, 3))
    assert plan.explicit_pads == (0, 0, 0, 1, 0, 0, 0, 0) and plan.conv_pads == (0, 0, 0, 0)


def test_float64_conv_is_an_einsum():
    with compat.x64_enabled(True):
        plan = conv_plan(_conv((1, 1), "VALID"), S((1, 2, 5, 5), jnp.float64), S((3, 2, 2, 2), jnp.float64))
    assert plan.path == "einsum" and plan.explicit_pads is None


def test_batch_groups_fold_into_channel_groups():
    plan = conv_plan(_conv((1, 1), "VALID", batch_group_count=2), S((4, 3, 5, 5), F32), S((6, 3, 2, 2), F32))
    assert plan.x_shape == (2, 6, 5, 5) and plan.groups == 2 and plan.batch_groups == 2


@pytest.mark.parametrize(
    ("padding", "keep_static", "expected"),
    [
        # static, non-negative, native Conv: all in the pads attribute
        ([(1, 2), (0, 1)], True, (None, None, (1, 0, 2, 1))),
        # negative padding is a crop; what is left stays in the attribute
        ([(-1, 2), (0, -3)], True, (((1, 0), (2**63 - 1, -3), (2, 3)), None, (0, 0, 2, 0))),
        # the einsum path pads explicitly (N and C axes get no padding)
        ([(1, 2), (0, 1)], False, (None, (0, 0, 1, 0, 0, 0, 2, 1), (0, 0, 0, 0))),
        ([(0, 0), (0, 0)], False, (None, None, (0, 0, 0, 0))),
    ],
)
def test_split_padding(padding, keep_static, expected):
    assert split_padding(padding, 2, keep_static) == expected
