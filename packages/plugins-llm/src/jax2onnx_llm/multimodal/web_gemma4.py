"""Gemma 4 with its vision encoder as transformers.js' ``Gemma4ForConditionalGeneration`` (model type
``gemma4``) runs it: the genai folder's graphs (``frontends/keras_hub/gemma4_vision.py``) cut where
transformers.js cuts them.

transformers.js (4.3) runs, at the prompt, ``embed_tokens`` on the ids alone (``inputs_embeds`` and
``per_layer_inputs``), ``vision_encoder`` on ``pixel_values`` and ``pixel_position_ids`` (the
``image_position_ids`` handed to ``generate``), writes the image features over the rows of the
``config.image_token_id`` ids in order, and hands ``inputs_embeds``, ``per_layer_inputs``,
``attention_mask`` and the cache to ``decoder_model_merged``; later steps embed the new token only.
KerasHub's per-layer inputs read the merged embeddings (their normed projection), which
``embed_tokens`` never sees, so the cut moves:

- ``vision_encoder`` returns the features as they stand in the merged embeddings (the library's
  ``hidden ** -0.5`` and ``sqrt(hidden)`` applied: the genai embedding graph's rows);
- ``embed_tokens`` returns the scaled token embeddings and only the token part of the per-layer
  inputs (the placeholders looked up as id 0);
- ``decoder_model_merged`` adds the projection of the ``inputs_embeds`` it is given and runs the
  genai decoder's step. The KV-shared layers hold no cache, as transformers.js names it
  (``num_hidden_layers - num_kv_shared_layers`` pairs); each cache input's head size is the layer's
  own (transformers.js makes the empty ones from the graph's inputs).

transformers.js' Gemma 4 always loads an ``audio_encoder`` session too. KerasHub's ``Gemma4CausalLM``
here has no audio tower, so ``onnx/audio_encoder.onnx`` returns no features (zero rows): a prompt
with audio tokens fails in transformers.js' merge (tokens and features do not match).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
from jax2onnx.targets.web.folder import CONFIG_FILE, ONNX_FOLDER, write_json

from ..spec import BATCH, SEQUENCE, DecoderSpec
from ..staging import staging as staging_folder
from ..web import REPORT_FILE
from ..web.dtypes import web_dtypes
from ..web.hf_config import GENERATION_CONFIG_FILE, build_generation_config
from ..web.layout import write_tokenizer_files
from .decoder import decoder_inputs, decoder_step
from .report import REPORT_KEY
from .web_dtypes import transformers_js_config, write_graph

VISION_ENCODER, EMBED_TOKENS, DECODER_MERGED, AUDIO_ENCODER = (
    "vision_encoder", "embed_tokens", "decoder_model_merged", "audio_encoder")


def write_web_gemma4(model: Any, family: Any, spec: DecoderSpec, facts: dict[str, Any], out: pathlib.Path, *,
                     precisions: dict[str, Any], max_length: int, target: str, opset: int, tok_source: Any,
                     reporter: Any) -> pathlib.Path:
    """The transformers.js folder of a KerasHub Gemma 4 with its vision encoder (``family``: its
    front-end, ``frontends/keras_hub/gemma4_vision.py``); ``precisions``: the dtypes per genai section."""
    backbone = model.backbone
    hidden, image_token = spec.hidden_size, facts["image_token_id"]
    width = int(family.per_layer_width(model))
    keywords = dict(target=target, opset=opset)
    with staging_folder(out, marker=REPORT_FILE) as staging:
        (staging / ONNX_FOLDER).mkdir()
        files = {}
        reporter.stage(f"{ONNX_FOLDER}/{VISION_ENCODER}.onnx")
        images = jax.export.symbolic_shape("num_images")[0]
        vision = family.vision_inputs(facts, images)
        files.update(write_graph(_merged_rows(family.vision_fn(model), hidden), [s for _, s in vision], staging,
                                 VISION_ENCODER, [n for n, _ in vision], ["image_features"],
                                 dtypes=precisions["vision"], int64_inputs=(family.PIXEL_POSITION_IDS,), **keywords))
        reporter.stage(f"{ONNX_FOLDER}/{EMBED_TOKENS}.onnx")
        batch, seq = jax.export.symbolic_shape(f"{BATCH}, {SEQUENCE}")
        files.update(write_graph(_token_embeddings(model, family, image_token, width), [
            jax.ShapeDtypeStruct((batch, seq), jnp.int32)], staging, EMBED_TOKENS, ["input_ids"],
            ["inputs_embeds", "per_layer_inputs"], dtypes=precisions["embedding"], int64_inputs=("input_ids",),
            **keywords))
        reporter.stage(f"{ONNX_FOLDER}/{DECODER_MERGED}.onnx")
        in_names, out_names = ["inputs_embeds", "per_layer_inputs", "attention_mask"], ["logits"]
        for i in range(spec.num_layers):
            in_names += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
            out_names += [f"present.{i}.key", f"present.{i}.value"]
        files.update(write_graph(_projecting_decoder(model, family, spec, max_length, width),
                                 decoder_inputs(spec, "concat", max_length, per_layer=width), staging, DECODER_MERGED,
                                 in_names, out_names, dtypes=precisions["decoder"], int64_inputs=("attention_mask",),
                                 **keywords))
        reporter.stage(f"{ONNX_FOLDER}/{AUDIO_ENCODER}.onnx")
        frames, mels = jax.export.symbolic_shape("audio_frames, audio_features")
        files.update(write_graph(_no_audio(hidden), [jax.ShapeDtypeStruct((batch, frames, mels), jnp.float32)],
                                 staging, AUDIO_ENCODER, ["input_features"], ["audio_features"],
                                 dtypes=_every_dtype(precisions), int64_inputs=(), **keywords))
        layers = len(backbone.transformer_layers)
        write_json(staging / CONFIG_FILE, gemma4_config(spec, layers, width // layers, image_token, max_length,
                                                        transformers_js_config(files)))
        write_json(staging / GENERATION_CONFIG_FILE, build_generation_config(spec))
        if tok_source is not None:
            reporter.stage("tokenizer")
            write_tokenizer_files(tok_source, staging, max_positions=max_length)
        write_json(staging / REPORT_FILE, {"max_length": max_length, "target": target, "image_token_index": image_token,
                                           "image_tokens": facts["image_tokens"], REPORT_KEY: files})
    return out


def _every_dtype(precisions: dict[str, Any]) -> list[Any]:
    """Every dtype a section is written in, once: the audio session has a file under each suffix a
    page may ask all sessions for. The graph holds no weight to quantize or narrow, so each file is
    the float32 graph under that dtype's name (a quantizing precision refuses a graph without matmuls)."""
    float32 = web_dtypes("float32")[0]
    seen: dict[str, Any] = {}
    for dtypes in precisions.values():
        for dtype in dtypes:
            seen.setdefault(dtype.name, dataclasses.replace(dtype, precision=float32.precision, float16_after=False))
    return list(seen.values())


def _merged_rows(vision: Any, hidden: int) -> Any:
    """``(pixel_values, pixel_position_ids) -> image_features (images * tokens, hidden)``: the tower's
    features scaled as the genai embedding graph scales them into the merged embeddings (same ops)."""

    def run(pixel_values: Any, pixel_position_ids: Any) -> Any:
        features = vision(pixel_values, pixel_position_ids).astype(jnp.float32)
        scaled = features * jnp.asarray(float(hidden) ** -0.5, jnp.float32)
        return scaled * jnp.sqrt(jnp.asarray(hidden, jnp.float32))

    return run


def _token_embeddings(model: Any, family: Any, image_token: int, width: int) -> Any:
    """``input_ids -> (inputs_embeds, per_layer_inputs)``: the scaled token embeddings (the
    placeholders' rows are overwritten by transformers.js) and the token part of the per-layer inputs."""
    backbone = model.backbone
    hidden = int(backbone.hidden_dim)

    def run(input_ids: Any) -> tuple[Any, Any]:
        x = backbone.token_embedding(input_ids)
        x = x * jnp.sqrt(jnp.asarray(hidden, jnp.float32)).astype(x.dtype)
        return x, family.per_layer_tokens(model, input_ids, input_ids == image_token, x.dtype)

    return run


def _projecting_decoder(model: Any, family: Any, spec: DecoderSpec, max_length: int, width: int) -> Any:
    """``(inputs_embeds, per_layer_inputs (token part), attention_mask, *past) -> (logits, *present)``:
    the genai decoder's step on the per-layer inputs completed from the merged embeddings."""
    step = decoder_step(spec, "concat", max_length, per_layer=width)

    def run(inputs_embeds: Any, tokens: Any, attention_mask: Any, *past: Any) -> tuple[Any, ...]:
        x = inputs_embeds.astype(spec.dtype)
        return step(x, family.per_layer_inputs(model, x, tokens.astype(spec.dtype)), attention_mask, *past)

    return run


def _no_audio(hidden: int) -> Any:
    """``input_features -> audio_features (0, hidden)``: the model has no audio tower (module doc)."""

    def run(input_features: Any) -> Any:
        return jnp.zeros((0, hidden), jnp.float32) + input_features[:0, 0, :1]

    return run


def gemma4_config(spec: DecoderSpec, layers: int, per_layer_width: int, image_token: int, max_length: int,
                  transformers_js: dict[str, Any]) -> dict[str, Any]:
    """``config.json``: transformers.js names the cache inputs from ``text_config``'s layer counts
    (the KV-holding layers: all but the ``num_kv_shared_layers``) and merges at ``image_token_id``."""
    special = {k: v for k, v in build_generation_config(spec).items() if k.endswith("_token_id")}
    return {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "image_token_id": image_token,
        "text_config": {"model_type": "gemma4_text", "num_hidden_layers": layers,
                        "num_kv_shared_layers": layers - spec.num_layers,
                        "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
                        "head_dim": spec.head_size, "hidden_size": spec.hidden_size, "vocab_size": spec.vocab_size,
                        "hidden_size_per_layer_input": per_layer_width, "max_position_embeddings": max_length},
        "vocab_size": spec.vocab_size,
        **special,
        "use_cache": True,
        "transformers.js_config": transformers_js,
    }
