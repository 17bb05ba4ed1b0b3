"""A layer called inside ``jax.vmap`` → the layer's fused op over the whole batch.

Equinox layers take one example and are batched with ``jax.vmap`` — of one layer
(``jax.vmap(self.fc)(x)``), of a whole model (``jax.vmap(model)(xs)``), or through
``eqx.filter_vmap``. Every fused layer's patched ``__call__`` goes through :func:`fused_call`:
inside vmaps, core's :func:`jax2onnx.fusion.call_in_vmaps` builds the region outside them around
the batched call (its body is ``jax.vmap`` of equinox's own per-example ``__call__``; its inputs
carry the batch axes in front, ``batch=k``) and hands the result back to the vmap. So
``jax.vmap(linear)`` is one ``Gemm``, ``jax.vmap(conv)`` one ``Conv`` without Unsqueeze/Squeeze,
``jax.vmap(cnn)`` the bare Conv/MaxPool/Gemm chain, and ``jax.vmap(self.ln)`` inside
``jax.vmap(block)`` one ``LayerNormalization`` (``batch=2``). Not lifted (equinox's own code, as
JAX batches it): inputs of two unrelated vmaps, and weights batched or traced inside the vmap (an
ensemble vmapped over its parameters).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
from jax2onnx.fusion import call_in_vmaps

from ._fusion import no_extras


def fused_call(fuse: Callable[..., Any], original: Callable[..., Any], module: Any, *xs: Any) -> Any | None:
    """``module(*xs)`` as the layer's region, ``fuse(module, *xs, body=..., batch=k)`` with ``k``
    vmapped axes in front (0 outside vmap); ``original(module, *xs)`` is equinox's per-example
    ``__call__``. None: equinox's own code must run."""
    weights = jax.tree_util.tree_leaves(eqx.filter(module, eqx.is_array))

    def build(batched: list, batch: int, vmapped: Callable[..., Any]) -> Any:
        def body(m: Any, *a: Any) -> Any:
            return vmapped(lambda *b: original(m, *b))(*a)

        return fuse(module, *batched, body=body, batch=batch)

    return call_in_vmaps(build, xs, reads=weights)


def patch_call(fuse: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The patch of a one-input layer's ``__call__``: the plain forward call ``layer(x)`` (no
    State, at most an unused ``key``) through :func:`fused_call`, anything else equinox's own."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def __call__(self: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
            out = fused_call(fuse, original, self, x) if no_extras(args, kwargs) else None
            return original(self, x, *args, **kwargs) if out is None else out

        return __call__

    return make
