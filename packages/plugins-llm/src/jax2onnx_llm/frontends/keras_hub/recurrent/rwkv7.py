"""KerasHub's ``RWKV7CausalLM`` as a :class:`~jax2onnx_llm.stateful.StatefulDecoderSpec` with no
attention layer: every layer carries the RWKV-7 state ``(heads, head_size, head_size)`` (onnxruntime-genai's
``recurrent``) and the last token's inputs to its time-mix and channel-mix shifts ``(2, hidden)``
(its ``conv``: the one-token window those shifts convolve over; genai reads a conv state of rank 4 as
one with a leading window dim, so the library's ``(2, 1, hidden)`` drops its 1).

The step is the library's own ``call_with_cache`` (its multi-token form, ``rnn_mode=False``), which
masks padding itself (a masked token's inputs are zeroed and its decay is 1, so it leaves the state
as it was); it gets the padding mask it would compute itself (``token != 0``) with the row's left
padding also masked. Its recurrence is the library's ``rnn_generalized_delta_rule`` loop; without the
optional ``rwkv_ops`` kernels (GPU), which the export cannot trace, it is what runs.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ....errors import UnsupportedModelError
from ....stateful import STATE, StatefulDecoderSpec
from ..generic import library_facts


def decoder_spec(model: Any, name: str) -> StatefulDecoderSpec:
    backbone = model.backbone
    layers = list(backbone.rwkv_layers)
    if any(getattr(layer.att.RWKV7_OP_INFERENCE, "__module__", "").startswith("rwkv_ops") for layer in layers):
        raise UnsupportedModelError(
            f"KerasHub {name} runs the rwkv_ops kernels, which do not trace to ONNX: uninstall rwkv_ops (KerasHub then "
            "runs its own recurrence) before exporting")
    hidden, head_size = int(backbone.hidden_size), int(backbone.head_size)
    heads = hidden // head_size
    shapes = ((2, hidden), (heads, head_size, head_size))

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: Any, states: list[Any],
             pad: Any) -> Any:
        token_cache = jnp.stack([s[0][:, :, None] for s in states], axis=1)  # (batch, layers, 2, 1, hidden)
        state_cache = jnp.stack([s[1] for s in states], axis=1)  # (batch, layers, heads, size, size)
        # the library's own mask when given none is `token != 0`; the row's left padding is masked too
        mask = jnp.logical_and(input_ids != 0, ~pad)
        logits, _, (state_cache, token_cache) = model.call_with_cache(
            input_ids, [state_cache, token_cache], padding_mask=mask, rnn_mode=False)
        states = [(token_cache[:, i, :, 0], state_cache[:, i]) for i in range(len(layers))]
        return logits, cache, states

    facts = library_facts(model)
    if facts["pad_token_id"] is None:
        facts["pad_token_id"] = 0
    return StatefulDecoderSpec(
        step=step, params=None, num_layers=len(layers), num_heads=heads, num_kv_heads=heads, head_size=head_size,
        hidden_size=hidden, vocab_size=int(backbone.vocabulary_size), model_type="decoder", family=f"KerasHub {name}",
        cache_layouts=("concat",), layer_kinds=(STATE,) * len(layers), state_shapes=(shapes,) * len(layers), **facts,
    )
