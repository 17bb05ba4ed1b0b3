"""The remaining lax primitives: generic ``reduce``, ``approx_top_k``, and the sharding primitives of
a one-device program (``sharding_constraint``, ``reshard``, ``mesh_cast``, ``pvary``, ``shard_map``).

- ``reduce`` with a custom computation: when every output of the computation is one monoid
  primitive of its own pair of operands (add, mul, max, min, and, or: what ``lax.reduce`` with a
  ``jnp`` lambda produces), it is that reduction (lowered by the pack's ``reduce_*`` lowerings)
  combined once with the init value. Any other computation (a variadic argmax, an arbitrary fold) is
  an ONNX ``Loop`` over the reduced elements, folding them in order into the init values with the
  computation applied elementwise. XLA leaves the order of a reduction unspecified, so a computation
  that is not associative and commutative has no single right answer; the Loop's left fold is what
  XLA's CPU backend does.
- ``approx_top_k``: off TPU JAX computes it exactly (sort and slice), so it is ``TopK`` with the
  output's k along the reduction dimension (lower index first among equal values, as a stable sort).
- Sharding annotations are identities for a one-device model; ``shard_map`` over a one-device mesh
  is its body inlined. A mesh of several devices is declined with an error naming it: a single ONNX
  graph has no devices to shard over.
"""

from __future__ import annotations

import math

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec
from jax2onnx import compat
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _matrix as mx

lowerings = Lowerings()

#: monoid primitive -> (its reduction, the binary op that folds in the init value)
_MONOIDS = {
    "add": (lax.reduce_sum, lax.add), "mul": (lax.reduce_prod, lax.mul), "max": (lax.reduce_max, lax.max),
    "min": (lax.reduce_min, lax.min), "and": (lax.reduce_and, lax.bitwise_and),
    "or": (lax.reduce_or, lax.bitwise_or),
}


def _monoids(jaxpr, n):
    """The monoid primitive name per output, or None when the computation is not that simple."""
    if len(jaxpr.eqns) != n or len(jaxpr.invars) != 2 * n:
        return None
    names = []
    for k, out in enumerate(jaxpr.outvars):
        eqn = next((e for e in jaxpr.eqns if out in e.outvars), None)
        if eqn is None or eqn.primitive.name not in _MONOIDS or any(v is not None for v in eqn.params.values()):
            return None
        if {id(v) for v in eqn.invars} != {id(jaxpr.invars[k]), id(jaxpr.invars[n + k])}:
            return None
        names.append(eqn.primitive.name)
    return names


@lowerings.register("reduce")
def lower_reduce(ctx, *args):
    p = ctx.params
    closed = p["jaxpr"]
    n = len(args) // 2
    axes = tuple(int(d) for d in p["dimensions"])
    operands, inits = list(args[:n]), list(args[n:])
    in_avals, init_avals = ctx.avals_in[:n], ctx.avals_in[n:]
    names = _monoids(closed.jaxpr, n)
    if names is not None:
        outs = []
        for name, x, init, xa, ia in zip(names, operands, inits, in_avals, init_avals, strict=True):
            reduce_fn, combine = _MONOIDS[name]

            def fn(v, i, reduce_fn=reduce_fn, combine=combine):
                return combine(reduce_fn(v, axes), i)

            specs = [jax.ShapeDtypeStruct(xa.shape, xa.dtype), jax.ShapeDtypeStruct(ia.shape, ia.dtype)]
            traced, _ = compat.make_jaxpr(fn, specs)
            outs.extend(ctx.lower_jaxpr(traced, [x, init]))
        return outs
    return _fold_loop(ctx, closed, axes, operands, inits, in_avals)


def _fold_loop(ctx, closed, axes, operands, inits, in_avals):
    """Fold the reduced elements one by one: ``acc = computation(acc, x[i])`` in a Loop."""
    shape = in_avals[0].shape
    if any(compat.is_symbolic_dim(shape[a]) for a in axes):
        raise NotImplementedError(
            f"reduce: a custom reduction over symbolic dims {[shape[a] for a in axes]} is not supported; "
            "reduce over static dims, or use a standard reduction (sum/max/...)"
        )
    kept = [d for d in range(len(shape)) if d not in axes]
    out_shape = [shape[d] for d in kept]
    count = math.prod(int(shape[a]) for a in axes)
    op = ctx.op
    flat = []
    for x in operands:
        t = op.Transpose(x, perm=[*axes, *kept]) if list(axes) + kept != list(range(len(shape))) else x
        flat.append(op.Reshape(t, ctx.shape_tensor([count, *out_shape])))
    accs = [op.Expand(i, ctx.shape_tensor(out_shape)) for i in inits]
    out_avals = [mx.aval(out_shape, a.dtype) for a in ctx.avals_out]
    # the computation on scalars, applied elementwise to whole [*out_shape] arrays
    fn = jnp.vectorize(lambda *xs: tuple(jex_core.jaxpr_as_fun(closed)(*xs)))
    specs = [jax.ShapeDtypeStruct(tuple(out_shape), a.dtype) for a in out_avals] * 2
    body_jaxpr, _ = compat.make_jaxpr(fn, specs)

    def step(sub, i, *acc):
        elems = [sub.op.Gather(f, i, axis=0) for f in flat]
        return sub.lower(body_jaxpr, [*acc, *elems])

    if count == 0:
        return accs
    return mx.loop(ctx, count, list(zip(accs, out_avals, strict=True)), step, "reduce_fold")


@lowerings.register("approx_top_k")
def lower_approx_top_k(ctx, x):
    p = ctx.params
    rank = len(ctx.avals_in[0].shape)
    axis = int(p["reduction_dimension"]) % rank
    k = ctx.avals_out[0].shape[axis]
    values, idx = ctx.op.TopK(x, ctx.i64([int(k)]) if not compat.is_symbolic_dim(k) else ctx.dim(k),
                              axis=axis, largest=int(bool(p["is_max_k"])), sorted=1, _outputs=2)
    return [values, ctx.cast(idx, ctx.avals_out[1].dtype)]


@lowerings.register("sharding_constraint", "reshard", "mesh_cast", "pvary")
def lower_sharding_identity(ctx, *xs):
    """A layout annotation: the value itself on one device."""
    outs = [ctx.op.Identity(x) for x in xs]
    return outs if len(ctx.avals_out) > 1 else outs[0]


@lowerings.register("shard_map")
def lower_shard_map(ctx, *args):
    mesh = ctx.params["mesh"]
    size = math.prod(int(s) for s in getattr(mesh, "axis_sizes", (getattr(mesh, "size", 1),)))
    if size != 1:
        raise NotImplementedError(
            f"shard_map over a mesh of {size} devices has no ONNX lowering (an ONNX graph runs on one device); "
            "export the per-device function, or use a one-device mesh"
        )
    return ctx.lower_jaxpr(compat.ClosedJaxpr(ctx.params["jaxpr"], ()), list(args))


# ---------------------------------------------------------------------------------------------
# testcases


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
    Component("lax.shard_map", onnx=["Sin"], since="v0.8.0", testcases=[
        Testcase("shard_map_one_device", _one_device_shard_map, [("B", 3)], expected_ops=["Sin"]),
        Testcase("sharding_constraint", _constrained, [("B", 3)]),
    ]),
]
