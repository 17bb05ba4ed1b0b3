"""Helpers shared by the shape, slicing, gather and scatter lowerings (no lowerings here).

Dims in JAX avals are ints or symbolic expressions (``B``, ``4*B``); two dims are "the same" when
they print the same, which is how JAX itself decides that ``B`` equals ``B``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.compat import is_symbolic_dim

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def same_dim(a: Any, b: Any) -> bool:
    return str(a) == str(b)


def same_shape(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b, strict=True))


def is_static(d: Any) -> bool:
    return not is_symbolic_dim(d)


def reshape(ctx: Any, x: ir.Value, in_shape: Sequence[Any], out_shape: Sequence[Any]) -> ir.Value:
    """Reshape ``x`` to ``out_shape`` with a constant target wherever that is exact.

    A constant target is exact when every dim is static, when exactly one dim is symbolic and all
    others are static and non-zero (``-1`` is then the only solution), or when every symbolic dim
    sits at the same index as the identical input dim (``0`` copies it) and no static dim is 0.
    Otherwise the target is computed in the graph, with ``allowzero=1`` so a runtime 0 stays 0.
    """
    if same_shape(in_shape, out_shape):
        return x
    symbolic = [i for i, d in enumerate(out_shape) if not is_static(d)]
    if not symbolic:
        dims = [int(d) for d in out_shape]
        return ctx.op.Reshape(x, ctx.i64(dims), allowzero=1 if 0 in dims else None)
    statics = [int(d) for d in out_shape if is_static(d)]
    if len(symbolic) == 1 and 0 not in statics:
        dims = [-1 if not is_static(d) else int(d) for d in out_shape]
        return ctx.op.Reshape(x, ctx.i64(dims))
    copyable = all(i < len(in_shape) and same_dim(in_shape[i], out_shape[i]) for i in symbolic)
    if copyable and 0 not in statics:
        dims = [0 if not is_static(d) else int(d) for d in out_shape]
        return ctx.op.Reshape(x, ctx.i64(dims))
    return ctx.op.Reshape(x, ctx.shape_tensor(list(out_shape)), allowzero=1)


def clamp_starts(ctx: Any, starts: ir.Value, upper: Sequence[Any]) -> ir.Value:
    """Clamp int64 start indices (last axis = one entry per dim) into ``[0, upper]`` like XLA does,
    so a slice or window never leaves the operand. ``upper`` holds ``dim - size`` per entry."""
    lo = ctx.op.Max(starts, 0)
    if all(is_static(u) for u in upper) and len(set(int(u) for u in upper)) == 1:
        return ctx.op.Min(lo, int(upper[0]))
    return ctx.op.Min(lo, ctx.shape_tensor(list(upper)))


def transpose(ctx: Any, x: ir.Value, perm: Sequence[int]) -> ir.Value:
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    return ctx.op.Transpose(x, perm=perm)


def inverse_perm(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def mode_name(mode: Any) -> str:
    """``"clip"``, ``"fill"`` or ``"promise"`` for a GatherScatterMode (None means FILL_OR_DROP,
    as in ``GatherScatterMode.from_any``)."""
    if mode is None:
        return "fill"
    name = str(getattr(mode, "name", mode)).upper()
    if "CLIP" in name:
        return "clip"
    if "FILL" in name:
        return "fill"
    return "promise"
