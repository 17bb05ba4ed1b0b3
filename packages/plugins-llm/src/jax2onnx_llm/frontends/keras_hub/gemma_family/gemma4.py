"""KerasHub ``Gemma4CausalLM`` (text): KerasHub's cached-generation protocol as for every other
family (``generic.py``: its per-layer inputs, sliding and global layers with their own head sizes,
key-value heads and rope settings, soft caps all run as the library's own code inside
``call_with_cache``), with the cache of its KV-shared layers left out of the folder (``kv_sharing.py``).

The cache KerasHub builds is one stacked array whose head size is the largest any layer uses (a
global layer's ``global_head_dim``) and whose head count is ``num_key_value_heads``; the folder's
cache has that shape in every layer (onnxruntime-genai allocates one shape for all layers).
"""

from __future__ import annotations

from typing import Any

from ....errors import UnsupportedModelError
from ....spec import DecoderSpec
from ...support import only_holders
from ..generic import decoder_spec as generic_decoder_spec
from .kv_sharing import holders


def decoder_spec(model: Any, name: str) -> DecoderSpec:
    backbone = model.backbone
    table = getattr(backbone, "per_layer_token_embedding", None) if backbone.hidden_size_per_layer_input else None
    if table is not None and int(table.input_dim) < int(backbone.vocabulary_size):
        # KerasHub looks every token up in it unclamped: a token past its end has no per-layer input
        # (JAX fills the lookup with NaN, onnxruntime refuses the gather)
        raise UnsupportedModelError(
            f"KerasHub {name}: its per-layer input table holds {table.input_dim} tokens, fewer than its vocabulary of "
            f"{backbone.vocabulary_size}, and the library looks every token up in it; build the backbone with "
            "vocab_size_per_layer_input equal to vocabulary_size (or None)"
        )
    spec = generic_decoder_spec(model, name)
    return only_holders(spec, holders(list(model.backbone.transformer_layers)))
