"""``export_speech_to_text``: a Whisper speech model → an onnxruntime-genai ``whisper`` folder.

onnxruntime-genai 0.18 runs Whisper as two sessions (``WhisperModel``):

- ``encoder.onnx``: ``audio_features`` ``(batch, mels, 3000)`` → ``encoder_hidden_states`` and, per
  decoder layer, the cross-attention keys and values (``present_key_cross_%d`` /
  ``present_value_cross_%d``), run once before the first decoder step; genai checks the 3000 frames;
- ``decoder.onnx``: ``input_ids`` + self-attention past (``past_key_self_%d`` …) + the cross
  caches (``past_key_cross_%d`` …) → ``logits`` + self-attention present; no attention mask, no
  positions: every row holds the same prompt, and positions follow the past's length.

named in ``genai_config.json``'s ``model.encoder`` / ``model.decoder`` under the model type
``"whisper"``. The audio goes in as the library's log-mel features (its audio converter's output, mels
last, transposed to genai's mels-first when fed): ``og.NamedTensors`` with ``audio_features`` through
``generator.set_inputs``, the prompt tokens through ``append_tokens``, as :func:`transcribe` does.
``speech.json`` documents those inputs and the prompt tokens.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx import progress as progress_report
from jax2onnx.targets import find_target

from ..errors import OptionError, UnsupportedModelError
from ..export import BATCH, PAST, SEQUENCE, check_options
from ..frontends import speech_to_text
from ..genai_config import FILE as GENAI_CONFIG_FILE
from ..genai_config import SEARCH_DEFAULTS, check_search
from ..genai_targets import GENAI, TRANSFORMERS_JS, genai_targets, web_targets
from ..staging import staging as staging_folder
from ..tokenizers import resolve as resolve_tokenizer
from ..tokenizers import write as write_tokenizer
from ..web.dtypes import check_web_options
from .export import write_graph
from .moonshine_genai import audio_features as moonshine_audio_features
from .moonshine_genai import graphs as moonshine_graphs
from .moonshine_web import write_web_moonshine
from .report import REPORT_KEY, check_precisions, submodel_report
from .web import write_web_speech_to_text
from .web_dtypes import web_precisions

ENCODER_FILE, DECODER_FILE = "encoder.onnx", "decoder.onnx"
#: what the folder's inputs are and how to feed them (read by :func:`transcribe`)
SPEECH_FILE = "speech.json"
AUDIO_FEATURES, ENCODER_STATES = "audio_features", "encoder_hidden_states"
SELF_PAST, SELF_PRESENT = ("past_key_self_%d", "past_value_self_%d"), ("present_key_self_%d", "present_value_self_%d")
CROSS_PAST, CROSS_PRESENT = ("past_key_cross_%d", "past_value_cross_%d"), ("present_key_cross_%d", "present_value_cross_%d")
#: the folder's graphs by genai_config.json's section (precision=, the report)
SUBMODELS = {"encoder": ENCODER_FILE, "decoder": DECODER_FILE}
#: the transformers.js folder's writer by the architecture the front-end's parts name (``TRANSFORMERS_JS_MODEL_TYPE``)
WEB_WRITERS = {"whisper": write_web_speech_to_text, "moonshine": write_web_moonshine}


def export_speech_to_text(
    model: Any,
    out_dir: str | os.PathLike[str],
    *,
    tokenizer: Any,
    max_length: int | None = None,
    precision: Any = "float32",
    target: str | None = None,
    opset: int = 23,
    external_data: bool | None = None,
    search: dict[str, Any] | None = None,
    progress: bool | None = None,
) -> pathlib.Path:
    """Export a speech-to-text model as an onnxruntime-genai ``whisper`` folder (or, with ``target="web"``,
    a transformers.js folder) and return its path.

    Args:
        model: a KerasHub ``WhisperBackbone`` under the JAX backend (``max_encoder_sequence_length=3000``,
            the frames genai's Whisper takes), or a KerasHub ``MoonshineAudioToText`` / ``MoonshineBackbone``
            (raw audio in; for genai as a ``whisper`` folder whose ``audio_features`` are the audio in rows
            of 3000 samples: :mod:`jax2onnx_llm.multimodal.moonshine_genai`; for transformers.js:
            :mod:`jax2onnx_llm.multimodal.moonshine_web`).
        out_dir: the folder to write (``encoder.onnx``, ``decoder.onnx``, ``genai_config.json``,
            ``speech.json``, tokenizer files); replaced as a whole, as by :func:`jax2onnx_llm.export_causal_lm`.
        tokenizer: the model's ``WhisperTokenizer`` (``MoonshineTokenizer``): its start, end and prompt
            tokens go into the config and ``speech.json``, its vocabulary into ``tokenizer.json``.
        max_length: the most decoder tokens (prompt + generated); default the backbone's
            ``max_decoder_sequence_length``, which is also the most it encodes.
        precision: one precision for both graphs, or one per graph, ``{"encoder": "float16",
            "decoder": "int4"}`` (a graph not named stays float32); inputs, outputs and caches stay
            float32. ``speech.json``'s ``models`` reports each graph's precision, bytes and fused ops.
            For a transformers.js folder each value may also be ``"q4f16"`` or a tuple of dtypes, one
            file each (:mod:`jax2onnx_llm.multimodal.web_dtypes`; the report in ``jax2onnx_web.json``).
        target: as for :func:`jax2onnx_llm.export_causal_lm`: a genai target (default) writes the genai
            folder, ``"web"`` the folder transformers.js loads (``encoder_model.onnx``,
            ``decoder_model_merged.onnx``: :mod:`jax2onnx_llm.multimodal.web`).
        opset, external_data, search, progress: as for :func:`jax2onnx_llm.export_causal_lm`.

    Returns:
        ``out_dir`` as a :class:`pathlib.Path`.
    """
    with progress_report.reporting(progress) as reporter:
        reporter.stage("check")
        parts = speech_to_text(model)  # the front-end's parts of the model (frontends/<name>/)
        if parts is None:
            raise UnsupportedModelError(
                f"export_speech_to_text takes a speech-to-text model a front-end claims (KerasHub WhisperBackbone, "
                f"MoonshineAudioToText or MoonshineBackbone; JAX backend), not {type(model).__name__}; export a causal LM "
                "with export_causal_lm")
        parts.check(model)
        facts = parts.facts(model)
        limit = facts["max_decoder_length"]
        max_length = limit if max_length is None else max_length
        target = check_options(max_length, "float32", "concat", target)
        web = find_target(target).can(TRANSFORMERS_JS)  # transformers.js' folder instead (web.py)
        if web:  # dtypes per sub-model, one file each (web_dtypes.py)
            check_web_options("concat", search, external_data)
            dtypes = web_precisions(precision, SUBMODELS)
        elif not find_target(target).can(GENAI):
            raise OptionError(f"target={target!r}: a speech folder is written for onnxruntime-genai (target=None or "
                              f"{[t.name for t in genai_targets()]}) or transformers.js ({[t.name for t in web_targets()]})")
        else:
            precisions = check_precisions(precision, SUBMODELS)
        if max_length > limit:
            raise OptionError(f"max_length={max_length} is beyond the {limit} decoder positions this model encodes; "
                              f"pass max_length <= {limit}")
        check_search(search, max_length=max_length)
        tokens = parts.tokens(tokenizer)
        tok_source = resolve_tokenizer(tokenizer)
        if web:
            writer = WEB_WRITERS.get(getattr(parts, "TRANSFORMERS_JS_MODEL_TYPE", None), write_web_speech_to_text)
            return writer(model, parts, facts, tokens, pathlib.Path(out_dir), precisions=dtypes, max_length=max_length,
                          target=target, opset=opset, tok_source=tok_source, reporter=reporter)
        keywords = dict(opset=opset, target=target, external_data=external_data)
        out = pathlib.Path(out_dir)
        layers, heads, size = facts["num_layers"], facts["num_heads"], facts["head_size"]
        encoder, features, decoder, (cross_heads, frames), description = _genai_graphs(model, parts, facts, tokens)
        with staging_folder(out) as staging:
            reporter.stage(ENCODER_FILE)
            write_graph(encoder, features, staging / ENCODER_FILE, [AUDIO_FEATURES],
                        [ENCODER_STATES, *_per_layer(CROSS_PRESENT, layers)], precision=precisions["encoder"],
                        **keywords)
            reporter.stage(DECODER_FILE)
            batch, seq, past = jax.export.symbolic_shape(
                f"{BATCH}, {SEQUENCE}, {PAST}", constraints=(f"{PAST} + {SEQUENCE} <= {max_length}",))
            own = jax.ShapeDtypeStruct((batch, heads, past, size), jnp.float32)
            cross = jax.ShapeDtypeStruct((batch, cross_heads, frames, size), jnp.float32)
            inputs = [jax.ShapeDtypeStruct((batch, seq), jnp.int32), *[own] * (2 * layers), *[cross] * (2 * layers)]
            write_graph(decoder, inputs, staging / DECODER_FILE,
                        ["input_ids", *_per_layer(SELF_PAST, layers), *_per_layer(CROSS_PAST, layers)],
                        ["logits", *_per_layer(SELF_PRESENT, layers)], precision=precisions["decoder"], **keywords)
            reporter.stage(GENAI_CONFIG_FILE)
            config = genai_config(facts, tokens, max_length=max_length, search=search, cross_heads=cross_heads)
            (staging / GENAI_CONFIG_FILE).write_text(json.dumps(config, indent=4) + "\n")
            description[REPORT_KEY] = {name: submodel_report(staging / filename, precisions[name])
                                       for name, filename in SUBMODELS.items()}
            (staging / SPEECH_FILE).write_text(json.dumps(description, indent=4) + "\n")
            reporter.stage("tokenizer")
            write_tokenizer(tok_source, staging)
        return out


def _genai_graphs(model: Any, parts: Any, facts: dict[str, Any], tokens: dict[str, Any]) -> tuple[Any, ...]:
    """(encoder, its input specs, decoder, the cross caches' (heads, frames), ``speech.json``) of the genai
    folder: Whisper's as the front-end gives them; Moonshine's (raw audio) fitted to genai's Whisper
    state by :mod:`.moonshine_genai`."""
    if getattr(parts, "TRANSFORMERS_JS_MODEL_TYPE", None) == "moonshine":
        return moonshine_graphs(model, parts, facts, tokens)
    batch = jax.export.symbolic_shape(BATCH)[0]
    features = jax.ShapeDtypeStruct((batch, facts["num_mels"], facts["frames"]), jnp.float32)
    return (parts.encoder_fn(model), [features], parts.decoder_fn(model), (facts["num_heads"], facts["encoder_length"]),
            speech_description(facts, tokens))


def _per_layer(templates: tuple[str, str], layers: int) -> list[str]:
    return [t % i for i in range(layers) for t in templates]


def genai_config(facts: dict[str, Any], tokens: dict[str, Any], *, max_length: int,
                 search: dict[str, Any] | None, cross_heads: int | None = None) -> dict[str, Any]:
    """``genai_config.json`` for genai's ``whisper`` model: the encoder (with cross caches) and the decoder.
    genai sizes the cross caches by the decoder's ``num_attention_heads`` and the self caches by its
    ``num_key_value_heads``: ``cross_heads`` (default the heads) is the former."""
    sizes = {"head_size": facts["head_size"], "hidden_size": facts["hidden_size"],
             "num_attention_heads": facts["num_heads"], "num_hidden_layers": facts["num_layers"]}
    session = {"log_id": "onnxruntime-genai", "provider_options": []}
    return {
        "model": {
            "type": "whisper",
            "bos_token_id": tokens["start"],
            "decoder_start_token_id": tokens["start"],
            "eos_token_id": tokens["end"],
            "pad_token_id": tokens["pad"],
            "context_length": max_length,
            "vocab_size": facts["vocab_size"],
            "encoder": {
                "session_options": session, "filename": ENCODER_FILE, **sizes,
                "num_key_value_heads": facts["num_heads"],
                "inputs": {"audio_features": AUDIO_FEATURES},
                "outputs": {"encoder_hidden_states": ENCODER_STATES, "cross_present_key_names": CROSS_PRESENT[0],
                            "cross_present_value_names": CROSS_PRESENT[1]},
            },
            "decoder": {
                "session_options": session, "filename": DECODER_FILE,
                **sizes, "num_attention_heads": cross_heads or facts["num_heads"],
                "num_key_value_heads": facts["num_heads"],
                "inputs": {"input_ids": "input_ids", "past_key_names": SELF_PAST[0], "past_value_names": SELF_PAST[1],
                           "cross_past_key_names": CROSS_PAST[0], "cross_past_value_names": CROSS_PAST[1]},
                "outputs": {"logits": "logits", "present_key_names": SELF_PRESENT[0],
                            "present_value_names": SELF_PRESENT[1]},
            },
        },
        "search": dict(sorted({**SEARCH_DEFAULTS, "max_length": max_length, "past_present_share_buffer": False,
                               **check_search(search, max_length=max_length)}.items())),
    }


def speech_description(facts: dict[str, Any], tokens: dict[str, Any]) -> dict[str, Any]:
    """``speech.json``: what a generator is given, as :func:`transcribe` feeds it."""
    return {
        "family": facts["family"],
        "num_mels": facts["num_mels"],
        "frames": facts["frames"],
        "inputs": {
            AUDIO_FEATURES: f"float32 [batch, {facts['num_mels']}, {facts['frames']}], the library's log-mel features "
                            "(its audio converter's output, (batch, frames, mels), transposed to mels first)",
            "prompt": "the decoder's first tokens, the same for every row: start of transcript, [language], task, "
                      "[<|notimestamps|>]",
        },
        "tokens": tokens,
    }


def silence(folder: str | pathlib.Path) -> np.ndarray:
    """Features ``(1, frames, mels)`` of the log-mel floor (a smoke test's clip); for a raw-audio folder
    (Moonshine) one row of a quiet constant ``(1, 3000)`` (not 0.0: that is the padding value)."""
    described = json.loads((pathlib.Path(folder) / SPEECH_FILE).read_text())
    if described.get("input") == "audio":
        return np.full((1, int(described["row_samples"])), 1e-3, np.float32)
    return np.full((1, int(described["frames"]), int(described["num_mels"])), -1.5, np.float32)


def transcribe(folder: str | pathlib.Path, features: Any, max_new_tokens: int, prompt: list[int] | None = None) -> list[list[int]]:
    """The tokens onnxruntime-genai generates for each clip (greedy, at most ``max_new_tokens``, each
    row up to its end token) from the library's log-mel ``features`` ``(batch, frames, mels)`` after
    ``prompt`` (default the folder's: start of transcript, transcribe, no timestamps). A Moonshine
    folder takes the library's audio ``(batch, samples)`` instead, samples a multiple of 3000
    (:func:`jax2onnx_llm.multimodal.moonshine_genai.audio_features`), and its start token as the prompt."""
    from .run import require_genai

    og = require_genai()
    folder = pathlib.Path(folder)
    described = json.loads((folder / SPEECH_FILE).read_text())
    if described.get("input") == "audio":  # Moonshine: raw audio in rows of 3000 samples
        features = moonshine_audio_features(described, features)
    else:
        mels, frames = int(described["num_mels"]), int(described["frames"])
        features = np.asarray(features, np.float32)
        if features.ndim != 3 or features.shape[1:] != (frames, mels):
            raise OptionError(f"features of shape {features.shape}: give the library's log-mel features as (batch, "
                              f"{frames}, {mels}) (its audio converter pads or trims every clip to {frames} frames)")
        features = np.ascontiguousarray(np.swapaxes(features, 1, 2))  # genai's Whisper takes mels first
    prompt = list(described["tokens"]["prompt"]) if prompt is None else [int(t) for t in prompt]
    batch = features.shape[0]
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(prompt) + max_new_tokens, batch_size=batch)
    generator = og.Generator(model, params)
    inputs = og.NamedTensors()
    inputs[AUDIO_FEATURES] = features
    generator.set_inputs(inputs)
    generator.append_tokens(np.asarray([prompt] * batch, np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    end = int(described["tokens"]["end"])
    rows = []
    for b in range(batch):
        tokens = [int(t) for t in generator.get_sequence(b)[len(prompt):]]
        rows.append(tokens[: tokens.index(end) + 1] if end in tokens else tokens)
    return rows
