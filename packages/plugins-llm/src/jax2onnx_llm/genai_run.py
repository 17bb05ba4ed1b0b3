"""Running an exported folder in onnxruntime-genai's ``Generator``: greedy tokens for a batch of
prompts (left-padded to one length), as the tests, the guide and the bench read them."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
from jax2onnx.errors import MissingDependencyError
from jax2onnx.targets import default_target


def left_pad(prompts: list[list[int]], pad_token_id: int, multiple: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, attention_mask)``: the prompts right-aligned in one ``(batch, longest)`` array, its
    width rounded up to a ``multiple`` (a sliding-window folder's window: genai runs whole windows)."""
    longest = -(-max(len(p) for p in prompts) // multiple) * multiple
    ids = np.full((len(prompts), longest), pad_token_id, np.int32)
    mask = np.zeros((len(prompts), longest), np.int32)
    for row, p in enumerate(prompts):
        ids[row, longest - len(p):] = p
        mask[row, longest - len(p):] = 1
    return ids, mask


def folder_pad_token_id(folder: str | pathlib.Path) -> int:
    """The pad id a folder's ``genai_config.json`` names: what its batches are left-padded with."""
    return int(json.loads((pathlib.Path(folder) / "genai_config.json").read_text())["model"]["pad_token_id"])


def require_genai() -> Any:
    """Import and return ``onnxruntime_genai``, or raise :class:`MissingDependencyError` saying what to install."""
    try:
        import onnxruntime_genai
    except ImportError as exc:
        raise MissingDependencyError("running an exported folder needs onnxruntime-genai: pip install onnxruntime-genai") from exc
    return onnxruntime_genai


class LoadedFolder:
    """A folder's model loaded into onnxruntime-genai once, for several generations (loading it is
    most of what a short generation on a small model costs): pass it to :func:`greedy` in place of
    the folder."""

    def __init__(self, folder: str | pathlib.Path) -> None:
        og = require_genai()
        self.folder = pathlib.Path(folder)
        self.model = og.Model(str(folder))
        # a folder whose prompts run in windows (target="qdq") pads them to whole windows, as genai does
        config = json.loads((self.folder / "genai_config.json").read_text())["model"]
        window = config["decoder"].get("sliding_window")
        self.multiple = window["window_size"] if window and window.get("slide_inputs", True) else 1
        self.pad_token_id = int(config["pad_token_id"])  # folder_pad_token_id's, read with the rest


def greedy(folder: str | pathlib.Path | LoadedFolder, prompts: list[list[int]], max_new_tokens: int, *,
           pad_token_id: int | None = None) -> list[list[int]]:
    """The tokens onnxruntime-genai generates after each prompt (greedy; at most ``max_new_tokens``).
    The batch is left-padded with ``pad_token_id`` (default: the folder's own, as genai's users pad).
    ``folder``: the folder, or a :class:`LoadedFolder` of it (loaded once for several calls)."""
    og = require_genai()
    loaded = folder if isinstance(folder, LoadedFolder) else LoadedFolder(folder)
    ids, _ = left_pad(prompts, loaded.pad_token_id if pad_token_id is None else pad_token_id, loaded.multiple)
    params = og.GeneratorParams(loaded.model)
    params.set_search_options(do_sample=False, max_length=ids.shape[1] + max_new_tokens, batch_size=len(prompts))
    generator = og.Generator(loaded.model, params)
    generator.append_tokens(ids)
    while not generator.is_done():
        generator.generate_next_token()
    return [[int(t) for t in np.asarray(generator.get_sequence(row))[ids.shape[1]:]] for row in range(len(prompts))]


def prefill_logits(folder: str | pathlib.Path, ids: np.ndarray) -> np.ndarray:
    """The folder's ``model.onnx`` run once in onnxruntime on ``ids`` (all of them attended to) with
    an empty KV cache: the prefill logits, to compare with the library's forward pass."""
    import onnxruntime as ort

    # the verification runner of the folder's target (every target genai runs: onnxruntime's CPU provider)
    session = default_target().inference_session(ort, str(pathlib.Path(folder) / "model.onnx"))
    feeds = {}
    for i in session.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = ids
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones(ids.shape, np.int32)
        else:  # an empty past (batch, kv heads, 0, head size) in the cache's dtype
            dtype = np.float16 if i.type == "tensor(float16)" else np.float32
            feeds[i.name] = np.zeros((ids.shape[0], i.shape[1], 0, i.shape[3]), dtype)
    return session.run(None, feeds)[0]


def until_eos(tokens: Any, eos: Any) -> list[int]:
    """The tokens before the first end-of-sequence token (onnxruntime-genai stops there and leaves it out)."""
    stops = set(eos if isinstance(eos, (list, tuple)) else [eos]) if eos is not None else set()
    out = []
    for t in tokens:
        if int(t) in stops:
            break
        out.append(int(t))
    return out


def check_folders_run(root: str | pathlib.Path) -> list[pathlib.Path]:
    """Load every onnxruntime-genai folder under ``root`` (each holding ``genai_config.json``) in
    onnxruntime-genai and generate a few tokens; raise if one does not load or generates ids outside
    its vocabulary. The README and guide tests run it on what their blocks wrote: the ONNX checker
    alone passes a folder genai refuses (a special token id outside the vocabulary). Returns the folders."""
    folders = sorted(p.parent for p in pathlib.Path(root).rglob("genai_config.json"))
    for folder in folders:
        vocab = json.loads((folder / "genai_config.json").read_text())["model"]["vocab_size"]
        if (folder / "multimodal.json").exists():  # a vision folder: a prompt with a blank image
            from .multimodal.run import blank_image, generate, smoke_prompt

            image = blank_image(folder)
            tokens = generate(folder, smoke_prompt(folder), image.pop("pixel_values"), 4, **image)
        elif (folder / "speech.json").exists():  # a speech folder: its prompt over silence
            from .multimodal.whisper import silence, transcribe

            tokens = transcribe(folder, silence(folder), 4)[0]
        else:
            tokens = greedy(folder, [[1, 2, 3]], 4)[0]
        if len(tokens) > 4 or not all(0 <= t < vocab for t in tokens):
            raise AssertionError(f"{folder}: onnxruntime-genai generated {tokens} (4 ids below {vocab} expected)")
    return folders
