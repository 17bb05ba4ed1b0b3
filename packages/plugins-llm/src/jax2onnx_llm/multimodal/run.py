"""Running an exported multimodal folder in onnxruntime-genai: greedy tokens after a prompt and an image."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import numpy as np
from jax2onnx.errors import MissingDependencyError

from ..errors import OptionError
from .export import INPUTS_FILE, NUM_IMAGE_TOKENS, PIXEL_VALUES, PREFIX_LAYOUT, PROCESSOR_FILE

#: the patch positions a Gemma 4 folder's vision graph reads beside its pixels
PIXEL_POSITION_IDS = "pixel_position_ids"


def require_genai() -> Any:
    """``onnxruntime_genai``, or :class:`MissingDependencyError` saying what to install (``genai_run``'s
    twin: ``genai_run.check_folders_run`` runs vision folders through this module, so it cannot import back)."""
    try:
        import onnxruntime_genai
    except ImportError as exc:
        raise MissingDependencyError("running an exported folder needs onnxruntime-genai: pip install onnxruntime-genai") from exc
    return onnxruntime_genai


def prompt_ids(folder: str | pathlib.Path, text_ids: list[int]) -> list[int]:
    """The folder's prompt for ``text_ids``: for a model whose image comes first (PaliGemma) the
    image's slots (the pad id, not read) and then the text; for one whose prompt holds the image
    placeholders (Gemma 3) ``text_ids`` as they are."""
    inputs = json.loads((pathlib.Path(folder) / INPUTS_FILE).read_text())
    if inputs.get("layout", PREFIX_LAYOUT) != PREFIX_LAYOUT:
        return [int(t) for t in text_ids]
    return [int(inputs["pad_token_id"])] * int(inputs["image_tokens"]) + [int(t) for t in text_ids]


def blank_image(folder: str | pathlib.Path) -> dict[str, np.ndarray]:
    """One blank image as :func:`generate`'s keywords (a smoke test's image): zero pixels ``(1, size,
    size, 3)`` of the folder's image size, or, for a Gemma 4 folder, zero patches of the smallest image
    its converter makes (one pooled token's patches, the rest padding) with their positions."""
    inputs = json.loads((pathlib.Path(folder) / INPUTS_FILE).read_text())
    if PIXEL_POSITION_IDS not in inputs["inputs"]:
        size = int(inputs["image_size"])
        return {"pixel_values": np.zeros((1, size, size, 3), np.float32)}
    patches = int(inputs["patches"])
    pool = math.isqrt(patches // int(inputs["image_tokens"]))  # the pooling kernel's side
    positions = np.full((1, patches, 2), -1, np.int32)
    positions[0, : pool * pool] = [(x, y) for y in range(pool) for x in range(pool)]
    return {"pixel_values": np.zeros((1, patches, int(inputs["patch_pixels"])), np.float32),
            PIXEL_POSITION_IDS: positions}


def smoke_prompt(folder: str | pathlib.Path) -> list[int]:
    """A prompt of a few ids for one image (:func:`blank_image`'s): the text of a PaliGemma folder, the
    image's placeholders between two ids in a Gemma 3 folder."""
    inputs = json.loads((pathlib.Path(folder) / INPUTS_FILE).read_text())
    if inputs.get("layout", PREFIX_LAYOUT) == PREFIX_LAYOUT:
        return [1, 2, 3]
    return [1, *[int(inputs["image_token_id"])] * int(inputs["image_tokens"]), 2]


def generate(folder: str | pathlib.Path, text_ids: list[int] | list[list[int]], pixel_values: Any,
             max_new_tokens: int, *, pixel_position_ids: Any = None) -> Any:
    """The tokens onnxruntime-genai generates (greedy, at most ``max_new_tokens``, stopping at the end
    token) after the prompt ``text_ids`` with the images ``pixel_values`` ``(images, size, size, 3)``,
    the library's preprocessed pixels, fed as ``og.NamedTensors`` through ``generator.set_inputs``.

    ``text_ids``: one prompt (a list of ids; returns a list) or a batch of prompts of one length (a
    list of lists; returns one list per prompt). PaliGemma: one image per prompt, the prompt its
    text. Gemma 3: the prompt as the library's preprocessor writes it, ``image_tokens`` placeholders
    per image; the images in the order their placeholders come, row after row. Gemma 4: ``pixel_values``
    and ``pixel_position_ids`` as the library's image converter makes them (``(images, patches, pixels)``
    and ``(images, patches, 2)``, padding patches included), ``image_tokens`` placeholders per image."""
    og = require_genai()
    folder = pathlib.Path(folder)
    inputs = json.loads((folder / INPUTS_FILE).read_text())
    single = not text_ids or not isinstance(text_ids[0], (list, tuple, np.ndarray))
    rows = [prompt_ids(folder, row) for row in ([text_ids] if single else text_ids)]
    if len({len(row) for row in rows}) != 1:
        raise OptionError(f"prompts of lengths {sorted({len(row) for row in rows})}: a batch here is prompts of one "
                          "length (genai's multimodal pipeline is given no padding); generate them one at a time")
    ids = np.asarray(rows, np.int32)
    tokens = int(inputs["image_tokens"])
    if inputs.get("layout", PREFIX_LAYOUT) == PREFIX_LAYOUT:
        images = len(rows)
    else:
        placeholders = int((ids == int(inputs["image_token_id"])).sum())
        if placeholders % tokens:
            raise OptionError(f"the prompts hold {placeholders} image placeholders (id {inputs['image_token_id']}), not "
                              f"a multiple of the {tokens} each image takes: write each image as the library's "
                              "preprocessor does")
        images = placeholders // tokens
    pixels = np.ascontiguousarray(pixel_values, np.float32)
    patched = PIXEL_POSITION_IDS in inputs["inputs"]  # Gemma 4: patches and their positions
    wanted = ((images, int(inputs["patches"]), int(inputs["patch_pixels"])) if patched
              else (images, int(inputs["image_size"]), int(inputs["image_size"]), 3))
    if pixels.shape != wanted:
        raise OptionError(f"pixel_values of shape {pixels.shape}: give the prompts' {images} image(s) as {wanted}, the "
                          "library's preprocessed pixels")
    if not patched and pixel_position_ids is not None:
        raise OptionError("pixel_position_ids given, but this folder's vision graph reads whole images (only a Gemma 4 "
                          "folder takes patch positions); drop pixel_position_ids=")
    if patched and np.shape(pixel_position_ids) != (*wanted[:2], 2):
        raise OptionError(f"pixel_position_ids of shape {np.shape(pixel_position_ids)}: give the image converter's "
                          f"pixel_position_ids, {(*wanted[:2], 2)}")
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=ids.shape[1] + max_new_tokens, batch_size=len(rows))
    generator = og.Generator(model, params)
    named = og.NamedTensors()
    named["input_ids"] = ids
    named[PIXEL_VALUES] = pixels
    if patched:
        named[PIXEL_POSITION_IDS] = np.ascontiguousarray(pixel_position_ids, np.int32)
    named[NUM_IMAGE_TOKENS] = np.full([images], tokens, np.int64)
    generator.set_inputs(named)
    while not generator.is_done():
        generator.generate_next_token()
    ends = json.loads((folder / "genai_config.json").read_text())["model"]["eos_token_id"]
    ends = set(ends if isinstance(ends, list) else [ends])
    out = []
    for b in range(len(rows)):  # a row that ended while another went on: up to its end token
        row = [int(t) for t in np.asarray(generator.get_sequence(b))[ids.shape[1]:]]
        stop = next((i for i, t in enumerate(row) if t in ends), None)
        out.append(row if stop is None else row[: stop + 1])
    return out[0] if single else out


def pixel_values_from_file(folder: str | pathlib.Path, image_path: str | pathlib.Path) -> np.ndarray:
    """``pixel_values`` ``(1, size, size, 3)`` for an image file, made by genai's image processor from
    the folder's ``processor_config.json`` (decode, resize, the library's scale and offset). genai's
    processor also writes Gemma 3's prompt; only its pixels are taken (the prompt is :func:`prompt_ids`'s).
    It loads the folder's tokenizer, so the folder needs one."""
    og = require_genai()
    folder = pathlib.Path(folder)
    if not (folder / PROCESSOR_FILE).exists():
        raise OptionError(f"{folder} has no {PROCESSOR_FILE} (it was exported without the library's image converter): "
                          "pass export_multimodal_lm(image_converter=...), or feed the converter's pixels to generate()")
    processor = og.Model(str(folder)).create_multimodal_processor()
    inputs = processor("<start_of_image>", images=og.Images.open(str(image_path)))
    return np.asarray(inputs[PIXEL_VALUES].as_numpy(), np.float32)
