"""KerasHub Moonshine (``MoonshineAudioToText`` or its ``MoonshineBackbone``, JAX backend) as the graphs of
a speech-to-text folder: the audio encoder and the decoder (the parts ``jax2onnx_llm.multimodal``
exports, reached through the registry: this front-end's ``speech_to_text``).

How KerasHub runs Moonshine (``MoonshineAudioToText.call_encoder`` / ``call_decoder_with_cache``):

- the encoder reads raw 16 kHz audio ``(batch, samples, 1)`` (no log-mel): three convolutions (kernel
  127 stride 64, tanh, a one-group GroupNorm over the whole clip; kernel 7 stride 3, GELU; kernel 3
  stride 2, GELU), then pre-norm transformer layers with partial rotary positions. A batch of clips
  of different lengths is zero-padded to the longest, and the padding mask is the samples equal to
  the converter's padding value (0.0), as ``MoonshineAudioToTextPreprocessor`` marks them; each row's
  count of the others, taken through the convolutions' length arithmetic (``compute_output_lengths``),
  masks the padded frames out of the encoder's attention and of the decoder's cross-attention. The
  graphs derive that mask from the audio the same way, so they take the audio alone;
- the decoder embeds tokens (no learned positions: rotary ones, counted from 0), and each pre-norm
  layer runs causal self-attention, cross-attention over the encoder's output and a gated (SwiGLU)
  or GELU feed-forward; the logits are the final norm's output against the token embedding (tied).

Keys and values are laid out ``(batch, heads, length, head_size)``; the self-attention keys are
cached after their rotary rotation, as KerasHub caches them.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from ...errors import OptionError, UnsupportedModelError
from .whisper import _heads_first, cross_keys_values

#: the Hugging Face architecture transformers.js runs this model's graphs as
TRANSFORMERS_JS_MODEL_TYPE = "moonshine"

def _library() -> Any:
    import keras_hub

    return keras_hub


def backbone_of(model: Any) -> Any:
    """The ``MoonshineBackbone`` of a ``MoonshineAudioToText`` (or the backbone itself)."""
    return model.backbone if isinstance(model, _library().models.MoonshineAudioToText) else model


def check(model: Any) -> None:
    import keras

    if keras.backend.backend() != "jax":
        raise UnsupportedModelError(
            f"KerasHub Moonshine runs on the {keras.backend.backend()!r} backend; set KERAS_BACKEND=jax "
            "before importing keras")


def head_size(backbone: Any, heads: int) -> int:
    """The attention head size the backbone builds (``hidden_dim / heads``, rounded up to
    ``pad_head_dim_to_multiple_of`` when set)."""
    size = int(backbone.hidden_dim) // heads
    multiple = backbone.pad_head_dim_to_multiple_of
    return -(-size // multiple) * multiple if multiple else size


def facts(model: Any) -> dict[str, Any]:
    """The sizes the folder's config and its users need."""
    backbone = backbone_of(model)
    heads, encoder_heads = int(backbone.decoder_num_heads), int(backbone.encoder_num_heads)
    return {"num_layers": int(backbone.decoder_num_layers), "num_heads": heads,
            "head_size": head_size(backbone, heads), "encoder_layers": int(backbone.encoder_num_layers),
            "encoder_heads": encoder_heads, "hidden_size": int(backbone.hidden_dim),
            "intermediate_size": int(backbone.intermediate_dim), "vocab_size": int(backbone.vocabulary_size),
            "max_decoder_length": int(backbone.max_position_embeddings), "sampling_rate": 16000,
            "family": f"KerasHub {type(model).__name__}"}


def tokens(tokenizer: Any) -> dict[str, Any]:
    """The start, end and pad ids the folder is configured with, from the library's tokenizer; the
    prompt is the start token alone (``MoonshineAudioToTextPreprocessor.generate_preprocess``'s)."""
    ids = [getattr(tokenizer, name, None) for name in ("start_token_id", "end_token_id", "pad_token_id")]
    if any(i is None for i in ids):
        raise OptionError(f"tokenizer={type(tokenizer).__name__}: give the model's MoonshineTokenizer (its start, end "
                          "and pad tokens configure the folder)")
    start, end, pad = (int(i) for i in ids)
    return {"start": start, "end": end, "pad": pad, "prompt": [start]}


def _output_lengths(mask: Any) -> Any:
    """The encoder frames each clip fills: its samples' count through the three convolutions (the
    library's ``compute_output_lengths``)."""
    from keras_hub.src.models.moonshine.moonshine_backbone import compute_output_lengths

    return compute_output_lengths(jnp.sum(mask.astype(jnp.int32), axis=1))


def padding_value(model: Any) -> float:
    """The sample value that marks padding: the model's audio converter's (0.0 without a preprocessor)."""
    converter = getattr(getattr(model, "preprocessor", None), "audio_converter", None)
    return float(getattr(converter, "padding_value", 0.0))


def _frames_mask(input_values: Any, pad: float, frames: Any) -> Any:
    """``(batch, frames)``: True on the frames of each clip, False on its padding's (the library's
    preprocessor's padding mask: the samples equal to ``pad``)."""
    return jnp.arange(frames)[None, :] < _output_lengths(input_values != pad)[:, None]


def frames_mask(model: Any, input_values: Any, frames: Any) -> Any:
    """``(batch, frames)`` bool of ``input_values`` ``(batch, samples)``: True on each clip's encoder frames,
    False on those of its padding (the samples equal to the model's padding value)."""
    return _frames_mask(input_values, padding_value(model), frames)


def encoder_fn(model: Any) -> Any:
    """``input_values (batch, samples) -> (encoder_hidden_states,)``: the backbone's convolution stem
    and encoder layers, called as ``call_encoder`` calls them, with the padding mask the preprocessor
    would give the audio."""
    backbone, pad = backbone_of(model), padding_value(model)

    def run(input_values: Any) -> tuple[Any]:
        x = backbone.tanh_after_conv1(backbone.conv1(input_values[..., None]))
        x = backbone.gelu_after_conv2(backbone.conv2(backbone.group_norm(x)))
        x = backbone.gelu_after_conv3(backbone.conv3(x))
        frames = x.shape[1]
        mask = _frames_mask(input_values, pad, frames)
        rotary = backbone.encoder_rotary_embedding(jnp.arange(frames, dtype=jnp.int32))
        for block in backbone.encoder_blocks:
            x = block(x, rotary, attention_mask=mask, training=False)
        return (backbone.encoder_final_layer_norm(x),)

    return run


def cross_fn(model: Any) -> Any:
    """``encoder_hidden_states (batch, length, hidden) -> cross``: each decoder layer's cross-attention
    keys and values of the encoder's output, ``key, value`` per layer ``(batch, heads, length, head_size)``."""
    return cross_keys_values([block.cross_attention for block in backbone_of(model).decoder_blocks])


def decoder_fn(model: Any) -> Any:
    """``(input_ids (batch, seq), input_values (batch, samples), *past_self, *past_cross) -> (logits,
    *present_self)``, both caches interleaved per layer as ``key, value`` ``(batch, heads, length,
    head_size)``; the self caches grow by ``seq`` (the present is past + new), and the audio's padding
    (as the encoder reads it) masks the padded frames out of the cross-attention, as the library's
    encoder padding mask does."""
    step, pad = decoder_step_fn(model), padding_value(model)

    def run(input_ids: Any, input_values: Any, *caches: Any) -> tuple[Any, ...]:
        frames = caches[-1].shape[2]
        return step(input_ids, _frames_mask(input_values, pad, frames), *caches)

    return run


def decoder_step_fn(model: Any) -> Any:
    """``(input_ids, frames_mask (batch, frames) bool, *past_self, *past_cross) -> (logits, *present_self)``:
    :func:`decoder_fn` with the cross-attention's frame mask given (True on each clip's frames)."""
    from keras_hub.src.models.moonshine.moonshine_multi_head_attention import _apply_rotary_pos_emb

    backbone = backbone_of(model)
    blocks = list(backbone.decoder_blocks)
    count = len(blocks)

    def run(input_ids: Any, frames_mask: Any, *caches: Any) -> tuple[Any, ...]:
        past_self, past_cross = caches[: 2 * count], caches[2 * count:]
        seq, past = input_ids.shape[1], past_self[0].shape[2]
        rotary = backbone.decoder_rotary_embedding(jnp.arange(seq, dtype=jnp.int32) + past)
        causal = (jnp.arange(past + seq)[None, :] <= (jnp.arange(seq) + past)[:, None])[None, None]
        frames_mask = frames_mask[:, None, None, :]
        x = backbone.token_embedding(input_ids)
        present = []
        for i, block in enumerate(blocks):
            attention = block.self_attention
            h = block.norm1(x)
            query = _apply_rotary_pos_emb(attention._query_dense(h), rotary)
            key = jnp.concatenate([past_self[2 * i],
                                   _heads_first(_apply_rotary_pos_emb(attention._key_dense(h), rotary))], axis=2)
            value = jnp.concatenate([past_self[2 * i + 1], _heads_first(attention._value_dense(h))], axis=2)
            present += [key, value]
            x = x + _attend(attention, query, key, value, causal)
            cross = block.cross_attention
            query = cross._query_dense(block.norm2(x))
            x = x + _attend(cross, query, past_cross[2 * i], past_cross[2 * i + 1], frames_mask)
            x = x + block.ff(block.norm3(x))
        logits = backbone.token_embedding(backbone.decoder_post_norm(x), reverse=True)
        return (logits.astype(jnp.float32), *present)

    return run


def _attend(attention: Any, query: Any, key: Any, value: Any, mask: Any) -> Any:
    """Keras ``MultiHeadAttention``'s math on cached keys/values: the (rotated) query scaled by
    ``1/sqrt(head_size)``, softmax over the keys ``mask`` keeps, the output projection."""
    query = query * (1.0 / math.sqrt(query.shape[-1]))
    scores = jnp.einsum("bqhd,bhkd->bhqk", query, key)
    scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    weights = jnp.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return attention._output_dense(jnp.einsum("bhqk,bhkd->bqhd", weights, value))
