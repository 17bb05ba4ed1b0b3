"""``jax.vmap(layer)(x)`` on an equinox layer → the layer's fused op with the batch axis in front.

Equinox layers take one example and are batched with ``jax.vmap``. Inside ``vmap`` a layer's call
sees per-example tracers, and its marked region gains the batch axis only when JAX batches the
region's body, after the fact: core then lowers equinox's own math. So while exporting, the pack
replaces ``jax.vmap``: mapping one of the layers below directly (``in_axes=0``, ``out_axes=0``, no
axis name) builds the region around the *batched* call instead, and the layer's lowering sees a
leading batch axis (``batch=1``) — one ``Gemm`` for ``jax.vmap(linear)``, one ``Conv`` for
``jax.vmap(conv)``, one
``LayerNormalization`` for ``jax.vmap(layer_norm)``. The region's body is ``jax.vmap`` of the layer
itself, so JAX's semantics are kept wherever the lowering declines. Everything else (any other
function, other axes, ``axis_name``, a layer called inside a vmapped function, ``eqx.filter_vmap``)
goes to JAX's own ``vmap`` unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
from jax2onnx.plugin import Patch

from . import attention, conv, linear, normalization, pooling


def _handlers(vmap: Callable[..., Any]) -> list[tuple[type, Callable[..., Any]]]:
    """(layer class, ``handler(layer, *args) -> result | None``) with bodies built on JAX's ``vmap``."""

    def per_example(m: Any, *xs: Any) -> Any:
        return vmap(m)(*xs)

    def norm(mark: str) -> Callable[..., Any]:
        return lambda m, x: normalization.fuse(mark, m, x, body=per_example, batch=1)

    def pool(mark: str) -> Callable[..., Any]:
        return lambda m, x: pooling.fuse(mark, m, x, body=per_example, batch=1)

    def mha(m: Any, q: Any, k: Any, v: Any, mask: Any = None) -> Any:
        if not attention.plain_call(m):
            return None

        def call(mm: Any, qq: Any, kk: Any, vv: Any, msk: Any) -> Any:
            return per_example(mm, qq, kk, vv) if msk is None else per_example(mm, qq, kk, vv, msk)

        return attention.fuse(m, q, k, v, mask, call=call, batch=1)

    return [
        (eqx.nn.Linear, lambda m, x: linear.fuse(m, x, body=per_example, batch=1)),
        (eqx.nn.Conv, lambda m, x: conv.fuse(m, x, body=per_example, batch=1)),
        *[(getattr(eqx.nn, name), pool(pooling.MAX_POOL)) for name in pooling.MAX_CLASSES],
        *[(getattr(eqx.nn, name), pool(pooling.AVG_POOL)) for name in pooling.AVG_CLASSES],
        (eqx.nn.LayerNorm, norm(normalization.LAYER_NORM)),
        (eqx.nn.RMSNorm, norm(normalization.RMS_NORM)),
        (eqx.nn.GroupNorm, norm(normalization.GROUP_NORM)),
        (eqx.nn.MultiheadAttention, mha),
    ]


def _patch_vmap(original):
    handlers = _handlers(original)

    def vmap(fun, in_axes=0, out_axes=0, *args, **kwargs):
        mapped = original(fun, in_axes, out_axes, *args, **kwargs)
        handler = next((h for cls, h in handlers if isinstance(fun, cls)), None)
        if handler is None or args or kwargs or not _is_zero(in_axes) or not _is_zero(out_axes):
            return mapped

        def call(*xs, **kw):
            out = None if kw else _try(handler, fun, xs)
            return mapped(*xs, **kw) if out is None else out

        return call

    return vmap


def _is_zero(axes: Any) -> bool:
    return isinstance(axes, int) and not isinstance(axes, bool) and axes == 0


def _try(handler: Callable[..., Any], fun: Any, xs: tuple) -> Any:
    try:
        return handler(fun, *xs)
    except TypeError:  # a call signature the handler does not take: JAX's vmap handles it
        return None


patches = [Patch("jax", "vmap", _patch_vmap)]
