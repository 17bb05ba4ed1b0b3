"""The remaining lax primitives: generic ``reduce``, ``approx_top_k``, ``mulhi``, ``ragged_dot_general``, the wrappers around a
jaxpr (``composite``, ``eval_jaxpr``: inlined; ``stage``, ``tie``, ``dce_sink``: identities or
nothing), and the sharding primitives of a one-device program (``sharding_constraint``,
``reshard``, ``mesh_cast``, ``pvary``, ``shard_map``).

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
- ``mulhi``: the high half of the double-width product. Up to 32 bits it is the exact product in
  int64/uint64 shifted down (a floor division for signed operands); 64-bit operands are split into
  32-bit halves (four partial products in uint64 and a carry), with the signed correction
  ``- (x < 0 ? y : 0) - (y < 0 ? x : 0)`` in wrapping arithmetic.
- ``ragged_dot_general`` in ``lax.ragged_dot``'s form (lhs rows split into consecutive groups, one
  rhs matrix per group; rows past the last group are zero): every group's product ``lhs @ rhs[g]``
  by one broadcasting MatMul, each row taking its group's (a Where and a sum of one nonzero term).
  That costs ``groups`` times the FLOPs of the ragged product; other dimension layouts are declined.
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
from jax2onnx import compat
from jax2onnx.dtypes import BF16, is_float
from jax2onnx.plugin import Lowerings

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


@lowerings.register("ragged_dot_general")
def lower_ragged_dot_general(ctx, lhs, rhs, group_sizes):
    p = ctx.params
    dn = p["ragged_dot_dimension_numbers"]
    lhs_aval, rhs_aval, gs_aval = ctx.avals_in
    standard = (tuple(map(tuple, dn.dot_dimension_numbers[0])) == ((1,), (1,))
                and not any(dn.dot_dimension_numbers[1]) and tuple(dn.lhs_ragged_dimensions) == (0,)
                and tuple(dn.rhs_group_dimensions) == (0,) and len(lhs_aval.shape) == 2
                and len(rhs_aval.shape) == 3 and p.get("group_offset") is None)
    if not standard:
        raise NotImplementedError(
            f"ragged_dot_general: only lax.ragged_dot's layout (lhs [m, k] ragged along m, rhs [g, k, n]) is "
            f"lowered; got {dn}. Rewrite with lax.ragged_dot or a dense dot per group")
    m = lhs_aval.shape[0]
    groups = rhs_aval.shape[0]
    out_dtype = np.dtype(ctx.avals_out[0].dtype)
    op = ctx.op
    # bfloat16 (numpy kind "V") in float32, like the products XLA accumulates; ints in int32/int64
    compute = (np.dtype(np.float32) if out_dtype == BF16 else out_dtype if is_float(out_dtype)
               else np.dtype(np.int64 if out_dtype.itemsize == 8 else np.int32))
    prods = op.MatMul(ctx.cast(lhs, compute), ctx.cast(rhs, compute))  # [g, m, n]
    ends = op.CumSum(ctx.cast(group_sizes, np.int64), ctx.i64(0))  # [g]
    starts = op.Sub(ends, ctx.cast(group_sizes, np.int64))
    rows = op.Range(ctx.i64(0), ctx.dim_scalar(m), ctx.i64(1))  # [m]
    r = op.Unsqueeze(rows, ctx.i64([0]))  # [1, m]
    member = op.And(op.GreaterOrEqual(r, op.Unsqueeze(starts, ctx.i64([1]))),
                    op.Less(r, op.Unsqueeze(ends, ctx.i64([1]))))  # [g, m]
    zero = np.zeros((), dtype=compute)
    picked = op.ReduceSum(op.Where(op.Unsqueeze(member, ctx.i64([2])), prods, zero), ctx.i64([0]), keepdims=0)
    del groups
    return ctx.cast(picked, out_dtype)


def _closed(j):
    return j if hasattr(j, "consts") else compat.ClosedJaxpr(j, ())


@lowerings.register("composite")
def lower_composite(ctx, *args):
    """A named region (``lax.composite``): its decomposition, inlined."""
    return ctx.lower_jaxpr(_closed(ctx.params["jaxpr"]), list(args))


@lowerings.register("eval_jaxpr")
def lower_eval_jaxpr(ctx, *args):
    return ctx.lower_jaxpr(_closed(ctx.params["jaxpr"]), list(args))


@lowerings.register("stage")
def lower_stage(ctx, x):
    return ctx.op.Identity(x)


@lowerings.register("tie")
def lower_tie(ctx, _x, y):
    """``tie(x, y)`` is ``y`` (x only orders the computation, which a dataflow graph need not)."""
    return ctx.op.Identity(y)


@lowerings.register("dce_sink")
def lower_dce_sink(ctx, *_xs):
    """Keeps a value alive in XLA; an ONNX graph has no outputs for it."""
    return []


@lowerings.register("mulhi")
def lower_mulhi(ctx, x, y):
    dtype = np.dtype(ctx.avals_in[0].dtype)
    op = ctx.op
    bits = dtype.itemsize * 8
    if bits <= 32:
        wide = np.dtype(np.int64) if dtype.kind == "i" else np.dtype(np.uint64)
        prod = op.Mul(ctx.cast(x, wide), ctx.cast(y, wide))
        if dtype.kind == "u":
            hi = op.BitShift(prod, np.asarray(bits, wide), direction="RIGHT")
        else:  # floor(prod / 2**bits): Mod with a positive divisor is non-negative (fmod=0)
            scale = np.asarray(1 << bits, wide)
            hi = op.Div(op.Sub(prod, op.Mod(prod, scale)), scale)
        return ctx.cast(hi, dtype)
    u64 = np.dtype(np.uint64)
    xu, yu = ctx.cast(x, u64), ctx.cast(y, u64)
    mask, shift = np.asarray(0xFFFFFFFF, u64), np.asarray(32, u64)

    def lo(v):
        return op.BitwiseAnd(v, mask)

    def hi(v):
        return op.BitShift(v, shift, direction="RIGHT")

    x_lo, x_hi, y_lo, y_hi = lo(xu), hi(xu), lo(yu), hi(yu)
    lo_lo, lo_hi, hi_lo, hi_hi = op.Mul(x_lo, y_lo), op.Mul(x_lo, y_hi), op.Mul(x_hi, y_lo), op.Mul(x_hi, y_hi)
    cross = op.Add(op.Add(lo(lo_hi), lo(hi_lo)), hi(lo_lo))
    out = op.Add(hi_hi, op.Add(hi(lo_hi), op.Add(hi(hi_lo), hi(cross))))
    out = ctx.cast(out, dtype)
    if dtype.kind == "i":
        zero = np.asarray(0, dtype)
        out = op.Sub(out, op.Where(op.Less(x, zero), y, zero))
        out = op.Sub(out, op.Where(op.Less(y, zero), x, zero))
    return out
