"""The other transformers 4.x Flax causal LMs: GPT-Neo, GPT-J, OPT, Bloom, XGLM.

They run through the same adapter as GPT-2 and Llama (``adapter.py``): the library's own
module with its own static cache (``cached_key``/``cached_value``/``cache_index`` per attention
layer, written with ``dynamic_update_slice``), so every layer kind is the library's code —
GPT-Neo's local/global attention (its unscaled scores), GPT-J's partial interleaved rotary beside a
parallel MLP, OPT's learned positions (offset 2) with pre- or post-LN and its optional
``project_in``/``project_out``, Bloom's ALiBi and embedding LayerNorm, XGLM's sinusoidal positions
and scaled embeddings. Their configs name their sizes under the common names
(``num_hidden_layers``, ``num_attention_heads``, ``hidden_size``; transformers' attribute maps),
and what differs is read here:

- positions: each row's ``cumsum(mask) - 1``, as the library's ``prepare_inputs_for_generation``
  computes them (padding gets 0 where the library has -1: its outputs are never read), except for
  Bloom, whose call takes none (its ALiBi is built from the mask);
- position tables: ``max_position_embeddings`` where the family has one (Bloom has none).

genai_config.json names them ``decoder`` (onnxruntime-genai has no type of its own for them; a
decoder with per-layer key/value inputs is what it runs).
"""

from __future__ import annotations

import inspect
from typing import Any

#: class name -> genai_config.json model.type
FAMILIES = {
    "FlaxGPTNeoForCausalLM": "decoder",
    "FlaxGPTJForCausalLM": "decoder",
    "FlaxOPTForCausalLM": "decoder",
    "FlaxBloomForCausalLM": "decoder",
    "FlaxXGLMForCausalLM": "decoder",
}


def takes_position_ids(module: Any) -> bool:
    """Whether the model module's call takes ``position_ids`` (all but Bloom's)."""
    return "position_ids" in inspect.signature(type(module).__call__).parameters
