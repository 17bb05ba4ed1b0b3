"""KerasHub ``Gemma3CausalLM`` with its vision encoder (JAX backend) as the three graphs of an
onnxruntime-genai vision-language folder: vision, embedding, decoder (this front-end's
``vision_language``; the folder is written by ``jax2onnx_llm.multimodal``).

How KerasHub runs Gemma 3 with images (``Gemma3CausalLM.generate_step`` / ``call_with_cache``):

- the preprocessor expands each ``<start_of_image>`` of the prompt to ``<start_of_image>``, then
  ``num_vision_tokens_per_image`` placeholder tokens (``<img>``), then ``<end_of_image>``; the
  placeholders' embeddings are replaced, in order, by the vision encoder's output
  (``Gemma3InterleaveEmbeddings`` at ``vision_indices``), every other token is its scaled embedding;
- the decoder attends causally, except that the placeholders of one image see each other both ways
  (``Gemma3DecoderBlock._compute_image_bidirectional_attention_mask``, at the prefill); generated
  tokens attend causally;
- rotary positions count from the first token (``cache_update_index``).

genai's pipeline is the same: the embedding graph puts image feature ``i`` at the ``i``-th
placeholder of the batch (row-major, as KerasHub's flattened ``vision_indices``); the decoder graph
reads ``input_ids`` beside ``inputs_embeds`` (genai 0.18 feeds a decoder that declares it) to find
the image spans, since the embeddings alone do not say which tokens are an image's.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ...errors import OptionError
from ...spec import DecoderSpec, KVCache
from .pali_gemma import check as check  # the family's checks, converter and processor config are PaliGemma's
from .pali_gemma import image_converter as image_converter
from .pali_gemma import image_facts_for, library_layer_cache, mask_override
from .pali_gemma import processor_config as processor_config

#: the decoder graph reads ``input_ids`` too (``jax2onnx_llm.multimodal`` adds it to its inputs and config)
DECODER_READS_INPUT_IDS = True
#: the prompt holds the library's image placeholders, where the image features go (``multimodal.json``)
PROMPT_LAYOUT = "placeholders"
#: the Hugging Face architecture transformers.js runs the browser folder as (``multimodal/web_gemma3.py``)
TRANSFORMERS_JS_MODEL_TYPE = "gemma3"


def vision_fn(model: Any) -> Any:
    """``pixel_values (images, size, size, 3) -> image_features (images * image_tokens, hidden)``: the
    library's vision encoder on its preprocessed pixels, every image of the call in order."""
    encoder = model.backbone.vision_encoder

    def run(pixel_values: Any) -> Any:
        features = encoder(pixel_values[None])  # the encoder takes (batch, images, ...): one row of them all
        return features.reshape(-1, features.shape[-1])

    return run


def embedding_fn(model: Any, image_token_id: int | None = None) -> Any:
    """``(input_ids (batch, seq), image_features (rows, hidden)) -> inputs_embeds (batch, seq, hidden)``:
    the ``k``-th placeholder of the batch (row-major) takes feature ``k`` while there are features
    (``rows`` is 0 after the prompt, when genai hands an empty tensor: a generated placeholder id is
    then a token, as in KerasHub's steps), every other slot the token's scaled embedding."""
    backbone = model.backbone
    hidden = int(backbone.hidden_dim)
    image_token_id = placeholder_id(model, image_token_id)

    def run(input_ids: Any, image_features: Any) -> Any:
        batch, seq = input_ids.shape
        text = backbone.token_embedding(input_ids)
        text = text * jnp.sqrt(jnp.asarray(hidden, text.dtype))
        rows = jnp.asarray(image_features.shape[0], jnp.int32)
        placeholder = (input_ids == image_token_id).reshape(-1)
        order = jnp.cumsum(placeholder.astype(jnp.int32)) - 1  # the k of the k-th placeholder
        is_image = placeholder & (order < rows)
        # one zero row after the features, so the gather is in bounds also when there are none
        table = jnp.concatenate([image_features.astype(text.dtype), jnp.zeros((1, hidden), text.dtype)], axis=0)
        picked = jnp.take(table, jnp.where(is_image, order, rows), axis=0).reshape(batch, seq, hidden)
        return jnp.where(is_image.reshape(batch, seq)[..., None], picked, text)

    return run


def decoder_spec(model: Any, image_token_id: int | None = None) -> DecoderSpec:
    """The language model as a :class:`DecoderSpec` whose step takes embeddings and the token ids:
    ``(params, inputs_embeds, attention_mask, position_ids, cache, input_ids=) -> (logits, cache)``."""
    from .attention import library_attention
    from .generic import library_facts

    backbone = model.backbone
    image_token_id = placeholder_id(model, image_token_id)
    layers = list(backbone.transformer_layers)
    kv_heads, head_size = int(backbone.num_key_value_heads), int(backbone.head_dim)

    def step(params: Any, inputs_embeds: Any, attention_mask: Any, position_ids: Any, cache: KVCache, *,
             input_ids: Any) -> Any:
        seq = inputs_embeds.shape[1]
        past = jnp.asarray(cache.past_length(seq), jnp.int32)
        visible = cache.key_valid(seq)[:, 0]  # (batch, seq, capacity): padding and causality
        visible = visible | image_spans(input_ids == image_token_id, past, visible.shape[-1])
        x = inputs_embeds
        for i, layer in enumerate(layers):
            k, v = library_layer_cache(cache, i, seq, kv_heads, head_size)
            # the library's attention math: the fused ops' causal masking cannot express the image spans
            with mask_override(layer, visible), library_attention():
                x, (k, v) = layer(x, cache=(k, v), cache_update_index=past)
            cache.keys[i], cache.values[i] = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
        x = backbone.layer_norm(x)
        return backbone.token_embedding(x, reverse=True), cache

    facts = library_facts(model)
    if facts["pad_token_id"] is None:
        facts["pad_token_id"] = 0
    return DecoderSpec(
        step=step, params=None, num_layers=len(layers), num_heads=int(backbone.num_query_heads), num_kv_heads=kv_heads,
        head_size=head_size, hidden_size=int(backbone.hidden_dim), vocab_size=int(backbone.vocabulary_size),
        model_type="gemma3", family="KerasHub Gemma3CausalLM", **facts,
    )


def image_spans(is_image: Any, past: Any, capacity: Any) -> Any:
    """``(batch, seq, capacity)``: query ``i`` of the call sees key slot ``past + j`` where tokens
    ``i`` and ``j`` are placeholders of one image (one unbroken run of them), KerasHub's bidirectional
    image attention. Slots outside the call are not touched (its prefill holds whole images)."""
    seq = is_image.shape[1]
    before = jnp.pad(is_image, ((0, 0), (1, 0)))[:, :-1]
    span = jnp.cumsum((is_image & ~before).astype(jnp.int32), axis=1) * is_image  # 0: no image; k: the k-th run
    slot = jnp.arange(capacity, dtype=jnp.int32)[None, :] - past  # the call's token at each key slot
    inside = (slot >= 0) & (slot < seq)
    key_span = jnp.where(inside, jnp.take(span, jnp.clip(slot[0], 0, seq - 1), axis=1), 0)
    return (span[:, :, None] == key_span[:, None, :]) & (span[:, :, None] > 0)


def placeholder_id(model: Any, given: int | None) -> int:
    """The placeholder id the library's preprocessor writes for an image token (``<img>``), or ``given``."""
    tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    carried = getattr(tokenizer, "image_placeholder_id", None)
    token = given if given is not None else carried
    if token is None or int(token) < 0:
        raise OptionError("the image placeholder id is unknown (the model carries no preprocessor with a vision "
                          "tokenizer): pass image_token_id= (the id of the tokenizer's '<img>')")
    vocab = int(model.backbone.vocabulary_size)
    if not 0 <= int(token) < vocab:
        raise OptionError(f"image_token_id={token} is outside the vocabulary (0..{vocab - 1}): give the id of '<img>'")
    return int(token)


def image_facts(model: Any, converter: Any) -> dict[str, Any]:
    """As PaliGemma's (``pali_gemma.image_facts``): the image size, the tokens per image, the
    converter's preprocessing."""
    encoder = model.backbone.vision_encoder
    return image_facts_for(int(encoder.image_size), int(encoder.num_vision_tokens_per_image), converter)

