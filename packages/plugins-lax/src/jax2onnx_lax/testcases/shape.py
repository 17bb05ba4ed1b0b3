"""Testcases of :mod:`jax2onnx_lax.shape` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax2onnx.testing import Component, Testcase

_I32 = jnp.int32


def _int_scalar_outputs(n):
    """The model has ``n`` rank-0 outputs of JAX's int dtype: int32, int64 in double precision
    (x64 mode), as ``jnp.asarray`` of a returned Python int gives."""

    def check(model, variant):
        want = 7 if variant.double else 6  # TensorProto INT64 / INT32
        found = [o for o in model.graph.output if o.type.tensor_type.elem_type == want
                 and len(o.type.tensor_type.shape.dim) == 0 and o.type.tensor_type.HasField("shape")]
        assert len(found) == n, f"{len(found)} rank-0 outputs of elem_type {want}, want {n}: {model.graph.output}"

    return check


def _float():
    """float32, or float64 in the double-precision variants (evaluated while tracing)."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _bcast(shape, dims):
    return lambda x: lax.broadcast_in_dim(x, shape, dims)


components = [
    Component(
        name="lax.reshape",
        onnx=["Reshape"],
        since="v0.2.0",
        testcases=[
            Testcase("reshape", lambda x: lax.reshape(x, (9,)), [(3, 3)], expected_ops=["Reshape"]),
            Testcase("reshape_valid_squeeze_middle_dim_from_problematic_source",
                     lambda x: lax.reshape(x, (x.shape[0], x.shape[2])), [("B", 1, 4)], expected_ops=["Reshape"]),
            Testcase("reshape_valid_flatten_trailing", lambda x: lax.reshape(x, (x.shape[0], x.shape[1] * x.shape[2])),
                     [("B", 3, 4)], expected_ops=["Reshape"]),
            # new_sizes holds 4*B, which only the graph can compute from the input's shape.
            Testcase("reshape_with_target_shape_from_symbolic_dim_computation",
                     lambda x: lax.reshape(x, (x.shape[0] * x.shape[1], 2)), [("B", 4, 2)], expected_ops=["Reshape"]),
            Testcase("reshape_with_inferred_dimension_from_input", lambda x: jnp.reshape(x, (-1, 6)), [("B", 2, 3)],
                     expected_ops=["Reshape"]),
            # Two symbolic dims that both move: the target is computed in the graph.
            Testcase("reshape_with_inferred_dimension_from_input_dynamic", lambda x: jnp.reshape(x, (-1, x.shape[1] * 3)),
                     [("B", "N", 3)], expected_ops=["Reshape"], run_static=False),
            Testcase("reshape_merge_two_symbols", lambda x: lax.reshape(x, (x.shape[0] * x.shape[1],)), [("B", "N")],
                     expected_ops=["Reshape"]),
            Testcase("reshape_int32", lambda x: lax.reshape(x, (x.shape[0], 2, 2)), [jax.ShapeDtypeStruct(("B", 4), _I32)],
                     expected_ops=["Reshape"]),
            Testcase("reshape_to_scalar", lambda x: lax.reshape(x, ()), [(1, 1)], expected_ops=["Reshape"]),
        ],
    ),
    Component(
        name="lax.broadcast_in_dim",
        onnx=["Expand", "Unsqueeze", "Reshape"],
        since="v0.2.0",
        testcases=[
            Testcase("broadcast_in_dim", _bcast((3, 4), (1,)), [(4,)], expected_ops=["Expand"]),
            Testcase("broadcast_in_dim_2d_to_3d", _bcast((2, 3, 4), (1, 2)), [(3, 4)], expected_ops=["Expand"]),
            Testcase("broadcast_in_dim_scalar", _bcast((2, 3), ()), [()], expected_ops=["Expand"]),
            # The batch dim is carried by the operand: the Expand target stays a constant.
            Testcase("broadcast_in_dim_batch", lambda x: lax.broadcast_in_dim(x, (x.shape[0], 5, 3), (0, 2)),
                     [("B", 3)], expected_ops=["Unsqueeze", "Expand"]),
            # The target size is symbolic and not on the operand: computed from the other input.
            Testcase("broadcast_in_dim_symbolic_target", lambda x, y: lax.broadcast_in_dim(x, (y.shape[0], 3), (1,)) + y,
                     [(3,), ("B", 3)], expected_ops=["Expand"]),
            Testcase("broadcast_in_dim_unit_axes_only", _bcast((1, 3, 1), (1,)), [(3,)], expected_ops=["Unsqueeze"],
                     forbidden_ops=["Expand"]),
            Testcase("broadcast_in_dim_to_empty", lambda x: lax.broadcast_in_dim(x, (x.shape[0], 1, 0), (0, 1)),
                     [("B", 1)]),
            Testcase("broadcast_in_dim_size1_to_n", lambda x: lax.broadcast_in_dim(x, (x.shape[0], 4), (0, 1)),
                     [("B", 1)], expected_ops=["Expand"], forbidden_ops=["Unsqueeze"]),
        ],
    ),
    Component(
        name="lax.expand_dims",
        onnx=["Unsqueeze"],
        since="v0.2.0",
        description="lax.expand_dims traces to broadcast_in_dim with only unit axes added: one Unsqueeze.",
        testcases=[
            Testcase("expand_dims", lambda x: lax.expand_dims(x, (0, 2)), [("B", 3)], expected_ops=["Unsqueeze"],
                     forbidden_ops=["Expand"]),
        ],
    ),
    Component(
        name="lax.squeeze",
        onnx=["Squeeze"],
        since="v0.2.0",
        testcases=[
            Testcase("lax_squeeze_specific_axis_0", lambda x: lax.squeeze(x, (0,)), [(1, 3)], expected_ops=["Squeeze"]),
            Testcase("lax_squeeze_multiple_axes", lambda x: lax.squeeze(x, (0, 2, 4)), [(1, 3, 1, 4, 1)],
                     expected_ops=["Squeeze"]),
            Testcase("lax_squeeze_no_op_empty_dims", lambda x: lax.squeeze(x, ()) * 2.0, [(2, 3)], forbidden_ops=["Squeeze"]),
            Testcase("lax_squeeze_problem_case_input_squeeze_only_axis_0", lambda x: lax.squeeze(x, (0,)), [(1, "B", 2)],
                     expected_ops=["Squeeze"]),
            Testcase("lax_squeeze_problem_case_input_squeeze_axes_0_2", lambda x: lax.squeeze(x, (0, 2)), [(1, "B", 1, 3)],
                     expected_ops=["Squeeze"]),
            Testcase("lax_squeeze_problem_case_input_squeeze_all_dims_explicitly", lambda x: lax.squeeze(x, (0, 1, 2)),
                     [(1, 1, 1)], expected_ops=["Squeeze"]),
        ],
    ),
    Component(
        name="lax.transpose",
        onnx=["Transpose"],
        since="v0.2.0",
        testcases=[
            Testcase("transpose_basic", lambda x: lax.transpose(x, (1, 0)), [(2, 3)], expected_ops=["Transpose"]),
            Testcase("transpose_3d_batch", lambda x: lax.transpose(x, (2, 0, 1)), [("B", 3, 4)], expected_ops=["Transpose"]),
        ],
    ),
    Component(
        name="lax.concatenate",
        onnx=["Concat"],
        since="v0.2.0",
        testcases=[
            Testcase("concatenate", lambda x, y: lax.concatenate([x, y], 0), [(3,), (3,)], expected_ops=["Concat"]),
            Testcase("concatenate_axis1", lambda x, y: lax.concatenate([x, y], 1), [("B", 2), ("B", 3)],
                     expected_ops=["Concat"]),
            Testcase("concatenate_axis0", lambda x, y: lax.concatenate([x, y], 0), [("B", 3), (2, 3)],
                     expected_ops=["Concat"]),
            Testcase("concatenate_3d", lambda x, y, z: lax.concatenate([x, y, z], 1), [(2, 1, 4), (2, 3, 4), (2, 2, 4)],
                     expected_ops=["Concat"]),
            Testcase("concatenate_int32", lambda x, y: lax.concatenate([x, y], 1),
                     [jax.ShapeDtypeStruct(("B", 2), _I32), jax.ShapeDtypeStruct(("B", 1), _I32)], expected_ops=["Concat"]),
        ],
    ),
    Component(
        name="lax.split",
        onnx=["Split"],
        since="v0.7.0",
        testcases=[
            Testcase("split_equal", lambda x: tuple(lax.split(x, (2, 2), axis=1)), [("B", 4)], expected_ops=["Split"]),
            Testcase("split_uneven_axis0", lambda x: tuple(lax.split(x, (1, 3, 2), axis=0)), [(6, "B")],
                     expected_ops=["Split"]),
            # sizes holding the symbol: the split sizes are computed in the graph.
            Testcase("split_symbolic_sizes", lambda x: tuple(lax.split(x, (x.shape[0] - 1, 1), axis=0)), [("B", 3)],
                     expected_ops=["Split"]),
        ],
    ),
    Component(
        name="lax.iota",
        onnx=["Range"],
        since="v0.5.0",
        testcases=[
            # Static iotas fold into constants; the numbers are what is checked.
            Testcase("iota_int32", lambda: lax.iota(jnp.int32, 5)),
            Testcase("iota_float32", lambda: lax.iota(_float(), 5)),
            Testcase("broadcasted_iota", lambda: lax.broadcasted_iota(jnp.int32, (2, 3), 1)),
            Testcase("iota_symbolic_length", lambda x: x + lax.iota(x.dtype, x.shape[0]), [("B",)],
                     expected_ops=["Range"], run_static=False),
            Testcase("broadcasted_iota_symbolic", lambda x: x + lax.broadcasted_iota(x.dtype, x.shape, 0),
                     [("B", 3)], expected_ops=["Range", "Expand"], run_static=False),
            Testcase("broadcasted_iota_int8_symbolic",
                     lambda x: lax.broadcasted_iota(jnp.int8, (x.shape[0], 2), 0), [("B", 2)],
                     expected_ops=["Range", "Cast"], run_static=False),
        ],
    ),
    Component(
        name="core.dim_as_value",
        onnx=["Shape", "Squeeze", "Cast"],
        since="v0.5.0",
        testcases=[
            Testcase("dim_as_value", lambda x: jnp.asarray(x.shape[0]), [("B", 3)]),
            # The common use: scale by the batch size (dim_as_value, then a Cast to the float dtype).
            Testcase("dim_as_value_scale", lambda x: x * x.shape[0], [("B", 3)], run_static=False),
            Testcase("dim_as_value_product", lambda x: jnp.full((2,), x.shape[0] * x.shape[1]), [("B", "N")],
                     expected_ops=["Mul", "Expand"], run_static=False),
        ],
    ),
    Component(
        name="core.int_scalar_outputs",
        onnx=["Shape", "Squeeze"],
        since="v0.1.0",
        description="a returned symbolic dim or Python int is a scalar output of JAX's int dtype (int32; int64 in x64)",
        # reference_jit=False: the function itself returns the Python int (jax.jit would make it int32).
        testcases=[
            Testcase("return_dim", lambda x: x.shape[0], [("B", 3)], check=_int_scalar_outputs(1),
                     reference_jit=False),
            Testcase("return_dim_expr", lambda x: x.shape[0] * 2 + x.shape[1], [("B", "N")],
                     check=_int_scalar_outputs(1), reference_jit=False),
            Testcase("return_python_int", lambda x: (jnp.sin(x), 7), [("B", 3)], check=_int_scalar_outputs(1),
                     reference_jit=False),
            Testcase("return_dims_in_a_pytree", lambda x: {"y": x * 2.0, "n": x.shape[0], "size": x.shape[0] * 3},
                     [("B", 3)], check=_int_scalar_outputs(2), reference_jit=False),
            # float and bool Python scalars are JAX's own outputs (weak-typed float32 / float64, bool)
            Testcase("return_python_float_and_bool", lambda x: (x, 2.5, True, 3), [("B", 3)],
                     check=_int_scalar_outputs(1), reference_jit=False),
        ],
    ),
]
