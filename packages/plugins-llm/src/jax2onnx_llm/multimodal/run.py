"""Running an exported multimodal folder in onnxruntime-genai: greedy tokens after a prompt and an image."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
from jax2onnx.errors import MissingDependencyError

from ..errors import OptionError
from .export import INPUTS_FILE, NUM_IMAGE_TOKENS, PIXEL_VALUES, PROCESSOR_FILE


def require_genai() -> Any:
    """``onnxruntime_genai``, or :class:`MissingDependencyError` saying what to install (``genai_run``'s
    twin: ``genai_run.check_folders_run`` runs vision folders through this module, so it cannot import back)."""
    try:
        import onnxruntime_genai
    except ImportError as exc:
        raise MissingDependencyError("running an exported folder needs onnxruntime-genai: pip install onnxruntime-genai") from exc
    return onnxruntime_genai


def prompt_ids(folder: str | pathlib.Path, text_ids: list[int]) -> list[int]:
    """The folder's prompt for ``text_ids``: the image's slots (the pad id, not read) and then the text."""
    inputs = json.loads((pathlib.Path(folder) / INPUTS_FILE).read_text())
    return [int(inputs["pad_token_id"])] * int(inputs["image_tokens"]) + [int(t) for t in text_ids]


def blank_image(folder: str | pathlib.Path) -> np.ndarray:
    """Zero pixels ``(1, size, size, 3)`` of the folder's image size (a smoke test's image)."""
    size = int(json.loads((pathlib.Path(folder) / INPUTS_FILE).read_text())["image_size"])
    return np.zeros((1, size, size, 3), np.float32)


def generate(folder: str | pathlib.Path, text_ids: list[int], pixel_values: Any, max_new_tokens: int) -> list[int]:
    """The tokens onnxruntime-genai generates (greedy, at most ``max_new_tokens``, stopping at the end
    token) after the text ``text_ids`` with the image ``pixel_values`` ``(1, size, size, 3)``, the
    library's preprocessed pixels, fed as ``og.NamedTensors`` through ``generator.set_inputs``."""
    og = require_genai()
    folder = pathlib.Path(folder)
    inputs = json.loads((folder / INPUTS_FILE).read_text())
    pixels = np.ascontiguousarray(pixel_values, np.float32)
    size = int(inputs["image_size"])
    if pixels.ndim != 4 or pixels.shape[0] != 1 or pixels.shape[1:] != (size, size, 3):
        raise OptionError(f"pixel_values of shape {pixels.shape}: give one image as (1, {size}, {size}, 3), the "
                          "library's preprocessed pixels")
    ids = np.asarray([prompt_ids(folder, text_ids)], np.int32)
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=ids.shape[1] + max_new_tokens)
    generator = og.Generator(model, params)
    named = og.NamedTensors()
    named["input_ids"] = ids
    named[PIXEL_VALUES] = pixels
    named[NUM_IMAGE_TOKENS] = np.asarray([inputs["image_tokens"]], np.int64)
    generator.set_inputs(named)
    while not generator.is_done():
        generator.generate_next_token()
    return [int(t) for t in np.asarray(generator.get_sequence(0))[ids.shape[1]:]]


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
