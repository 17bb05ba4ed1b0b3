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

from ....spec import DecoderSpec
from ..generic import decoder_spec as generic_decoder_spec
from .kv_sharing import holders, only_holders


def decoder_spec(model: Any, name: str) -> DecoderSpec:
    spec = generic_decoder_spec(model, name)
    return only_holders(spec, holders(list(model.backbone.transformer_layers)))
