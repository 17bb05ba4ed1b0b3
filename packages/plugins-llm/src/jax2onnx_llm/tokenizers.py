"""Tokenizer files beside the model: onnxruntime-genai's ``Tokenizer`` reads ``tokenizer.json`` (plus
``tokenizer_config.json`` and ``special_tokens_map.json`` when present) from the model folder."""

from __future__ import annotations

import os
import pathlib
import shutil
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
    if hasattr(tokenizer, "save_pretrained"):
        if getattr(tokenizer, "is_fast", True) is False:
            raise TokenizerError(
                f"tokenizer {type(tokenizer).__name__} is a slow tokenizer: onnxruntime-genai reads {REQUIRED}, "
                "which only fast tokenizers write; pass AutoTokenizer.from_pretrained(..., use_fast=True)"
            )
        return tokenizer
    raise TokenizerError(
        f"tokenizer of type {type(tokenizer).__name__}: pass a Hugging Face tokenizer or a folder holding {REQUIRED}"
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
