"""KerasHub ``PaliGemmaCausalLM`` (JAX backend) as the three graphs of an onnxruntime-genai
vision-language folder: vision, embedding, decoder (the parts ``jax2onnx_llm.multimodal`` exports,
reached through the registry: this front-end's ``vision_language``).

How KerasHub runs PaliGemma (``PaliGemmaCausalLM.call_with_cache`` / ``generate_step``):

- the image is encoded by ``backbone.vit_encoder`` into ``image_sequence_length`` embeddings of the
  decoder's width, which are *concatenated in front of* the text embeddings (the token embeddings
  times ``sqrt(hidden_dim)``); there is no image placeholder token in the vocabulary;
- the prompt (image + text) is a prefix the decoder attends to in both directions (the prefill's mask
  is "every real prompt token, or causal"); generated tokens attend causally;
- rotary positions count from the first image embedding (``cache_update_index``).

onnxruntime-genai's multimodal pipeline counts a sequence by its ``input_ids``, so the folder's
prompts hold ``image_sequence_length`` slots (any id) in front of the text:
the embedding graph puts image feature ``i`` at slot ``i`` of the prefill and the token embeddings
elsewhere, which is KerasHub's concatenation. The decoder graph reads ``inputs_embeds`` and builds
the prefix mask itself: at the prefill (no past) every real token of the call is visible to every
other, afterwards attention is causal, as KerasHub's ``generate`` computes it for a prompt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax.numpy as jnp

from ...errors import OptionError, UnsupportedModelError
from ...spec import DecoderSpec, KVCache, extend_to

#: the Hugging Face architecture transformers.js runs this model's graphs as (``jax2onnx_llm.multimodal.web``
#: writes its folder only for a front-end that names one)
TRANSFORMERS_JS_MODEL_TYPE = "paligemma"


def check(model: Any) -> None:
    import keras

    if keras.backend.backend() != "jax":
        raise UnsupportedModelError(
            f"KerasHub PaliGemmaCausalLM runs on the {keras.backend.backend()!r} backend; set KERAS_BACKEND=jax "
            "before importing keras")


def vision_fn(model: Any) -> Any:
    """``pixel_values (images, size, size, 3) -> image_features (images * image_tokens, hidden)``: the
    library's vision tower on its preprocessed pixels (what its image converter returns)."""
    backbone = model.backbone

    def run(pixel_values: Any) -> Any:
        features = backbone.vit_encoder(pixel_values)
        return features.reshape(-1, features.shape[-1])

    return run


def embedding_fn(model: Any) -> Any:
    """``(input_ids (batch, seq), image_features (rows, hidden)) -> inputs_embeds (batch, seq, hidden)``.

    ``rows`` is ``batch * image_tokens`` at the prefill and 0 afterwards (genai then hands an empty
    tensor): slot ``j < rows / batch`` of row ``b`` takes feature ``b * image_tokens + j``, every other
    slot the token's scaled embedding, as ``call_with_cache`` concatenates them."""
    backbone = model.backbone
    hidden = int(backbone.hidden_dim)

    def run(input_ids: Any, image_features: Any) -> Any:
        batch, seq = input_ids.shape
        text = backbone.token_embedding(input_ids)
        text = text * jnp.sqrt(jnp.asarray(hidden, text.dtype))
        rows = jnp.asarray(image_features.shape[0], jnp.int32)
        per_row = rows // jnp.asarray(batch, jnp.int32)
        slot = jnp.arange(seq, dtype=jnp.int32)[None, :]
        is_image = slot < per_row
        # one zero row after the features, so the gather is in bounds also when there are none
        table = jnp.concatenate([image_features.astype(text.dtype), jnp.zeros((1, hidden), text.dtype)], axis=0)
        index = jnp.arange(batch, dtype=jnp.int32)[:, None] * per_row + slot
        picked = jnp.take(table, jnp.where(is_image, index, rows), axis=0)
        return jnp.where(is_image[..., None], picked, text)

    return run


def decoder_spec(model: Any) -> DecoderSpec:
    """The language model as a :class:`DecoderSpec` whose step takes embeddings: its ``step`` is
    ``(params, inputs_embeds, attention_mask, position_ids, cache) -> (logits, cache)``."""
    from .attention import library_attention
    from .generic import library_facts

    backbone = model.backbone
    layers = list(backbone.transformer_layers)
    kv_heads, head_size = int(backbone.num_key_value_heads), int(backbone.head_dim)

    def step(params: Any, inputs_embeds: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        seq = inputs_embeds.shape[1]
        past = jnp.asarray(cache.past_length(seq), jnp.int32)
        visible = cache.key_valid(seq)[:, 0]  # (batch, seq, capacity): padding and causality
        real = attention_mask.astype(bool)
        if cache.layout == "shared":
            real = extend_to(real, cache.capacity)
        # the prefill is the prompt, a prefix every token of it sees whole (KerasHub's block attention)
        visible = visible | ((past == 0) & real[:, None, :])
        x = inputs_embeds
        for i, layer in enumerate(layers):
            k, v = library_layer_cache(cache, i, seq, kv_heads, head_size)
            # the library's attention math: the fused ops' causal masking cannot express the prefix
            with mask_override(layer, visible), library_attention():
                x, layer_cache = layer(x, cache=jnp.stack([k, v], axis=1), cache_update_index=past)
            cache.keys[i] = layer_cache[:, 0].transpose(0, 2, 1, 3)
            cache.values[i] = layer_cache[:, 1].transpose(0, 2, 1, 3)
        x = backbone.layer_norm(x)
        return backbone.token_embedding(x, reverse=True), cache

    facts = library_facts(model)
    return DecoderSpec(
        step=step, params=None, num_layers=len(layers), num_heads=int(backbone.num_query_heads), num_kv_heads=kv_heads,
        head_size=head_size, hidden_size=int(backbone.hidden_dim), vocab_size=int(backbone.vocabulary_size),
        model_type="gemma3", family="KerasHub PaliGemmaCausalLM", **facts,
    )


def image_converter(model: Any) -> Any:
    """The image converter the model's preprocessor carries, or None."""
    return getattr(getattr(model, "preprocessor", None), "image_converter", None)


def image_facts(model: Any, converter: Any) -> dict[str, Any]:
    """What a caller needs to feed the folder: the image size, the image tokens per image and, with
    the library's image converter, its preprocessing (``resize``, then ``x * scale + offset``)."""
    backbone = model.backbone
    return image_facts_for(int(backbone.image_size), int(backbone.image_sequence_length), converter)


def image_facts_for(size: int, tokens: int, converter: Any) -> dict[str, Any]:
    """:func:`image_facts` of a tower taking ``size`` x ``size`` images into ``tokens`` features each."""
    facts: dict[str, Any] = {"image_size": size, "image_tokens": tokens}
    if converter is None:
        return facts
    if tuple(int(d) for d in (converter.image_size or ())) != (size, size):
        raise OptionError(f"image_converter resizes to {converter.image_size}, the vision tower takes {size}x{size}; "
                          "give the model's own converter (its preprocessor's image_converter)")
    scale, offset = _per_channel(converter.scale, 1.0, "scale"), _per_channel(converter.offset, 0.0, "offset")
    if converter.interpolation not in _INTERPOLATIONS:
        raise OptionError(f"image_converter interpolation={converter.interpolation!r}: genai's image processor "
                          f"resamples with {sorted(_INTERPOLATIONS)}; feed the pixels yourself (generate(pixel_values=))")
    facts["preprocessing"] = {"resize": [size, size], "interpolation": converter.interpolation,
                              "scale": scale, "offset": offset}
    return facts


#: KerasHub's interpolation names → onnxruntime-extensions' Resize (PIL's resampling)
_INTERPOLATIONS = {"bilinear": "LINEAR", "nearest": "NEAREST", "bicubic": "CUBIC"}


def processor_config(facts: dict[str, Any]) -> dict[str, Any]:
    """``processor_config.json`` for genai's image processor (onnxruntime-extensions' transforms):
    decode, resize to the tower's size, then ``x * scale + offset`` written as ``Normalize``'s
    ``(x - mean) / std`` (``mean = -offset / scale``, ``std = 1 / scale``), height-width-channel as
    the vision graph takes it. onnxruntime-extensions resamples as PIL does (antialiased), KerasHub
    without antialiasing: the same pixels for an image already at the tower's size."""
    pre = facts["preprocessing"]
    size = facts["image_size"]
    transforms = [
        ("decode_image", "DecodeImage", {"color_space": "RGB"}),
        ("resize", "Resize", {"interpolation": _INTERPOLATIONS[pre["interpolation"]], "width": size, "height": size,
                              "keep_aspect_ratio": 0}),
        ("to_float", "Rescale", {"rescale_factor": 1.0}),
        ("scale_offset", "Normalize", {"mean": [-o / s for s, o in zip(pre["scale"], pre["offset"])],
                                       "std": [1.0 / s for s in pre["scale"]]}),
    ]
    return {"processor": {"name": "paligemma_image_processing", "transforms": [
        {"operation": {"name": name, "type": kind, "attrs": attrs}} for name, kind, attrs in transforms]}}


def _per_channel(value: Any, default: float, name: str) -> list[float]:
    """A converter's scale or offset (None, a number or one per channel) as three floats."""
    if value is None:
        return [default] * 3
    values = [float(v) for v in value] if isinstance(value, (list, tuple)) else [float(value)] * 3
    if len(values) != 3 or (name == "scale" and 0.0 in values):
        raise OptionError(f"image_converter {name}={value!r}: give one number or one per RGB channel"
                          + (", none of them 0 (it would erase the image)" if name == "scale" else ""))
    return values


def library_layer_cache(cache: KVCache, i: int, seq: int, kv_heads: int, head_size: int) -> tuple[Any, Any]:
    """Layer ``i``'s keys and values as KerasHub's layers hold them, ``(batch, positions, kv_heads,
    head_size)``; under the growing cache with room for the step's ``seq`` new positions, which the
    layer writes at ``cache_update_index``."""
    k, v = cache.keys[i].transpose(0, 2, 1, 3), cache.values[i].transpose(0, 2, 1, 3)
    if cache.layout == "concat":
        room = jnp.zeros((k.shape[0], seq, kv_heads, head_size), k.dtype)
        k, v = jnp.concatenate([k, room], axis=1), jnp.concatenate([v, room], axis=1)
    return k, v


@contextlib.contextmanager
def mask_override(layer: Any, mask: Any) -> Iterator[None]:
    """For this call the block attends with ``mask`` (batch, seq, capacity) instead of the one it
    computes (an instance attribute over the class's method, removed after)."""
    layer._compute_attention_mask = lambda *args, **kwargs: mask
    try:
        yield
    finally:
        del layer._compute_attention_mask
