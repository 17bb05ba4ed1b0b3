"""Testcases of :mod:`jax2onnx_lax.lax_misc` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec
from jax2onnx import compat
from jax2onnx.testing import Component, Testcase


def _reduce_max_with_floor(x):
    return lax.reduce(x, np.asarray(0.0, x.dtype), lambda a, b: jnp.maximum(a, b), (1,))


def _reduce_sum_and_prod(x):
    one, zero = np.asarray(1.0, x.dtype), np.asarray(0.0, x.dtype)
    return lax.reduce((x, x), (zero, one), lambda a, b: (a[0] + b[0], a[1] * b[1]), (0,))


def _argmax_reduce(x):
    """Variadic (value, index) reduction: the largest value, lowest index among ties (associative
    and commutative, so the fold order cannot change the result)."""
    idx = lax.broadcasted_iota(jnp.int32, x.shape, 1)

    def pick(a, b):
        (va, ia), (vb, ib) = a, b
        take_b = (vb > va) | ((vb == va) & (ib < ia))
        return jnp.where(take_b, vb, va), jnp.where(take_b, ib, ia)

    init = (np.asarray(-np.inf, x.dtype), np.asarray(np.iinfo(np.int32).max, np.int32))
    return lax.reduce((x, idx), init, pick, (1,))


def _logsumexp_fold(x):
    """A custom computation that is not a single monoid: log(exp(a) + exp(b)), over two axes."""
    return lax.reduce(x, np.asarray(-np.inf, x.dtype), lambda a, b: jnp.logaddexp(a, b), (0, 2))


def _one_device_shard_map(x):
    mesh = jax.make_mesh((1,), ("x",))
    return jax.shard_map(lambda v: jnp.sin(v) * 2.0, mesh=mesh, in_specs=PartitionSpec(),
                         out_specs=PartitionSpec())(x)


def _constrained(x):
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    y = jax.lax.with_sharding_constraint(x * 2.0, jax.sharding.NamedSharding(mesh, PartitionSpec()))
    return y + 1.0


def _ragged_inputs(rng, shape, dtype):
    """Group sizes that do not cover every row (the rest of the rows are zero in the result)."""
    if np.dtype(dtype).kind == "i":
        sizes = rng.integers(0, 3, size=shape)
        return sizes
    return rng.standard_normal(shape)


def _dce_sink(x):
    compat.lax_primitive("dce_sink").bind(x * 2.0, prevent_mlir_dce=True)
    return x + 1.0


def _int_extremes(dtype):
    info = np.iinfo(dtype)
    vals = [0, 1, -1, 2, 3, info.max, info.min, info.max - 1, info.min + 1, 12345, -12345, 1 << (info.bits // 2)]
    vals = [v for v in vals if info.min <= v <= info.max]
    return np.asarray(vals, dtype=dtype)


def _missing(name: str) -> str | None:
    """A skip reason where this JAX lacks ``lax.<name>`` (JAX 0.6, core's floor, has no ``mulhi``,
    ``stage`` or ``dce_sink``): the module must import there, and the case cannot run."""
    if hasattr(lax, name):
        return None
    return f"this JAX ({jax.__version__}) has no lax.{name}"


def _missing_primitive(name: str) -> str | None:
    try:
        compat.lax_primitive(name)
    except LookupError as exc:
        return str(exc)
    return None


def _mulhi(x, y):
    return lax.mulhi(x, y)  # looked up at call time: JAX 0.6 has no lax.mulhi


def _mulhi_case(dtype):
    a = _int_extremes(dtype)
    x = np.repeat(a, len(a))
    y = np.tile(a, len(a))
    return Testcase(f"mulhi_{np.dtype(dtype).name}", _mulhi, input_values=[x, y], run_f64=False,
                    skip_reason=_missing("mulhi"))


components = [
    Component("lax.reduce", onnx=["ReduceMax", "ReduceSum", "Loop"], since="v0.8.0", testcases=[
        Testcase("reduce_max_custom_init", _reduce_max_with_floor, [("B", 5)], expected_ops=["ReduceMax"],
                 forbidden_ops=["Loop"]),
        Testcase("reduce_variadic_monoids", _reduce_sum_and_prod, [(4, "B")], expected_ops=["ReduceSum"],
                 forbidden_ops=["Loop"]),
        Testcase("reduce_variadic_argmax", _argmax_reduce, [("B", 6)], expected_ops=["Loop"]),
        Testcase("reduce_logaddexp_fold", _logsumexp_fold, [(3, "B", 4)], expected_ops=["Loop"]),
    ]),
    Component("lax.approx_top_k", onnx=["TopK"], since="v0.8.0", testcases=[
        Testcase("approx_max_k", lambda x: lax.approx_max_k(x, 3), [("B", 10)], expected_ops=["TopK"]),
        Testcase("approx_min_k_axis0", lambda x: lax.approx_min_k(x, 2, reduction_dimension=0), [(8, "B")],
                 expected_ops=["TopK"]),
        Testcase("approx_max_k_not_aggregated", lambda x: lax.approx_max_k(x, 2, aggregate_to_topk=False),
                 [(2, 7)], expected_ops=["TopK"]),
    ]),
    Component("lax.mulhi", onnx=["Mul", "BitShift"], since="v0.8.0", testcases=[
        _mulhi_case(np.int32), _mulhi_case(np.uint32), _mulhi_case(np.int8), _mulhi_case(np.uint16),
        Testcase("mulhi_int64", _mulhi, input_values=[_int_extremes(np.int64).repeat(12)[:144],
                                                      np.tile(_int_extremes(np.int64), 12)[:144]],
                 run_static=True, skip_reason=_missing("mulhi")),
        Testcase("mulhi_uint64", _mulhi, input_values=[_int_extremes(np.uint64).repeat(6),
                                                       np.tile(_int_extremes(np.uint64), 6)],
                 skip_reason=_missing("mulhi")),
    ]),
    Component("lax.ragged_dot_general", onnx=["MatMul", "CumSum"], since="v0.8.0", testcases=[
        Testcase("ragged_dot", lax.ragged_dot, [(7, 4), (3, 4, 5), jax.ShapeDtypeStruct((3,), jnp.int32)],
                 input_values=None, input_generator=_ragged_inputs),
        Testcase("ragged_dot_symbolic_rows", lax.ragged_dot, [("M", 4), (3, 4, 2), jax.ShapeDtypeStruct((3,), jnp.int32)],
                 input_generator=_ragged_inputs),
        # bfloat16 computes in float32 (it used to take the int path: numpy's kind for bfloat16 is "V")
        Testcase("ragged_dot_bfloat16",
                 lambda a, b, g: lax.ragged_dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), g).astype(a.dtype),
                 input_values=[np.asarray([[1.5, 2.25], [0.5, -1.0], [3.0, 0.125]], np.float32),
                               np.asarray([[[1.0, 2.0], [0.5, 0.25]], [[-1.0, 1.5], [2.0, 0.75]]], np.float32),
                               np.asarray([2, 1], np.int32)], rtol=2e-2, atol=2e-2, rtol_f64=2e-2, atol_f64=2e-2),
    ]),
    Component("lax.composite", onnx=["Mul"], since="v0.8.0", testcases=[
        Testcase("composite", lambda x: lax.composite(lambda v: v * 2.0 + jnp.tanh(v), name="my.op")(x), [("B", 3)]),
        Testcase("stage", lambda x: lax.stage(x) * 3.0, [("B", 3)], skip_reason=_missing("stage")),
        Testcase("tie", lambda x, y: compat.lax_primitive("tie").bind(x, y) * 3.0, [("B", 3), ("B", 3)]),
        Testcase("dce_sink", _dce_sink, [("B", 3)], skip_reason=_missing_primitive("dce_sink")),
    ]),
    Component("lax.shard_map", onnx=["Sin"], since="v0.8.0", testcases=[
        Testcase("shard_map_one_device", _one_device_shard_map, [("B", 3)], expected_ops=["Sin"]),
        Testcase("sharding_constraint", _constrained, [("B", 3)]),
    ]),
]
