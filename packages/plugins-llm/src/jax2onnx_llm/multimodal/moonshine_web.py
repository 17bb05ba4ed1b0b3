"""``export_speech_to_text(..., target="web")`` for KerasHub Moonshine: the folder transformers.js
(npm ``@huggingface/transformers`` 4) runs as ``MoonshineForConditionalGeneration``.

transformers.js runs Moonshine as optimum's encoder-decoder pair, as it runs Whisper
(:mod:`jax2onnx_llm.multimodal.web`), with raw audio in place of log-mel features::

    onnx/encoder_model.onnx         input_values (batch, samples) float32 16 kHz audio
                                    -> last_hidden_state (batch, frames, hidden)
    onnx/decoder_model_merged.onnx  input_ids (int64), input_values, encoder_hidden_states,
                                    past_key_values.N.decoder/encoder.key/value, use_cache_branch
                                    -> logits, present.N.decoder/encoder.key/value

transformers.js' Moonshine passes ``generate`` only ``input_values`` (its ``forward_params``: an
``attention_mask`` given to ``generate`` is dropped), and picks each session's inputs by name from
what it has: the decoder gets ``input_values`` too. So the graphs take the padding mask the way
KerasHub's ``MoonshineAudioToTextPreprocessor`` makes it, from the audio: the samples equal to the
padding value (0.0) are padding. A batch of clips of different lengths, zero-padded to the longest,
runs as the library runs it (padded frames masked out of the encoder's attention and of the
decoder's cross-attention, which recounts each row's samples at every step: a compare and a sum).
The audio is the library's audio converter's output (``MoonshineAudioConverter``: the clip itself
unless built with ``do_normalize=True``), fed as it is. The decoder is Whisper's merged decoder
(``_merged_whisper_decoder``: the cross keys and values projected once, on the first step) around
the front-end's step. Float32 only, as the Whisper folder.

The onnxruntime-genai folder of this model is :mod:`jax2onnx_llm.multimodal.moonshine_genai`'s.
"""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import jax.numpy as jnp
from jax2onnx.targets.web.folder import ONNX_FOLDER

from ..spec import BATCH, PAST, SEQUENCE
from ..staging import staging as staging_folder
from ..web import REPORT_FILE
from .web import (
    DECODER_MERGED,
    ENCODER_LENGTH,
    ENCODER_MODEL,
    _merged_whisper_decoder,
    check_architecture,
    finish_speech_folder,
    merged_cache_names,
    speech_config_tail,
)
from .web_dtypes import transformers_js_config, write_graph

#: the audio's length in samples (the encoder's input and the decoder's mask: one symbol)
SAMPLES = "num_samples"
#: a clip fills at least one encoder frame (the three convolutions' span: 127 + 64 * (3 * (3 - 1) + 7 - 1) samples,
#: 56 ms), which keeps the frame count's formula free of max(..., 0)
MIN_SAMPLES = f"{SAMPLES} >= 895"


def write_web_moonshine(model: Any, parts: Any, facts: dict[str, Any], tokens: dict[str, Any], out: pathlib.Path, *,
                        precisions: dict[str, Any], max_length: int, target: str, opset: int, tok_source: Any,
                        reporter: Any) -> pathlib.Path:
    """The transformers.js folder of a Moonshine model (the parts ``parts`` finds in ``model``); ``precisions``:
    the dtypes per genai section (``web_dtypes.web_precisions``)."""
    check_architecture(parts, ("moonshine",), model)
    layers, heads, head_size, hidden = facts["num_layers"], facts["num_heads"], facts["head_size"], facts["hidden_size"]
    keywords = dict(target=target, opset=opset)
    with staging_folder(out, marker=REPORT_FILE) as staging:
        (staging / ONNX_FOLDER).mkdir()
        files = {}
        reporter.stage(f"{ONNX_FOLDER}/{ENCODER_MODEL}.onnx")
        batch, samples = jax.export.symbolic_shape(f"{BATCH}, {SAMPLES}", constraints=(MIN_SAMPLES,))
        encoder = parts.encoder_fn(model)
        files.update(write_graph(
            lambda values: encoder(values)[0], [jax.ShapeDtypeStruct((batch, samples), jnp.float32)], staging,
            ENCODER_MODEL, ["input_values"], ["last_hidden_state"], dtypes=precisions["encoder"], int64_inputs=(),
            **keywords))
        reporter.stage(f"{ONNX_FOLDER}/{DECODER_MERGED}.onnx")
        batch, samples, seq, past, length = jax.export.symbolic_shape(
            f"{BATCH}, {SAMPLES}, {SEQUENCE}, {PAST}, {ENCODER_LENGTH}",
            constraints=(f"{PAST} + {SEQUENCE} <= {max_length}", MIN_SAMPLES))
        own = jax.ShapeDtypeStruct((batch, heads, past, head_size), jnp.float32)
        cross = jax.ShapeDtypeStruct((batch, heads, length, head_size), jnp.float32)
        past, present = merged_cache_names(layers)
        in_names, out_names = ["input_ids", "input_values", "encoder_hidden_states", *past], ["logits", *present]
        inputs = [jax.ShapeDtypeStruct((batch, seq), jnp.int32), jax.ShapeDtypeStruct((batch, samples), jnp.float32),
                  jax.ShapeDtypeStruct((batch, length, hidden), jnp.float32), *[own, own, cross, cross] * layers,
                  jax.ShapeDtypeStruct((1,), jnp.bool_)]
        files.update(write_graph(
            _merged_decoder(parts.decoder_fn(model), parts.cross_fn(model), layers), inputs, staging, DECODER_MERGED,
            [*in_names, "use_cache_branch"], out_names, dtypes=precisions["decoder"], int64_inputs=("input_ids",),
            **keywords))
        finish_speech_folder(staging, files, _config(facts, tokens, max_length, transformers_js_config(files)),
                             _generation_config(tokens, max_length), _feature_extractor(facts),
                             tok_source=tok_source, max_length=max_length, target=target, reporter=reporter)
    return out


def _merged_decoder(decoder: Any, cross_fn: Any, layers: int) -> Any:
    """Whisper's merged decoder with the audio beside ``input_ids`` (its padding masks the cross-attention):
    ``(input_ids, input_values, encoder_hidden_states, *past, use_cache_branch) -> (logits, *present)``."""

    def run(input_ids: Any, input_values: Any, encoder_hidden_states: Any, *rest: Any) -> tuple[Any, ...]:
        def step(ids: Any, *caches: Any) -> tuple[Any, ...]:
            return decoder(ids, input_values, *caches)

        return _merged_whisper_decoder(step, cross_fn, layers)(input_ids, encoder_hidden_states, *rest)

    return run


def _config(facts: dict[str, Any], tokens: dict[str, Any], max_length: int,
            transformers_js: dict[str, Any]) -> dict[str, Any]:
    """``config.json`` under Hugging Face Moonshine's names (transformers.js reads the decoder's layer
    and key/value head counts from them: they name the cache inputs it feeds)."""
    return {
        "architectures": ["MoonshineForConditionalGeneration"],
        "model_type": "moonshine",
        "is_encoder_decoder": True,
        "hidden_size": facts["hidden_size"],
        "intermediate_size": facts["intermediate_size"],
        "encoder_num_hidden_layers": facts["encoder_layers"], "decoder_num_hidden_layers": facts["num_layers"],
        "encoder_num_attention_heads": facts["encoder_heads"], "decoder_num_attention_heads": facts["num_heads"],
        "encoder_num_key_value_heads": facts["encoder_heads"], "decoder_num_key_value_heads": facts["num_heads"],
        "head_dim": facts["head_size"],
        "max_position_embeddings": facts["max_decoder_length"],
        **speech_config_tail(facts, tokens, max_length, transformers_js),
    }


def _generation_config(tokens: dict[str, Any], max_length: int) -> dict[str, Any]:
    """``generation_config.json``: the start token ``generate`` begins each row with, the end token, greedy."""
    return {"decoder_start_token_id": tokens["start"], "bos_token_id": tokens["start"], "eos_token_id": tokens["end"],
            "pad_token_id": tokens["pad"], "max_length": max_length, "do_sample": False}


def _feature_extractor(facts: dict[str, Any]) -> dict[str, Any]:
    """``preprocessor_config.json`` for transformers.js' ``MoonshineFeatureExtractor``: the raw 16 kHz
    clip as ``input_values`` (the library's converter, without normalization)."""
    return {"feature_extractor_type": "MoonshineFeatureExtractor", "processor_class": "MoonshineProcessor",
            "feature_size": 1, "sampling_rate": facts["sampling_rate"], "padding_value": 0.0, "do_normalize": False,
            "return_attention_mask": False}
