"""The decoder graph of a multimodal folder: the text decoder's step reading ``inputs_embeds`` (the
embedding graph's output) instead of token ids, and the input specs it is traced with. Shared by
the genai folder (:mod:`.export`) and the browser folder (:mod:`.web`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..export import BATCH, PAST, SEQUENCE
from ..spec import DecoderSpec, KVCache, position_ids_from_mask


def decoder_step(spec: DecoderSpec, cache: str, max_length: int, reads_ids: bool = False, per_layer: int = 0) -> Any:
    """The decoder as onnxruntime-genai calls it: ``(inputs_embeds, [per_layer_inputs,] [input_ids,]
    attention_mask, *past) -> (logits, *present)``, past/present interleaved per layer as ``key, value``;
    ``input_ids`` (for a family that reads them: ``reads_ids``) goes to the step as ``input_ids=``, the
    per-layer inputs (a family with them: ``per_layer``, their width) as ``per_layer_inputs=``. genai runs
    one prompt per multimodal generator, so no padding is looked for beyond what the mask says."""

    def run(inputs_embeds: Any, *rest: Any) -> tuple[Any, ...]:
        ids = {"per_layer_inputs": rest[0].astype(spec.dtype)} if per_layer else {}
        rest = rest[1:] if per_layer else rest
        ids |= {"input_ids": rest[0]} if reads_ids else {}
        attention_mask, *past = rest[1:] if reads_ids else rest
        seq = inputs_embeds.shape[1]
        mask = attention_mask.astype(jnp.int32)
        kv = KVCache(past[0::2], past[1::2], mask, cache, max_length=max_length)
        logits, kv = spec.step(spec.params, inputs_embeds.astype(spec.dtype), mask, position_ids_from_mask(mask, seq), kv,
                               **ids)
        present = [t for pair in zip(kv.keys, kv.values) for t in pair]
        return (logits.astype(spec.dtype), *present)

    return run


def decoder_inputs(spec: DecoderSpec, cache: str, max_length: int, reads_ids: bool = False,
                   per_layer: int = 0) -> list[Any]:
    batch, seq, past = jax.export.symbolic_shape(
        f"{BATCH}, {SEQUENCE}, {PAST}", constraints=(f"{PAST} + {SEQUENCE} <= {max_length}",))
    kv_len: Any = past if cache == "concat" else max_length
    kv = jax.ShapeDtypeStruct((batch, spec.num_kv_heads, kv_len, spec.head_size), spec.dtype)
    ids = [jax.ShapeDtypeStruct((batch, seq), jnp.int32)] if reads_ids else []
    extra = [jax.ShapeDtypeStruct((batch, seq, per_layer), spec.dtype)] if per_layer else []
    return [jax.ShapeDtypeStruct((batch, seq, spec.hidden_size), spec.dtype), *extra, *ids,
            jax.ShapeDtypeStruct((batch, past + seq), jnp.int32), *([kv] * (2 * spec.num_layers))]


__all__ = ["decoder_inputs", "decoder_step"]
