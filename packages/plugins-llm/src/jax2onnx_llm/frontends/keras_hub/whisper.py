"""KerasHub ``WhisperBackbone`` (JAX backend) as the two graphs of an onnxruntime-genai Whisper
folder: the audio encoder and the decoder (the parts ``jax2onnx_llm.multimodal.whisper`` exports,
reached through the registry: this front-end's ``speech_to_text``).

How KerasHub runs Whisper (``WhisperBackbone``'s functional graph; it has no ``generate``):

- the encoder reads log-mel features ``(batch, frames, mels)`` (its ``WhisperAudioConverter`` pads or
  trims every clip to 30 s: 3000 frames), two convolutions (the second of stride 2, after one frame
  of padding on each side) give ``frames / 2`` positions, then pre-norm transformer layers;
- the decoder embeds tokens plus learned positions counted from 0, and each pre-norm layer runs
  causal self-attention, cross-attention over the encoder's output and a GELU feed-forward; the
  logits are the final norm's output against the token embedding (tied).

onnxruntime-genai's ``whisper`` model runs the encoder once (``audio_features (batch, mels, 3000)``,
mels first as Whisper's processors write them) and reads the per-layer cross-attention keys and values
from it (``present_key_cross_%d``), then steps the decoder with self-attention caches that grow and
no attention mask (every row of a batch holds the same prompt): the decoder's positions are the past's
length onwards. Keys and values are laid out ``(batch, heads, length, head_size)``.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from ...errors import OptionError, UnsupportedModelError

#: the Hugging Face architecture transformers.js runs this model's graphs as (``jax2onnx_llm.multimodal.web``
#: writes its folder only for a front-end that names one)
TRANSFORMERS_JS_MODEL_TYPE = "whisper"

#: the frames genai's Whisper encoder takes (30 s of 10 ms hops), fixed by genai
FRAMES = 3000


def check(model: Any) -> None:
    import keras

    if keras.backend.backend() != "jax":
        raise UnsupportedModelError(
            f"KerasHub WhisperBackbone runs on the {keras.backend.backend()!r} backend; set KERAS_BACKEND=jax "
            "before importing keras")
    if int(model.max_encoder_sequence_length) != FRAMES:
        raise UnsupportedModelError(
            f"this WhisperBackbone takes {model.max_encoder_sequence_length} frames; onnxruntime-genai's Whisper "
            f"encoder takes exactly {FRAMES} (30 s): build the backbone with max_encoder_sequence_length={FRAMES}")
    if float(model.dropout) != 0.0:
        raise UnsupportedModelError(f"WhisperBackbone(dropout={model.dropout}): the export runs inference, where "
                                    "dropout does nothing; build it with dropout=0.0")


def facts(model: Any) -> dict[str, Any]:
    """The sizes genai's config and the folder's users need."""
    hidden, heads = int(model.hidden_dim), int(model.num_heads)
    return {"num_layers": int(model.num_layers), "num_heads": heads, "head_size": hidden // heads,
            "hidden_size": hidden, "vocab_size": int(model.vocabulary_size), "num_mels": int(model.num_mels),
            "frames": FRAMES, "encoder_length": FRAMES // 2,
            "max_decoder_length": int(model.max_decoder_sequence_length), "family": "KerasHub WhisperBackbone"}


def encoder_fn(model: Any) -> Any:
    """``audio_features (batch, mels, frames) -> (encoder_hidden_states, *cross)``, cross per decoder
    layer as ``key, value`` ``(batch, heads, frames / 2, head_size)``: the backbone's encoder (its own
    layers, called as its graph calls them) and each decoder layer's cross-attention projections."""
    import keras

    def run(audio_features: Any) -> tuple[Any, ...]:
        x = jnp.swapaxes(audio_features, 1, 2)  # genai's (batch, mels, frames) -> KerasHub's (batch, frames, mels)
        x = keras.activations.gelu(model.encoder_conv_layer_1(x), approximate=False)
        x = keras.activations.gelu(model.encoder_conv_layer_2(model.encoder_padder(x)), approximate=False)
        x = x + model.encoder_position_embedding(x)
        for layer in model.encoder_transformer_layers:
            x = layer(x)
        x = model.encoder_layer_norm(x)
        return (x, *cross(x))

    cross = cross_fn(model)
    return run


def cross_fn(model: Any) -> Any:
    """``encoder_hidden_states (batch, length, hidden) -> cross``: each decoder layer's cross-attention
    keys and values of the encoder's output, ``key, value`` per layer ``(batch, heads, length, head_size)``."""
    return cross_keys_values([layer._cross_attention_layer for layer in model.decoder_transformer_layers])


def cross_keys_values(attentions: list[Any]) -> Any:
    """``encoder_hidden_states -> [key, value per layer]`` by each cross-attention layer's own key and value
    projections (KerasHub's Whisper and Moonshine name them alike), heads first."""

    def run(encoder_hidden_states: Any) -> list[Any]:
        cross = []
        for attention in attentions:
            cross += [_heads_first(attention._key_dense(encoder_hidden_states)),
                      _heads_first(attention._value_dense(encoder_hidden_states))]
        return cross

    return run


def decoder_fn(model: Any) -> Any:
    """``(input_ids (batch, seq), *past_self, *past_cross) -> (logits, *present_self)``, both caches
    interleaved per layer as ``key, value`` ``(batch, heads, length, head_size)``; the self caches
    grow by ``seq`` (the present is past + new)."""
    layers = list(model.decoder_transformer_layers)
    count = len(layers)

    def run(input_ids: Any, *caches: Any) -> tuple[Any, ...]:
        past_self, past_cross = caches[: 2 * count], caches[2 * count:]
        seq = input_ids.shape[1]
        past = past_self[0].shape[2]
        embeddings = model.decoder_embeddings
        positions = jnp.take(embeddings.position_embedding.position_embeddings.value, jnp.arange(seq) + past, axis=0)
        x = embeddings.token_embedding(input_ids) + positions[None].astype(jnp.float32)
        causal = jnp.arange(past + seq)[None, :] <= (jnp.arange(seq) + past)[:, None]  # (seq, past + seq)
        present = []
        for i, layer in enumerate(layers):
            attention = layer._self_attention_layer
            h = layer._self_attention_layer_norm(x)
            key = jnp.concatenate([past_self[2 * i], _heads_first(attention._key_dense(h))], axis=2)
            value = jnp.concatenate([past_self[2 * i + 1], _heads_first(attention._value_dense(h))], axis=2)
            present += [key, value]
            x = x + _attend(attention, h, key, value, causal)
            cross = layer._cross_attention_layer
            h = layer._cross_attention_layer_norm(x)
            x = x + _attend(cross, h, past_cross[2 * i], past_cross[2 * i + 1], None)
            h = layer._feedforward_layer_norm(x)
            x = x + layer._feedforward_output_dense(layer._feedforward_intermediate_dense(h))
        x = model.decoder_layer_norm(x)
        logits = model.token_embedding(x, reverse=True)
        return (logits.astype(jnp.float32), *present)

    return run


def _heads_first(x: Any) -> Any:
    """A projection's ``(batch, length, heads, head_size)`` as the cache's ``(batch, heads, length, head_size)``."""
    return jnp.transpose(x, (0, 2, 1, 3))


def _attend(attention: Any, h: Any, key: Any, value: Any, mask: Any) -> Any:
    """Keras ``MultiHeadAttention``'s math on cached keys/values: the query scaled by ``1/sqrt(head_size)``,
    softmax over the keys (masked ones excluded), the output projection."""
    query = attention._query_dense(h)  # (batch, seq, heads, head_size)
    query = query * (1.0 / math.sqrt(query.shape[-1]))
    scores = jnp.einsum("bqhd,bhkd->bhqk", query, key)
    if mask is not None:
        scores = jnp.where(mask[None, None], scores, jnp.finfo(scores.dtype).min)
    weights = jnp.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return attention._output_dense(jnp.einsum("bhqk,bhkd->bqhd", weights, value))


def tokens(tokenizer: Any) -> dict[str, Any]:
    """The start, end and prompt ids the folder is configured with, from the library's tokenizer."""
    if tokenizer is None or not hasattr(tokenizer, "no_timestamps_token_id"):
        raise OptionError(f"tokenizer={type(tokenizer).__name__}: give the model's WhisperTokenizer (its start, end "
                          "and prompt tokens configure the folder)")
    return {"start": int(tokenizer.bos_token_id), "end": int(tokenizer.eos_token_id),
            "pad": int(tokenizer.pad_token_id), "no_timestamps": int(tokenizer.no_timestamps_token_id),
            "transcribe": int(tokenizer.transcribe_token_id), "translate": int(tokenizer.translate_token_id),
            "prompt": prompt(tokenizer), "prompt_with_timestamps": prompt(tokenizer, timestamps=True),
            "languages": dict(tokenizer.language_tokens or {})}


def prompt(tokenizer: Any, *, language: str | None = None, task: str = "transcribe", timestamps: bool = False) -> list[int]:
    """The decoder prompt Whisper's tokenizer defines: start of transcript, the language (multilingual
    tokenizers), the task, and ``<|notimestamps|>`` unless timestamps are predicted."""
    ids = [int(tokenizer.bos_token_id)]
    if language is not None:
        languages = tokenizer.language_tokens or {}
        if language not in languages:
            raise OptionError(f"language={language!r} is not among the tokenizer's language tokens "
                              f"({sorted(languages)[:8]}...); give one of them, or None for an English-only tokenizer")
        ids.append(int(languages[language]))
    if task not in ("transcribe", "translate"):
        raise OptionError(f"task={task!r}: give 'transcribe' or 'translate'")
    ids.append(int(tokenizer.transcribe_token_id if task == "transcribe" else tokenizer.translate_token_id))
    if not timestamps:
        ids.append(int(tokenizer.no_timestamps_token_id))
    return ids
