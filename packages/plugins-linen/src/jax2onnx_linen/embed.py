"""nn.Embed → Gather (lookup) and MatMul (``attend``, the tied output projection): the kit's
:func:`jax2onnx.fusion.lower_embedding_lookup` / :func:`~jax2onnx.fusion.lower_embedding_attend`
(which say why out-of-range ids get no bounds check)."""

from __future__ import annotations

import jax.numpy as jnp
from jax2onnx.fusion import is_array, lower_embedding_attend, lower_embedding_lookup
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, fusable, linen_calls

lowerings = Lowerings()

EMBED = "jax2onnx_linen.embed"
ATTEND = "jax2onnx_linen.embed_attend"
# the kit's embedding lowerings (operands ids or query, and embedding, as flax names them)
lowerings.add(f"call:{EMBED}", lower_embedding_lookup)
lowerings.add(f"call:{ATTEND}", lower_embedding_attend)


def _patch_embed(original):
    def __call__(self, inputs, *args, **kwargs):
        if (args or kwargs or not is_array(inputs) or not jnp.issubdtype(inputs.dtype, jnp.integer)
                or int(self.num_embeddings) == 1 or not fusable(self)):  # one row: flax broadcasts it
            return original(self, inputs, *args, **kwargs)
        return call_module(EMBED, self, lambda m, ids: original(m, ids), {"ids": inputs})

    return __call__


def _patch_attend(original):
    def attend(self, query, *args, **kwargs):
        if args or kwargs or not is_array(query) or not fusable(self):
            return original(self, query, *args, **kwargs)
        return call_module(ATTEND, self, lambda m, q: original(m, q), {"query": query})

    return attend


patches = [
    ModulePatch("flax.linen.Embed", "__call__", _patch_embed, interceptor=linen_calls),
    ModulePatch("flax.linen.Embed", "attend", _patch_attend, interceptor=linen_calls),
]

