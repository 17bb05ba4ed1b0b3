"""A test-only plugin pack: just enough lowerings for core's own tests (core lowers nothing itself)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from jax2onnx import hookimpl
from jax2onnx.lower.registry import PluginRegistry, set_registry
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()

for _prim, _op in {"sin": "Sin", "cos": "Cos", "exp": "Exp", "neg": "Neg", "add": "Add", "add_any": "Add", "sub": "Sub", "mul": "Mul", "max": "Max"}.items():
    lowerings.add(_prim, (lambda op: lambda ctx, *xs: getattr(ctx.op, op)(*xs))(_op))


@lowerings.register("reshape")
def lower_reshape(ctx, x, *dyn):
    return ctx.op.Reshape(x, ctx.shape_tensor(ctx.params["new_sizes"]))


@lowerings.register("broadcast_in_dim")
def lower_broadcast_in_dim(ctx, x, *dyn):
    out = ctx.avals_out[0]
    shape = [1] * len(out.shape)
    for i, d in enumerate(ctx.params["broadcast_dimensions"]):
        shape[d] = ctx.avals_in[0].shape[i]
    return ctx.op.Expand(ctx.op.Reshape(x, ctx.shape_tensor(shape)), ctx.shape_tensor(out.shape))


@lowerings.register("integer_pow")
def lower_integer_pow(ctx, x):
    return ctx.op.Pow(x, ctx.const_like(ctx.params["y"], ctx.avals_in[0]))


@lowerings.register("reduce_sum")
def lower_reduce_sum(ctx, x):
    axes = ctx.const(np.array(ctx.params["axes"], dtype=np.int64))
    return ctx.op.ReduceSum(x, axes, keepdims=0)


@lowerings.register("dot_general")
def lower_dot_general(ctx, a, b):
    """Any dot_general as one Einsum: batch dims first, then a's free dims, then b's (lax order)."""
    (ca, cb), (ba, bb) = ctx.params["dimension_numbers"]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = [next(letters) for _ in ctx.avals_in[0].shape]
    sb = [None] * len(ctx.avals_in[1].shape)
    for i, j in zip(ca, cb):
        sb[j] = sa[i]
    for i, j in zip(ba, bb):
        sb[j] = sa[i]
    sb = [c or next(letters) for c in sb]
    free_a = [sa[i] for i in range(len(sa)) if i not in ca and i not in ba]
    free_b = [sb[j] for j in range(len(sb)) if j not in cb and j not in bb]
    out = [sa[i] for i in ba] + free_a + free_b
    return ctx.op.Einsum(a, b, equation=f"{''.join(sa)},{''.join(sb)}->{''.join(out)}")


@lowerings.register("transpose")
def lower_transpose(ctx, x):
    return ctx.op.Transpose(x, perm=list(ctx.params["permutation"]))


@lowerings.register("convert_element_type")
def lower_convert(ctx, x):
    return ctx.cast(x, ctx.params["new_dtype"])


@lowerings.register("stop_gradient", "copy", "copy_p")
def lower_identity(ctx, x):
    return ctx.op.Identity(x)


class _Pack:
    """A pack whose lowerings are the given iterable's (read when the registry loads it)."""

    def __init__(self, items: Iterable[Any]):
        self._items = items

    @hookimpl
    def jax2onnx_lowerings(self):
        return list(self._items)


def pack_of(*lowering_sets: Iterable[Any]) -> _Pack:
    """A test pack lowering what ``lowering_sets`` (``Lowerings`` or lists of ``Lowering``) hold."""
    return _Pack([item for items in lowering_sets for item in items])


class MiniPack:
    """The mini pack: the lowerings above."""

    @hookimpl
    def jax2onnx_lowerings(self):
        return list(lowerings)


@contextlib.contextmanager
def registry_in_use(*packs: tuple[str, Any], entry_points: list[Any] | None = None) -> Iterator[PluginRegistry]:
    """A registry of ``packs`` ((name, pack) pairs) and ``entry_points`` (none unless given: isolated
    from the installed packs), current for the ``with`` block."""
    registry = PluginRegistry(entry_points=entry_points or [], extra_plugins=list(packs))
    previous = set_registry(registry)
    try:
        yield registry
    finally:
        set_registry(previous)
