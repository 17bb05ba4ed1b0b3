"""nnx.Embed → Gather (lookup) and MatMul (``attend``, the tied output projection): the kit's
:func:`jax2onnx.fusion.lower_embedding_lookup` / :func:`~jax2onnx.fusion.lower_embedding_attend`
(which say why out-of-range ids get no bounds check)."""

from __future__ import annotations

import jax.numpy as jnp
from jax2onnx.fusion import lower_embedding_attend, lower_embedding_lookup
from jax2onnx.plugin import Lowerings, ModulePatch, is_array

from ._fusion import call_module, graphdef_node_types

lowerings = Lowerings()

EMBED = "jax2onnx_nnx.embed"
ATTEND = "jax2onnx_nnx.embed_attend"
# the kit's embedding lowerings (operands ids or query, and embedding, as flax names them)
lowerings.add(f"call:{EMBED}", lower_embedding_lookup)
lowerings.add(f"call:{ATTEND}", lower_embedding_attend)


def _plain(kwargs: dict) -> bool:
    return all(v is None for v in kwargs.values())


def _patch_embed(original):
    def __call__(self, inputs, **kwargs):
        if (
            not _plain(kwargs)
            or not is_array(inputs)
            or not jnp.issubdtype(inputs.dtype, jnp.integer)
            or int(self.num_embeddings) == 1  # flax broadcasts the one row whatever the id
        ):
            return original(self, inputs, **kwargs)
        return call_module(EMBED, self, lambda m, ids: original(m, ids), {"ids": inputs})

    return __call__


def _patch_attend(original):
    def attend(self, query, **kwargs):
        if not _plain(kwargs) or not is_array(query):
            return original(self, query, **kwargs)
        return call_module(ATTEND, self, lambda m, q: original(m, q), {"query": query})

    return attend


patches = [
    ModulePatch("flax.nnx.Embed", "__call__", _patch_embed, holders=graphdef_node_types),
    ModulePatch("flax.nnx.Embed", "attend", _patch_attend, holders=graphdef_node_types),
]

