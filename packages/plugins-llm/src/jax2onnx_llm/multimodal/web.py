"""The multimodal exports' ``target="web"``: the folders transformers.js (npm ``@huggingface/transformers``
4, onnxruntime-web underneath) loads, in optimum's file names and I/O conventions.

**Vision-language** (``export_multimodal_lm(..., target="web")``, KerasHub PaliGemma): transformers.js'
``PaliGemmaForConditionalGeneration`` (its LLaVA pipeline) runs three sessions::

    onnx/vision_encoder.onnx        pixel_values (images, 3, size, size) -> image_features (images, tokens, hidden)
    onnx/embed_tokens.onnx          input_ids (int64) -> inputs_embeds
    onnx/decoder_model_merged.onnx  inputs_embeds, attention_mask (int64), past_key_values.N.key/value
                                    -> logits, present.N.key/value

At the prompt it embeds the ids, runs the vision encoder, and writes the image features over the
embeddings of the ``config.image_token_index`` ids in order (a plain scatter); later steps embed the
new token only. KerasHub's PaliGemma has no image token: the folder's is one past the vocabulary
(``vocabulary_size``, Hugging Face's ``<image>`` id for the released PaliGemma), whose embedding is
zeros (it is always overwritten). The pixels are channels first, as transformers.js' image processor
makes them (``preprocessor_config.json``: resize, rescale, normalize, from the library's converter);
the library's own are transposed in the vision graph's first op. The embeddings come out already
scaled by ``sqrt(hidden)`` (KerasHub's), so the decoder reads them as they are. The decoder takes no
``position_ids`` (transformers.js then passes none): positions follow the cache, and the prompt is
a prefix every prompt token sees whole, as in the genai folder's decoder (the same step).

**Speech to text** (``export_speech_to_text(..., target="web")``, KerasHub Whisper): transformers.js'
``WhisperForConditionalGeneration`` runs ``onnx/encoder_model.onnx`` (``input_features`` (batch, mels,
3000) -> ``last_hidden_state``) once, then ``onnx/decoder_model_merged.onnx`` every step: ``input_ids``
(int64), ``encoder_hidden_states``, per layer ``past_key_values.N.decoder.key/value`` (the growing
self-attention cache) and ``past_key_values.N.encoder.key/value`` (the cross-attention keys and values),
and ``use_cache_branch`` -> ``logits``, ``present.N.decoder.*``, ``present.N.encoder.*``. At the first
step (``use_cache_branch`` false, empty caches) the graph projects the encoder's output into the
cross keys and values and returns them; afterwards transformers.js feeds them back (it keeps the past
ones in place of the presents, as optimum does), and the graph's ``If`` passes them through instead of
projecting 1500 positions again. Both lengths of the cross cache carry one symbol with
``encoder_hidden_states``' length: transformers.js starts the caches from the input metadata, an
unknown length as 0.

**Gemma 3** (KerasHub ``Gemma3CausalLM`` with a vision encoder): transformers.js' ``Gemma3ForConditionalGeneration``
runs PaliGemma's three sessions; the differences (a real image token, the image flag that carries
KerasHub's two-way image attention to the decoder) are in :mod:`.web_gemma3`.

**Gemma 4** (KerasHub ``Gemma4CausalLM`` with a vision encoder): transformers.js' ``Gemma4ForConditionalGeneration``,
whose sessions also carry the per-layer inputs and the patches' positions: :mod:`.web_gemma4`.

**Dtypes**: ``precision=`` as the genai folder's (one, or one per sub-model under its section names),
each value one dtype or several, one file each under transformers.js' suffix (``_fp16``, ``_q4``,
``_q4f16``, ``_quantized``): :mod:`.web_dtypes`. The report (``jax2onnx_web.json``'s ``models``,
read by ``report.folder_report``) lists every file's dtype, bytes and fused ops.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
from jax2onnx.targets.web.folder import CONFIG_FILE, ONNX_FOLDER, PREPROCESSOR_FILE, write_json

from ..errors import UnsupportedModelError
from ..spec import BATCH, PAST, SEQUENCE, DecoderSpec
from ..staging import staging as staging_folder
from ..web import REPORT_FILE
from ..web.hf_config import GENERATION_CONFIG_FILE, build_generation_config
from ..web.layout import write_tokenizer_files
from .decoder import decoder_inputs, decoder_step
from .report import REPORT_KEY
from .web_dtypes import transformers_js_config, write_graph
from .web_gemma3 import IMAGE_FLAG, flagged, flagged_decoder, flagged_decoder_inputs, gemma3_config
from .web_gemma4 import write_web_gemma4

VISION_ENCODER, EMBED_TOKENS, DECODER_MERGED = "vision_encoder", "embed_tokens", "decoder_model_merged"
ENCODER_MODEL = "encoder_model"
#: the length of the encoder's output and of the cross-attention cache (one symbol: see the module doc)
ENCODER_LENGTH = "encoder_sequence_length"
#: KerasHub's interpolation names -> Hugging Face's ``resample`` codes (PIL's), which transformers.js reads
RESAMPLE = {"nearest": 0, "bilinear": 2, "bicubic": 3}
def check_architecture(parts: Any, wanted: tuple[str, ...], model: Any) -> str:
    """The front-end's parts are those of one of ``wanted`` (its ``TRANSFORMERS_JS_MODEL_TYPE``): the
    folder's config, file names and I/O are that architecture's in transformers.js. Returns it."""
    kind = getattr(parts, "TRANSFORMERS_JS_MODEL_TYPE", None)
    if kind not in wanted:
        raise UnsupportedModelError(
            f"a transformers.js target writes the folders of {list(wanted)}, and {type(model).__name__} is none of "
            "them (its front-end names no such transformers.js architecture); export it with a genai target "
            "(target=None)")
    return kind


# -- vision-language (PaliGemma, Gemma 3) -------------------------------------------------------


def write_web_vision_language(model: Any, family: Any, spec: DecoderSpec, facts: dict[str, Any], out: pathlib.Path, *,
                              precisions: dict[str, Any], max_length: int, target: str, opset: int, tok_source: Any,
                              reporter: Any) -> pathlib.Path:
    """The transformers.js folder of a vision-language model (the parts ``family`` finds in ``model``);
    ``precisions``: the dtypes per genai section (``web_dtypes.web_precisions``)."""
    kind = check_architecture(family, ("paligemma", "gemma3", "gemma4"), model)
    if kind == "gemma4":  # its own cut of the graphs (per-layer inputs): web_gemma4.py
        return write_web_gemma4(model, family, spec, facts, out, precisions=precisions, max_length=max_length,
                                target=target, opset=opset, tok_source=tok_source, reporter=reporter)
    size, tokens, hidden = facts["image_size"], facts["image_tokens"], spec.hidden_size
    vision = _channels_first_vision(family.vision_fn(model), tokens)
    if kind == "gemma3":  # the image flag: web_gemma3.py
        image_token = facts["image_token_id"]
        embedding = family.embedding_fn(model, image_token_id=image_token)
        vision, embed = flagged(vision, IMAGE_FLAG), flagged(_text_embeddings(embedding, spec.vocab_size, hidden), 0.0)
        decoder = flagged_decoder(spec, max_length, image_token)
        decoder_specs = flagged_decoder_inputs(spec, max_length)
    else:
        image_token = spec.vocab_size  # one past the vocabulary: see the module doc
        embed = _text_embeddings(family.embedding_fn(model), spec.vocab_size, hidden)
        decoder, decoder_specs = decoder_step(spec, "concat", max_length), decoder_inputs(spec, "concat", max_length)
    keywords = dict(target=target, opset=opset)
    with staging_folder(out, marker=REPORT_FILE) as staging:
        (staging / ONNX_FOLDER).mkdir()
        files = {}
        reporter.stage(f"{ONNX_FOLDER}/{VISION_ENCODER}.onnx")
        images = jax.export.symbolic_shape("num_images")[0]
        files.update(write_graph(vision, [jax.ShapeDtypeStruct((images, 3, size, size), jnp.float32)], staging,
                                 VISION_ENCODER, ["pixel_values"], ["image_features"], dtypes=precisions["vision"],
                                 int64_inputs=(), **keywords))
        reporter.stage(f"{ONNX_FOLDER}/{EMBED_TOKENS}.onnx")
        batch, seq = jax.export.symbolic_shape(f"{BATCH}, {SEQUENCE}")
        files.update(write_graph(embed, [jax.ShapeDtypeStruct((batch, seq), jnp.int32)], staging, EMBED_TOKENS,
                                 ["input_ids"], ["inputs_embeds"], dtypes=precisions["embedding"],
                                 int64_inputs=("input_ids",), **keywords))
        reporter.stage(f"{ONNX_FOLDER}/{DECODER_MERGED}.onnx")
        in_names, out_names = ["inputs_embeds", "attention_mask"], ["logits"]
        for i in range(spec.num_layers):
            in_names += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
            out_names += [f"present.{i}.key", f"present.{i}.value"]
        files.update(write_graph(decoder, decoder_specs, staging, DECODER_MERGED, in_names, out_names,
                                 dtypes=precisions["decoder"], int64_inputs=("attention_mask",), **keywords))
        build = gemma3_config if kind == "gemma3" else _paligemma_config
        write_json(staging / CONFIG_FILE, build(spec, facts, image_token, max_length, transformers_js_config(files)))
        write_json(staging / GENERATION_CONFIG_FILE, build_generation_config(spec))
        if "preprocessing" in facts:
            write_json(staging / PREPROCESSOR_FILE, _image_processor(facts, kind))
        if tok_source is not None:
            reporter.stage("tokenizer")
            write_tokenizer_files(tok_source, staging, max_positions=max_length)
            if kind == "paligemma":
                _add_image_token(staging / "tokenizer.json", image_token)
        write_json(staging / REPORT_FILE, {"max_length": max_length, "target": target, "image_token_index": image_token,
                                           "image_tokens": tokens, REPORT_KEY: files})
    return out


def _channels_first_vision(vision: Any, tokens: int) -> Any:
    """The library's vision tower (channels last) on transformers.js' channels-first pixels, its
    features per image: ``(images, 3, size, size) -> (images, tokens, hidden)``."""

    def run(pixel_values: Any) -> Any:
        features = vision(jnp.transpose(pixel_values, (0, 2, 3, 1)))
        return features.reshape(pixel_values.shape[0], tokens, features.shape[-1])

    return run


def _text_embeddings(embedding: Any, vocab_size: int, hidden: int) -> Any:
    """``input_ids -> inputs_embeds``: the front-end's embedding graph with no image features (every
    slot a token's scaled embedding); ids past the vocabulary (the image token) embed as zeros."""

    def run(input_ids: Any) -> Any:
        outside = input_ids >= vocab_size
        embeds = embedding(jnp.where(outside, 0, input_ids), jnp.zeros((0, hidden), jnp.float32))
        return jnp.where(outside[..., None], jnp.zeros((), embeds.dtype), embeds)

    return run


def _paligemma_config(spec: DecoderSpec, facts: dict[str, Any], image_token: int, max_length: int,
                      transformers_js: dict[str, Any]) -> dict[str, Any]:
    """``config.json``: transformers.js reads the decoder's sizes from ``text_config`` (under Gemma's
    names: its layer count names the cache inputs it feeds) and the image token id."""
    special = {k: v for k, v in build_generation_config(spec).items() if k.endswith("_token_id")}
    return {
        "architectures": ["PaliGemmaForConditionalGeneration"],
        "model_type": "paligemma",
        "image_token_index": image_token,
        "text_config": {"model_type": "gemma", "num_hidden_layers": spec.num_layers,
                        "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
                        "head_dim": spec.head_size, "hidden_size": spec.hidden_size,
                        "vocab_size": spec.vocab_size + 1, "max_position_embeddings": max_length},
        "vision_config": {"image_size": facts["image_size"], "num_image_tokens": facts["image_tokens"]},
        "hidden_size": spec.hidden_size,
        "vocab_size": spec.vocab_size + 1,
        **special,
        "use_cache": True,
        "transformers.js_config": transformers_js,
    }


def _image_processor(facts: dict[str, Any], kind: str = "paligemma") -> dict[str, Any]:
    """``preprocessor_config.json`` for transformers.js' image processor: resize to the tower's size,
    then the library's ``x * scale + offset`` written as ``(x / 255 - mean) / std``; ``image_seq_length``
    is what its ``PaliGemmaProcessor`` expands ``<image>`` to (its ``Gemma3Processor``: the image token)."""
    pre, size = facts["preprocessing"], facts["image_size"]
    std = [1.0 / (255.0 * s) for s in pre["scale"]]
    return {
        "image_processor_type": "Gemma3ImageProcessor" if kind == "gemma3" else "SiglipImageProcessor",
        "processor_class": "Gemma3Processor" if kind == "gemma3" else "PaliGemmaProcessor",
        "do_convert_rgb": True,
        "do_resize": True,
        "size": {"height": size, "width": size},
        "resample": RESAMPLE[pre["interpolation"]],
        "do_rescale": True,
        "rescale_factor": 1.0 / 255.0,
        "do_normalize": True,
        "image_mean": [-o * d for o, d in zip(pre["offset"], std)],
        "image_std": std,
        "image_seq_length": facts["image_tokens"],
    }


def _add_image_token(path: pathlib.Path, image_token: int) -> None:
    """``<image>`` as a special token of id ``image_token`` in ``tokenizer.json`` (transformers.js'
    ``PaliGemmaProcessor`` writes it before the prompt), unless the tokenizer has it already."""
    if not path.is_file():
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    added = data.setdefault("added_tokens", [])
    if any(t.get("content") == "<image>" for t in added):
        return
    added.append({"id": image_token, "content": "<image>", "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True})
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


# -- speech to text (Whisper) ---------------------------------------------------------------------


def write_web_speech_to_text(model: Any, parts: Any, facts: dict[str, Any], tokens: dict[str, Any],
                             out: pathlib.Path, *, precisions: dict[str, Any], max_length: int, target: str, opset: int,
                             tok_source: Any, reporter: Any) -> pathlib.Path:
    """The transformers.js folder of a Whisper model (the parts ``parts`` finds in ``model``); ``precisions``:
    the dtypes per genai section (``web_dtypes.web_precisions``)."""
    check_architecture(parts, ("whisper",), model)
    layers, heads, head_size, hidden = facts["num_layers"], facts["num_heads"], facts["head_size"], facts["hidden_size"]
    keywords = dict(target=target, opset=opset)
    with staging_folder(out, marker=REPORT_FILE) as staging:
        (staging / ONNX_FOLDER).mkdir()
        files = {}
        reporter.stage(f"{ONNX_FOLDER}/{ENCODER_MODEL}.onnx")
        batch = jax.export.symbolic_shape(BATCH)[0]
        encoder = parts.encoder_fn(model)
        files.update(write_graph(
            lambda features: encoder(features)[0], [jax.ShapeDtypeStruct((batch, facts["num_mels"], facts["frames"]),
                                                                         jnp.float32)],
            staging, ENCODER_MODEL, ["input_features"], ["last_hidden_state"], dtypes=precisions["encoder"],
            int64_inputs=(), **keywords))
        reporter.stage(f"{ONNX_FOLDER}/{DECODER_MERGED}.onnx")
        batch, seq, past, length = jax.export.symbolic_shape(
            f"{BATCH}, {SEQUENCE}, {PAST}, {ENCODER_LENGTH}", constraints=(f"{PAST} + {SEQUENCE} <= {max_length}",))
        own = jax.ShapeDtypeStruct((batch, heads, past, head_size), jnp.float32)
        cross = jax.ShapeDtypeStruct((batch, heads, length, head_size), jnp.float32)
        past, present = merged_cache_names(layers)
        in_names, out_names = ["input_ids", "encoder_hidden_states", *past], ["logits", *present]
        inputs = [jax.ShapeDtypeStruct((batch, seq), jnp.int32), jax.ShapeDtypeStruct((batch, length, hidden),
                                                                                     jnp.float32),
                  *[own, own, cross, cross] * layers, jax.ShapeDtypeStruct((1,), jnp.bool_)]
        files.update(write_graph(
            _merged_whisper_decoder(parts.decoder_fn(model), parts.cross_fn(model), layers), inputs, staging,
            DECODER_MERGED, [*in_names, "use_cache_branch"], out_names, dtypes=precisions["decoder"],
            int64_inputs=("input_ids",), **keywords))
        finish_speech_folder(staging, files, _whisper_config(facts, tokens, max_length, transformers_js_config(files)),
                             _whisper_generation_config(tokens, max_length), _feature_extractor(facts),
                             tok_source=tok_source, max_length=max_length, target=target, reporter=reporter)
    return out


def merged_cache_names(layers: int) -> tuple[list[str], list[str]]:
    """optimum's merged decoder's cache inputs and outputs, per layer ``decoder.key, decoder.value,
    encoder.key, encoder.value`` (the names transformers.js feeds and reads)."""
    names = [f"{i}.{part}" for i in range(layers) for part in ("decoder.key", "decoder.value", "encoder.key",
                                                                  "encoder.value")]
    return [f"past_key_values.{n}" for n in names], [f"present.{n}" for n in names]


def finish_speech_folder(staging: pathlib.Path, files: dict[str, Any], config: dict[str, Any],
                         generation_config: dict[str, Any], feature_extractor: dict[str, Any], *, tok_source: Any,
                         max_length: int, target: str, reporter: Any) -> None:
    """What a speech folder holds beside its graphs: ``config.json``, ``generation_config.json``, the
    feature extractor's ``preprocessor_config.json``, the tokenizer files and the report of ``files``."""
    write_json(staging / CONFIG_FILE, config)
    write_json(staging / GENERATION_CONFIG_FILE, generation_config)
    write_json(staging / PREPROCESSOR_FILE, feature_extractor)
    reporter.stage("tokenizer")
    write_tokenizer_files(tok_source, staging, max_positions=max_length)
    write_json(staging / REPORT_FILE, {"max_length": max_length, "target": target, REPORT_KEY: files})


def _merged_whisper_decoder(decoder: Any, cross_fn: Any, layers: int) -> Any:
    """optimum's merged decoder around the front-end's: ``(input_ids, encoder_hidden_states, *past,
    use_cache_branch) -> (logits, *present)``, past/present per layer as ``decoder.key, decoder.value,
    encoder.key, encoder.value``. The cross keys and values are the past ones on the cache branch and
    the encoder output's projections on the first step (an ``If``: the projection runs once)."""

    def run(input_ids: Any, encoder_hidden_states: Any, *rest: Any) -> tuple[Any, ...]:
        *past, use_cache_branch = rest
        own = [past[4 * i + j] for i in range(layers) for j in (0, 1)]
        cached = tuple(past[4 * i + j] for i in range(layers) for j in (2, 3))
        cross = jax.lax.cond(use_cache_branch.reshape(()), lambda: cached,
                             lambda: tuple(cross_fn(encoder_hidden_states)))
        logits, *present = decoder(input_ids, *own, *cross)
        out = [logits]
        for i in range(layers):
            out += [present[2 * i], present[2 * i + 1], cross[2 * i], cross[2 * i + 1]]
        return tuple(out)

    return run


def _whisper_config(facts: dict[str, Any], tokens: dict[str, Any], max_length: int,
                    transformers_js: dict[str, Any]) -> dict[str, Any]:
    """``config.json`` under Whisper's names (transformers.js reads the decoder's layer and head counts
    from them: they name the cache inputs it feeds)."""
    layers, heads = facts["num_layers"], facts["num_heads"]
    return {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "is_encoder_decoder": True,
        "d_model": facts["hidden_size"],
        "encoder_layers": layers, "decoder_layers": layers,
        "encoder_attention_heads": heads, "decoder_attention_heads": heads,
        "num_mel_bins": facts["num_mels"],
        "max_source_positions": facts["encoder_length"],
        "max_target_positions": facts["max_decoder_length"],
        **speech_config_tail(facts, tokens, max_length, transformers_js),
    }


def speech_config_tail(facts: dict[str, Any], tokens: dict[str, Any], max_length: int,
                       transformers_js: dict[str, Any]) -> dict[str, Any]:
    """What every speech ``config.json`` ends with: the vocabulary, the tokenizer's start, end and pad
    ids, the length and transformers.js' dtype map."""
    return {"vocab_size": facts["vocab_size"],
            "bos_token_id": tokens["start"], "decoder_start_token_id": tokens["start"],
            "eos_token_id": tokens["end"], "pad_token_id": tokens["pad"],
            "max_length": max_length, "use_cache": True, "transformers.js_config": transformers_js}


def _whisper_generation_config(tokens: dict[str, Any], max_length: int) -> dict[str, Any]:
    """``generation_config.json``: the start, end and prompt tokens transformers.js' Whisper builds its
    prompt from (``<|startoftranscript|>``, [language, task], ``<|notimestamps|>``), greedy decoding."""
    languages = tokens["languages"]
    config: dict[str, Any] = {
        "decoder_start_token_id": tokens["start"], "bos_token_id": tokens["start"], "eos_token_id": tokens["end"],
        "pad_token_id": tokens["pad"], "no_timestamps_token_id": tokens["no_timestamps"],
        "max_length": max_length, "do_sample": False, "is_multilingual": bool(languages),
        "task_to_id": {"transcribe": tokens["transcribe"], "translate": tokens["translate"]},
    }
    if languages:
        config["lang_to_id"] = dict(languages)
    return config


def _feature_extractor(facts: dict[str, Any]) -> dict[str, Any]:
    """``preprocessor_config.json`` for transformers.js' ``WhisperFeatureExtractor``: Whisper's log-mel
    features (16 kHz, 25 ms windows every 10 ms, padded to 30 s: the 3000 frames the encoder takes)."""
    return {
        "feature_extractor_type": "WhisperFeatureExtractor",
        "processor_class": "WhisperProcessor",
        "feature_size": facts["num_mels"],
        "sampling_rate": 16000,
        "hop_length": 160,
        "n_fft": 400,
        "chunk_length": 30,
        "n_samples": 480000,
        "nb_max_frames": facts["frames"],
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": False,
    }
