"""``export_multimodal_lm``: a vision-language model → an onnxruntime-genai multimodal folder.

onnxruntime-genai 0.18 runs a vision-language model as three sessions (``MultiModalLanguageModel``):

- ``vision.onnx``: ``pixel_values`` → ``image_features`` (run once, at the prompt, when the inputs
  hold ``num_image_tokens``);
- ``embedding.onnx``: ``input_ids`` + ``image_features`` → ``inputs_embeds`` (every step; after the
  prompt genai hands an empty ``image_features``);
- ``decoder.onnx``: ``inputs_embeds`` + ``attention_mask`` + past keys/values → ``logits`` + present;

named in ``genai_config.json``'s ``model.vision`` / ``model.embedding`` / ``model.decoder``. PaliGemma
has no model type of its own there; the folder uses Gemma 3 vision's (``"gemma3"``), whose pipeline
is the plain one above. Its image *processor* (``MultiModalProcessor``) writes Gemma 3's prompt
(``<start_of_image>`` expanded to 256 soft tokens), which is not PaliGemma's (image first, no marker):
prompts are fed as ``og.NamedTensors`` (``input_ids``, ``pixel_values``, ``num_image_tokens``) through
``generator.set_inputs``, as :func:`jax2onnx_llm.multimodal.generate` does. ``multimodal.json``
documents those inputs (layout, image size, tokens per image, the library's pixel preprocessing).
With the library's image converter, ``processor_config.json`` holds its preprocessing as genai's
image processor's transforms, so that processor makes ``pixel_values`` from an image file
(:func:`jax2onnx_llm.multimodal.pixel_values_from_file`).

Each graph is exported by core's stages (:class:`jax2onnx.ExportProgram`) with symbolic batch,
sequence, past and image counts; the folder is staged and swapped in whole (``staging.py``).
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
from jax2onnx import ExportProgram
from jax2onnx import progress as progress_report
from jax2onnx.targets import find_target, get_target

from ..errors import OptionError, UnsupportedModelError
from ..export import BATCH, SEQUENCE, check_options, check_spec, io_names
from ..frontends import vision_language
from ..genai_config import FILE as GENAI_CONFIG_FILE
from ..genai_config import build as build_genai_config
from ..genai_config import check_search
from ..genai_targets import TRANSFORMERS_JS
from ..norm_fusion import RmsNormFusionPass
from ..spec import DecoderSpec
from ..special_tokens import resolve as resolve_special_tokens
from ..staging import staging as staging_folder
from ..tokenizers import resolve as resolve_tokenizer
from ..tokenizers import write as write_tokenizer
from ..web.dtypes import check_web_options
from .decoder import decoder_inputs, decoder_step
from .report import REPORT_KEY, check_precisions, submodel_report
from .web import write_web_vision_language
from .web_dtypes import web_precisions

VISION_FILE, EMBEDDING_FILE, DECODER_FILE = "vision.onnx", "embedding.onnx", "decoder.onnx"
#: what the folder's inputs are and how to feed them (read by :func:`generate`)
INPUTS_FILE = "multimodal.json"
#: genai's image processor's transforms (``model.vision.config_filename``'s default)
PROCESSOR_FILE = "processor_config.json"
PIXEL_VALUES, IMAGE_FEATURES, NUM_IMAGE_TOKENS = "pixel_values", "image_features", "num_image_tokens"
#: the embedding graph's per-layer inputs, read by the decoder graph (genai's gemma4 type)
PER_LAYER_INPUTS = "per_layer_inputs"
IMAGES, IMAGE_ROWS = "num_images", "num_image_features"
#: the prompt layout (KerasHub PaliGemma's: the image's embeddings first)
IMAGE_SLOT_NOTE = ("the first image_tokens ids of a prompt are the image's slots (their ids are not read: "
                   "the embedding graph puts the image features there), the text follows")
#: the prompt layout of a family whose image comes first (PaliGemma); Gemma 3's is "placeholders" (gemma3_vision.py)
PREFIX_LAYOUT = "prefix"
PLACEHOLDER_NOTE = ("each image is {tokens} image_token_id placeholders in the prompt, as the library's preprocessor "
                    "writes them (Gemma 3: <start_of_image>, the placeholders, <end_of_image>); the embedding graph puts "
                    "the images' features at the placeholders in order, row after row")
#: the folder's graphs by genai_config.json's section (precision=, the report)
SUBMODELS = {"vision": VISION_FILE, "embedding": EMBEDDING_FILE, "decoder": DECODER_FILE}

def export_multimodal_lm(
    model: Any,
    out_dir: str | os.PathLike[str],
    *,
    max_length: int,
    precision: Any = "float32",
    cache: str = "concat",
    target: str | None = None,
    tokenizer: Any = None,
    opset: int = 23,
    external_data: bool | None = None,
    search: dict[str, Any] | None = None,
    bos_token_id: int | None = None,
    eos_token_id: int | list[int] | None = None,
    pad_token_id: int | None = None,
    image_converter: Any = None,
    image_token_id: int | None = None,
    progress: bool | None = None,
) -> pathlib.Path:
    """Export a vision-language model as an onnxruntime-genai multimodal folder and return its path.

    Args:
        model: a KerasHub ``PaliGemmaCausalLM``, or a ``Gemma3CausalLM`` or ``Gemma4CausalLM`` whose
            backbone has a ``vision_encoder``, under the JAX backend.
        out_dir: the folder to write (``vision.onnx``, ``embedding.onnx``, ``decoder.onnx``,
            ``genai_config.json``, ``multimodal.json``, tokenizer files); replaced as a whole, as by
            :func:`jax2onnx_llm.export_causal_lm`.
        max_length: the most positions (image tokens + prompt + generated) a sequence may reach.
        precision: one precision for all three graphs (as :func:`jax2onnx_llm.export_causal_lm`'s:
            ``"float32"``, ``"float16"``, ``"int4"``, a ``jax2onnx.Precision``, ...), or one per graph,
            ``{"vision": "float16", "embedding": "float16", "decoder": "int4"}`` (a graph not named
            stays float32). Inputs and outputs stay float32, so the graphs chain as they do in float32.
            For a transformers.js folder each value may also be ``"q4f16"`` or a tuple of dtypes, one
            file each (``decoder_model_merged_q4.onnx``, ...: :mod:`jax2onnx_llm.multimodal.web_dtypes`).
        cache, target, tokenizer, opset, external_data, search, bos_token_id, eos_token_id,
            pad_token_id, progress: as for :func:`jax2onnx_llm.export_causal_lm` (``target``: the
            decoder runs the library's attention math on either genai target; ``"web"`` writes the
            folder transformers.js loads instead, :mod:`jax2onnx_llm.multimodal.web`; ``external_data``
            applies to each graph).
        image_converter: the library's image converter (a KerasHub ``ImageConverter``); ``None``: the
            model's preprocessor's, if any. With one, the folder holds ``processor_config.json``, so
            genai's image processor makes ``pixel_values`` from an image file
            (:func:`jax2onnx_llm.multimodal.pixel_values_from_file`; the same pixels as the library's
            for an image already at the tower's size, see the guide); without, pixels are fed.
        image_token_id: the image placeholder's id (Gemma 3: the tokenizer's ``<img>``), where the
            model carries no preprocessor naming it; PaliGemma has none (its image comes first).

    Returns:
        ``out_dir`` as a :class:`pathlib.Path`.
    """
    with progress_report.reporting(progress) as reporter:
        reporter.stage("check")
        family = vision_language(model)  # the front-end's parts of the model (frontends/<name>/)
        if family is None:
            raise UnsupportedModelError(
                f"export_multimodal_lm takes a vision-language model a front-end claims (KerasHub PaliGemmaCausalLM, "
                f"Gemma3CausalLM with a vision_encoder; JAX backend), not {type(model).__name__}; "
                "export a text-only causal LM with export_causal_lm")
        family.check(model)
        target = check_options(max_length, "float32", cache, target)
        web = find_target(target).can(TRANSFORMERS_JS)  # transformers.js' folder instead (web.py)
        if web:  # dtypes per sub-model, one file each (web_dtypes.py)
            check_web_options(cache, search, external_data)
            dtypes = web_precisions(precision, SUBMODELS)
        else:
            precisions = check_precisions(precision, SUBMODELS)
        check_search(search, max_length=max_length)
        options = family_options(family, model, image_token_id)
        spec = family.decoder_spec(model, **options)
        tokenizer = spec.tokenizer if tokenizer is None else tokenizer
        tok_source = resolve_tokenizer(tokenizer) if tokenizer is not None and tokenizer is not False else None
        given = {k: v for k, v in (("bos_token_id", bos_token_id), ("eos_token_id", eos_token_id),
                                   ("pad_token_id", pad_token_id)) if v is not None}
        spec = resolve_special_tokens(spec, tokenizer, given)
        check_spec(spec, max_length, cache)
        converter = family.image_converter(model) if image_converter is None else image_converter
        facts = {**family.image_facts(model, converter), **options}
        if web:
            return write_web_vision_language(model, family, spec, facts, pathlib.Path(out_dir), max_length=max_length,
                                             precisions=dtypes, target=target, opset=opset, tok_source=tok_source,
                                             reporter=reporter)
        keywords = dict(opset=opset, target=target, external_data=external_data)
        reads_ids = bool(getattr(family, "DECODER_READS_INPUT_IDS", False))
        # per-layer inputs (Gemma 4): an embedding graph output the decoder graph reads, this wide
        per_layer = int(family.per_layer_width(model)) if hasattr(family, "per_layer_width") else 0
        out = pathlib.Path(out_dir)
        with staging_folder(out) as staging:
            reporter.stage(VISION_FILE)
            images = jax.export.symbolic_shape(IMAGES)[0]
            vision = vision_inputs(family, facts, images)
            write_graph(family.vision_fn(model), [s for _, s in vision], staging / VISION_FILE, [n for n, _ in vision],
                        [IMAGE_FEATURES], precision=precisions["vision"], **keywords)
            reporter.stage(EMBEDDING_FILE)
            batch, seq, rows = jax.export.symbolic_shape(f"{BATCH}, {SEQUENCE}, {IMAGE_ROWS}")
            write_graph(family.embedding_fn(model, **options), [jax.ShapeDtypeStruct((batch, seq), jnp.int32),
                                                jax.ShapeDtypeStruct((rows, spec.hidden_size), jnp.float32)],
                   staging / EMBEDDING_FILE, ["input_ids", IMAGE_FEATURES],
                   ["inputs_embeds", *([PER_LAYER_INPUTS] if per_layer else [])],
                   precision=precisions["embedding"], **keywords)
            reporter.stage(DECODER_FILE)
            in_names, out_names = io_names(spec.num_layers)
            ids = ["input_ids"] if reads_ids else []
            extra = [PER_LAYER_INPUTS] if per_layer else []
            write_graph(decoder_step(spec, cache, max_length, reads_ids, per_layer),
                        decoder_inputs(spec, cache, max_length, reads_ids, per_layer),
                   staging / DECODER_FILE, ["inputs_embeds", *extra, *ids, *in_names[1:]], out_names,
                   precision=precisions["decoder"], **keywords)
            reporter.stage(GENAI_CONFIG_FILE)
            config = genai_config(spec, max_length=max_length, cache=cache, search=search, reads_ids=reads_ids)
            if hasattr(family, "GENAI_MODEL_TYPE"):  # a pipeline of its own in genai (Gemma 4's gemma4)
                with_family_io(config, family.GENAI_MODEL_TYPE, [n for n, _ in vision], per_layer)
            (staging / GENAI_CONFIG_FILE).write_text(json.dumps(config, indent=4) + "\n")
            description = inputs_description(spec, facts, getattr(family, "PROMPT_LAYOUT", PREFIX_LAYOUT))
            if hasattr(family, "pixel_inputs_note"):  # pixels fed another way than (images, size, size, 3)
                description["inputs"].update(family.pixel_inputs_note(facts))
                description.update({key: facts[key] for key in ("patches", "patch_pixels")})
            description[REPORT_KEY] = {name: submodel_report(staging / filename, precisions[name])
                                       for name, filename in SUBMODELS.items()}
            (staging / INPUTS_FILE).write_text(json.dumps(description, indent=4) + "\n")
            if "preprocessing" in facts:
                text = json.dumps(family.processor_config(facts), indent=4) + "\n"
                (staging / PROCESSOR_FILE).write_text(text)
            if tok_source is not None:
                reporter.stage("tokenizer")
                write_tokenizer(tok_source, staging)
        return out


def write_graph(fn: Any, inputs: list[Any], path: pathlib.Path, in_names: list[str], out_names: list[str], *,
                opset: int, target: str, external_data: bool | None, precision: Any = "float32") -> None:
    """One graph of a multimodal folder, by core's stages, weights beside it in ``<file>.data`` when large."""
    ExportProgram(fn, inputs, model_name=path.stem, opset=opset, target=target, input_names=in_names,
                  output_names=out_names, return_mode="file", output_path=path, external_data=external_data,
                  external_data_file=f"{path.name}.data", precision=precision,
                  # the RMS norms as onnxruntime's norm ops where the target runs them (as export_causal_lm's)
                  rewrite_passes=get_target(target).requested_rewrites([RmsNormFusionPass.name])).write()


def vision_inputs(family: Any, facts: dict[str, Any], images: Any) -> list[tuple[str, Any]]:
    """The vision graph's inputs (name, spec): the family's (Gemma 4: patches and their positions), else
    ``pixel_values`` ``(images, size, size, 3)``."""
    if hasattr(family, "vision_inputs"):
        return family.vision_inputs(facts, images)
    size = facts["image_size"]
    return [(PIXEL_VALUES, jax.ShapeDtypeStruct((images, size, size, 3), jnp.float32))]


def with_family_io(config: dict[str, Any], model_type: str, vision_names: list[str], per_layer: int) -> None:
    """``config`` under genai's ``model_type`` with the vision graph's inputs and, where the model has
    them, the per-layer inputs passed from the embedding graph to the decoder graph."""
    model = config["model"]
    model["type"] = model_type
    model["vision"]["inputs"] = {name: name for name in vision_names}
    # genai's multimodal types with audio (gemma4) default the audio processor's config file and refuse a
    # folder naming it without an audio graph: no audio here
    model["speech"] = {"config_filename": ""}
    if per_layer:
        model["embedding"]["outputs"][PER_LAYER_INPUTS] = PER_LAYER_INPUTS
        model["decoder"]["inputs"] = {"inputs_embeds": "inputs_embeds", PER_LAYER_INPUTS: PER_LAYER_INPUTS,
                                      **{k: v for k, v in model["decoder"]["inputs"].items() if k != "inputs_embeds"}}


def family_options(family: Any, model: Any, image_token_id: int | None) -> dict[str, Any]:
    """What the family's graphs take beyond the model: the image placeholder id of a prompt that
    holds placeholders (Gemma 3); a family whose image comes first (PaliGemma) takes none."""
    if getattr(family, "PROMPT_LAYOUT", PREFIX_LAYOUT) == PREFIX_LAYOUT:
        if image_token_id is not None:
            raise OptionError(f"image_token_id={image_token_id}: this model's prompt has no image placeholders (its "
                              "image's embeddings come first); drop image_token_id=")
        return {}
    return {"image_token_id": family.placeholder_id(model, image_token_id)}


def genai_config(spec: DecoderSpec, *, max_length: int, cache: str, search: dict[str, Any] | None,
                 reads_ids: bool = False) -> dict[str, Any]:
    """The decoder-only config (``genai_config.build``) with the decoder reading ``inputs_embeds``
    (and ``input_ids`` where ``reads_ids``: genai 0.18 feeds them to a decoder declaring them) and the
    vision and embedding sessions beside it, under Gemma 3 vision's model type."""
    config = build_genai_config(spec, filename=DECODER_FILE, max_length=max_length, cache=cache, search=search)
    model = config["model"]
    decoder_inputs = model["decoder"]["inputs"]
    if not reads_ids:
        del decoder_inputs["input_ids"]
    model["decoder"]["inputs"] = {"inputs_embeds": "inputs_embeds", **decoder_inputs}
    model["type"] = "gemma3"
    model["embedding"] = {"filename": EMBEDDING_FILE,
                          "inputs": {"input_ids": "input_ids", "image_features": IMAGE_FEATURES},
                          "outputs": {"inputs_embeds": "inputs_embeds"}}
    model["vision"] = {"filename": VISION_FILE, "inputs": {"pixel_values": PIXEL_VALUES},
                       "outputs": {"image_features": IMAGE_FEATURES}}
    return config


def inputs_description(spec: DecoderSpec, facts: dict[str, Any], layout: str = PREFIX_LAYOUT) -> dict[str, Any]:
    """``multimodal.json``: the inputs a generator is given (``og.NamedTensors``), as :func:`generate` feeds them."""
    size, tokens = facts.get("image_size"), facts["image_tokens"]
    placeholders = layout != PREFIX_LAYOUT
    return {
        "family": spec.family,
        "image_size": size,
        "image_tokens": tokens,
        "layout": layout,
        **({"image_token_id": facts["image_token_id"]} if placeholders else {}),
        "prompt": PLACEHOLDER_NOTE.format(tokens=tokens) if placeholders else IMAGE_SLOT_NOTE,
        "inputs": {
            "input_ids": (f"int32 [batch, text tokens with {tokens} image_token_id per image]" if placeholders
                          else "int32 [1, image_tokens + text tokens]"),
            PIXEL_VALUES: f"float32 [num_images, {size}, {size}, 3] (height, width, RGB), the library's preprocessed "
                          "pixels (its image converter's output)",
            NUM_IMAGE_TOKENS: f"int64 [num_images], each {tokens}",
        },
        # the library's pixel preprocessing (resize, then x * scale + offset), when the export had its converter
        "preprocessing": facts.get("preprocessing"),
        "pad_token_id": spec.pad_token_id,
    }
