"""KerasHub ``Gemma4CausalLM`` with its vision encoder (JAX backend) as the three graphs of an
onnxruntime-genai ``gemma4`` folder: vision, embedding, decoder (this front-end's ``vision_language``;
the folder is written by ``jax2onnx_llm.multimodal``).

How KerasHub runs Gemma 4 with images (``Gemma4CausalLM.generate_step`` / ``call_with_cache``):

- the image converter resizes an image (keeping its aspect) to a multiple of ``patch_size *
  pooling_kernel_size``, cuts it into patches ``(patches, 3 * patch_size**2)`` with their ``(x, y)``
  positions, and pads both to ``max_soft_tokens * pooling_kernel_size**2`` patches (padding patches:
  zeros at position ``(-1, -1)``); the tower pools them into ``max_soft_tokens`` features per image,
  those of the padding being zeros;
- the preprocessor writes ``num_vision_tokens_per_image`` placeholders (``<|image|>``) per image; the
  placeholders' embeddings are the image features times ``hidden ** -0.5`` (in order), every other
  token's its embedding; then all are scaled by ``sqrt(hidden)``;
- per-layer inputs: each layer's slice of the per-layer token table looked up at the token ids, with
  the image placeholders' ids taken as 0 (times ``sqrt(per_layer_width)``), plus the normed projection
  of the merged embeddings (times ``hidden ** -0.5``), the two summed and scaled by ``2 ** -0.5``;
- the decoder attends causally (the prompt's images too: the library builds its bidirectional image
  mask only for a call without a cache, which ``generate`` never makes), KV-shared layers reading the
  cache of an earlier layer, as in the text model.

genai's ``gemma4`` pipeline is the same split: the vision graph takes ``pixel_values`` and
``pixel_position_ids``, the embedding graph returns ``inputs_embeds`` and ``per_layer_inputs``
``(batch, sequence, layers * per_layer_width)``, which genai hands to the decoder beside
``inputs_embeds``. The decoder is the text export's step (``gemma_family/gemma4.py``: masks, fused
attention cores, the cache of the KV-holding layers only) with the library's layer loop run from the
given embeddings instead of token ids.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from ...errors import OptionError, UnsupportedModelError
from ...spec import DecoderSpec
from .gemma3_vision import placeholder_id as placeholder_id
from .generic import override_attribute
from .pali_gemma import check as check  # the JAX backend check is PaliGemma's

#: the prompt holds the library's image placeholders, where the image features go (``multimodal.json``)
PROMPT_LAYOUT = "placeholders"
#: genai_config.json's model type: genai's Gemma 4 pipeline (per-layer inputs from the embedding graph)
GENAI_MODEL_TYPE = "gemma4"
PIXEL_POSITION_IDS = "pixel_position_ids"
#: transformers.js' ``Gemma4ForConditionalGeneration`` folder (``multimodal/web_gemma4.py``)
TRANSFORMERS_JS_MODEL_TYPE = "gemma4"


def image_converter(model: Any) -> Any:
    """The image converter the model's preprocessor carries, or None."""
    return getattr(getattr(model, "preprocessor", None), "image_converter", None)


def image_facts(model: Any, converter: Any) -> dict[str, Any]:
    """The image tokens per image (the tower's features, as many as the prompt's placeholders) and the
    patches per image that give them: the converter's ``max_soft_tokens`` and padding when the export
    has it, else the preprocessor's ``num_vision_tokens_per_image``, else the tower's square image.
    Pixels are fed as the converter makes them (genai's own Gemma 4 image processor trims the padding
    and writes fewer placeholders than KerasHub's preprocessor, so it is not used)."""
    encoder = model.backbone.vision_encoder
    pool, patch = int(encoder.pool_size), int(encoder.patch_size)
    if converter is not None:
        if (int(converter.patch_size), int(converter.pooling_kernel_size)) != (patch, pool):
            raise OptionError(f"image_converter cuts {converter.patch_size}-pixel patches pooled "
                              f"{converter.pooling_kernel_size}x{converter.pooling_kernel_size}, the vision tower takes "
                              f"{patch}-pixel patches pooled {pool}x{pool}; give the model's own converter")
        tokens = int(converter.max_soft_tokens)
    else:
        carried = getattr(getattr(model, "preprocessor", None), "num_vision_tokens_per_image", None)
        tokens = int(carried) if carried is not None else int(encoder.num_vision_tokens_per_image)
    return {"image_tokens": tokens, "patches": tokens * pool * pool, "patch_pixels": 3 * patch * patch}


def vision_inputs(facts: dict[str, Any], images: Any) -> list[tuple[str, Any]]:
    """The vision graph's inputs: every image's patches and their ``(x, y)`` positions, padded as the
    library's converter pads them."""
    patches, pixels = facts["patches"], facts["patch_pixels"]
    return [("pixel_values", jax.ShapeDtypeStruct((images, patches, pixels), jnp.float32)),
            (PIXEL_POSITION_IDS, jax.ShapeDtypeStruct((images, patches, 2), jnp.int32))]


def pixel_inputs_note(facts: dict[str, Any]) -> dict[str, str]:
    """``multimodal.json``'s entries for the vision inputs."""
    patches, pixels = facts["patches"], facts["patch_pixels"]
    return {"pixel_values": f"float32 [num_images, {patches}, {pixels}], the library's image converter's "
                            "pixel_values (patches, padding patches included)",
            PIXEL_POSITION_IDS: f"int32 [num_images, {patches}, 2], the converter's pixel_position_ids "
                                "((x, y) per patch, (-1, -1) for padding)"}


def vision_fn(model: Any) -> Any:
    """``(pixel_values (images, patches, pixels), pixel_position_ids (images, patches, 2)) ->
    image_features (images * image_tokens, hidden)``: the library's vision encoder, every image of the
    call in one row (its pooling reads the widest image of the call, as in KerasHub's batch)."""
    encoder = model.backbone.vision_encoder

    def run(pixel_values: Any, pixel_position_ids: Any) -> Any:
        features = encoder({"pixel_values": pixel_values[None], "pixel_position_ids": pixel_position_ids[None]})
        return features.reshape(-1, features.shape[-1])

    return run


def per_layer_width(model: Any) -> int:
    """The width of the embedding graph's ``per_layer_inputs`` (every layer's, side by side), 0 for a
    model without per-layer inputs."""
    backbone = model.backbone
    return int(backbone.hidden_size_per_layer_input or 0) * len(backbone.transformer_layers)


def embedding_fn(model: Any, image_token_id: int | None = None) -> Any:
    """``(input_ids (batch, seq), image_features (rows, hidden)) -> (inputs_embeds, per_layer_inputs)``:
    the ``k``-th placeholder of the batch (row-major) takes feature ``k`` while there are features
    (``rows`` is 0 after the prompt, when genai hands an empty tensor), rescaled as the library does;
    ``per_layer_inputs`` (only where the model has them) as ``call_with_cache`` computes them."""
    backbone = model.backbone
    hidden = int(backbone.hidden_dim)
    width = int(backbone.hidden_size_per_layer_input or 0)
    image_token_id = placeholder_id(model, image_token_id)

    def run(input_ids: Any, image_features: Any) -> Any:
        batch, seq = input_ids.shape
        text = backbone.token_embedding(input_ids)
        rows = jnp.asarray(image_features.shape[0], jnp.int32)
        placeholder = (input_ids == image_token_id).reshape(-1)
        order = jnp.cumsum(placeholder.astype(jnp.int32)) - 1  # the k of the k-th placeholder
        is_image = (placeholder & (order < rows)).reshape(batch, seq)
        # pre-scaled so that the global sqrt(hidden) below gives back the tower's magnitude (the library's order)
        scaled = image_features.astype(text.dtype) * jnp.asarray(float(hidden) ** -0.5, text.dtype)
        # one zero row after the features, so the gather is in bounds also when there are none
        table = jnp.concatenate([scaled, jnp.zeros((1, hidden), text.dtype)], axis=0)
        picked = jnp.take(table, jnp.where(is_image.reshape(-1), order, rows), axis=0).reshape(batch, seq, hidden)
        x = jnp.where(is_image[..., None], picked, text)
        x = x * jnp.sqrt(jnp.asarray(hidden, jnp.float32)).astype(x.dtype)
        if not width:
            return x
        return x, per_layer_inputs(model, x, per_layer_tokens(model, input_ids, is_image, x.dtype))

    return run


def per_layer_tokens(model: Any, input_ids: Any, is_image: Any, dtype: Any) -> Any:
    """The token part of every layer's per-layer input ``(batch, seq, layers * width)``: the per-layer
    token table looked up at the ids, an image's slots (``is_image``) as id 0, times ``sqrt(width)``."""
    backbone = model.backbone
    width = int(backbone.hidden_size_per_layer_input)
    ids = jnp.where(is_image, 0, input_ids)  # an image's slots take no token's per-layer input
    looked_up = backbone.per_layer_token_embedding(ids).astype(dtype)
    return looked_up * jnp.asarray(float(width) ** 0.5, dtype)


def per_layer_inputs(model: Any, inputs_embeds: Any, tokens: Any) -> Any:
    """Every layer's per-layer input from the merged (scaled) embeddings and :func:`per_layer_tokens`:
    the normed projection of the embeddings (times ``hidden ** -0.5``) plus the token part, times
    ``2 ** -0.5``, as ``call_with_cache`` computes them."""
    backbone = model.backbone
    width, hidden = int(backbone.hidden_size_per_layer_input), int(backbone.hidden_dim)
    x = inputs_embeds
    projected = backbone.per_layer_model_projection(x) * jnp.asarray(float(hidden) ** -0.5, x.dtype)
    per_layer = [(backbone.per_layer_projection_norm(projected[:, :, i * width:(i + 1) * width])
                  + tokens[:, :, i * width:(i + 1) * width]) * jnp.asarray(2.0 ** -0.5, x.dtype)
                 for i in range(len(backbone.transformer_layers))]
    return jnp.concatenate(per_layer, axis=-1)


def decoder_spec(model: Any, image_token_id: int | None = None) -> DecoderSpec:
    """The language model as a :class:`DecoderSpec` whose step takes embeddings and the per-layer
    inputs: ``(params, inputs_embeds, attention_mask, position_ids, cache, per_layer_inputs=) ->
    (logits, cache)``, the text export's step around the library's layer loop."""
    from .gemma_family.gemma4 import decoder_spec as text_decoder_spec

    placeholder_id(model, image_token_id)
    text = text_decoder_spec(model, "Gemma4CausalLM")

    def step(params: Any, inputs_embeds: Any, attention_mask: Any, position_ids: Any, cache: Any, *,
             per_layer_inputs: Any = None) -> Any:
        ids = jnp.zeros(inputs_embeds.shape[:2], jnp.int32)  # the shapes the text step reads; no token is looked up
        with override_attribute(model, "call_with_cache", _from_embeddings(model, inputs_embeds, per_layer_inputs)):
            return text.step(params, ids, attention_mask, position_ids, cache)

    return dataclasses.replace(text, step=step, model_type=GENAI_MODEL_TYPE, family="KerasHub Gemma4CausalLM")


def _from_embeddings(model: Any, inputs_embeds: Any, per_layer_inputs: Any) -> Any:
    """``call_with_cache`` from the embedding graph's outputs: the library's loop over its layers (KV
    sharing, per-layer inputs), final norm, tied logits and final soft cap, as ``call_with_cache``
    runs them after its embedding."""
    from keras import ops

    backbone = model.backbone
    width = int(backbone.hidden_size_per_layer_input or 0)
    layers = list(backbone.transformer_layers)

    def call(token_ids: Any, cache: Any, cache_update_index: Any, **unused: Any) -> Any:
        if unused:
            raise UnsupportedModelError(f"Gemma 4's decoder graph takes no {sorted(unused)} (its inputs are embeddings)")
        x, caches = inputs_embeds, []
        for i, layer in enumerate(layers):
            shared_kv = None
            if layer.is_kv_shared_layer and layer.kv_shared_layer_index is not None:
                source = layer.kv_shared_layer_index
                shared_kv = caches[source] if source < len(caches) else cache[:, source, ...]
            own = per_layer_inputs[:, :, i * width:(i + 1) * width] if width else None
            x, next_cache = layer(x, cache=cache[:, i, ...], cache_update_index=cache_update_index,
                                  shared_kv=shared_kv, per_layer_input=own)
            caches.append(next_cache)
        hidden = backbone.layer_norm(x)
        logits = backbone.token_embedding(hidden, reverse=True)
        if model.final_logit_cap is not None:
            logits = ops.tanh(logits / model.final_logit_cap) * model.final_logit_cap
        return logits, hidden, ops.stack(caches, axis=1)

    return call
