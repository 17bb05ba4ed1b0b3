"""Tokenizer files beside the model: onnxruntime-genai's ``Tokenizer`` reads ``tokenizer.json`` (plus
``tokenizer_config.json`` and ``special_tokens_map.json`` when present) from the model folder.

Sources: a folder holding ``tokenizer.json``, a Hugging Face fast tokenizer (saved with
``save_pretrained``), or a KerasHub tokenizer (a ``CausalLM``'s preprocessor carries one), converted
by KerasHub's own Hugging Face exporter (vocabulary, merges, special tokens) and transformers' fast
tokenizer, which writes ``tokenizer.json``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from typing import Any

from .errors import TokenizerError

REQUIRED = "tokenizer.json"
COMPANIONS = ("tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model")


def resolve(tokenizer: Any) -> Any:
    """Check a tokenizer before the export: a folder (or its ``tokenizer.json``) that exists, or an
    object that can save itself (a Hugging Face fast tokenizer). Returns what :func:`write` takes."""
    if isinstance(tokenizer, (str, os.PathLike)):
        path = pathlib.Path(tokenizer)
        folder = path.parent if path.name == REQUIRED else path
        if not (folder / REQUIRED).is_file():
            raise TokenizerError(
                f"tokenizer={str(tokenizer)!r}: no {REQUIRED} there; onnxruntime-genai needs a Hugging Face fast "
                f"tokenizer's {REQUIRED} (save one with tokenizer.save_pretrained(folder))"
            )
        return folder
    if type(tokenizer).__module__.startswith("keras_hub."):
        return from_keras_hub(tokenizer)
    if hasattr(tokenizer, "save_pretrained"):
        if getattr(tokenizer, "is_fast", True) is False:
            raise TokenizerError(
                f"tokenizer {type(tokenizer).__name__} is a slow tokenizer: onnxruntime-genai reads {REQUIRED}, "
                "which only fast tokenizers write; pass AutoTokenizer.from_pretrained(..., use_fast=True)"
            )
        return tokenizer
    raise TokenizerError(
        f"tokenizer of type {type(tokenizer).__name__}: pass a Hugging Face fast tokenizer, a KerasHub tokenizer or a folder holding {REQUIRED}"
    )


def write(source: Any, folder: pathlib.Path) -> None:
    if isinstance(source, pathlib.Path):
        for name in (REQUIRED, *COMPANIONS):
            if (source / name).is_file():
                shutil.copy2(source / name, folder / name)
        return
    source.save_pretrained(str(folder))
    if not (folder / REQUIRED).is_file():
        raise TokenizerError(f"the tokenizer saved no {REQUIRED}; pass a fast tokenizer (use_fast=True)")


# KerasHub tokenizer class -> the transformers fast tokenizer that reads what KerasHub's exporter writes
# (vocab.json + merges.txt for byte-level BPE, tokenizer.model for SentencePiece); a tokenizer.json the
# exporter writes itself (Llama 3) is read as it is. Tested: GPT2Tokenizer.
_KERAS_HUB_FAST = {
    "GPT2Tokenizer": "GPT2TokenizerFast",
    "QwenTokenizer": "Qwen2TokenizerFast",
    "GemmaTokenizer": "GemmaTokenizerFast",
    "MistralTokenizer": "LlamaTokenizerFast",
}


def from_keras_hub(tokenizer: Any) -> Any:
    """A KerasHub tokenizer as a transformers fast tokenizer (what :func:`write` saves)."""
    name = type(tokenizer).__name__
    export = getattr(tokenizer, "export_to_transformers", None)
    try:
        from keras_hub.src.utils.transformers.export.hf_exporter import MODEL_TOKENIZER_CONFIGS
    except ImportError:  # an older KerasHub without the exporter
        MODEL_TOKENIZER_CONFIGS = {}
    if export is None or name not in MODEL_TOKENIZER_CONFIGS:
        raise TokenizerError(
            f"KerasHub {name} cannot be written as {REQUIRED} (KerasHub exports only "
            f"{sorted(MODEL_TOKENIZER_CONFIGS) or 'newer versions'} to Hugging Face); pass tokenizer=<a folder with "
            f"{REQUIRED}>, or tokenizer=False to export without one"
        )
    try:
        import transformers
    except ImportError as exc:
        raise TokenizerError(
            f"writing KerasHub {name} as {REQUIRED} needs transformers (its fast tokenizer writes the file): "
            "pip install transformers, or pass tokenizer=<a folder with tokenizer.json>"
        ) from exc
    with tempfile.TemporaryDirectory(prefix="jax2onnx-keras-tokenizer-") as tmp:
        export(tmp)
        _add_merges_header(os.path.join(tmp, "merges.txt"))
        if os.path.isfile(os.path.join(tmp, REQUIRED)):
            return transformers.PreTrainedTokenizerFast.from_pretrained(tmp)
        fast = getattr(transformers, _KERAS_HUB_FAST.get(name, ""), None)
        if fast is None:
            raise TokenizerError(
                f"KerasHub {name}: no transformers fast tokenizer reads its files here; pass tokenizer=<a folder "
                f"with {REQUIRED}>, or tokenizer=False"
            )
        return fast.from_pretrained(tmp)


def _add_merges_header(path: str) -> None:
    """transformers' BPE readers skip the first line of ``merges.txt`` (GPT-2's ``#version`` header);
    KerasHub writes the merges without one, so its first merge would be lost and words tokenized
    differently. Put the header in where it is missing."""
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not text.startswith("#version"):
        with open(path, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + text)
