"""Tokenizer files beside the model: onnxruntime-genai's ``Tokenizer`` reads ``tokenizer.json`` (plus
``tokenizer_config.json`` and ``special_tokens_map.json`` when present) from the model folder.

Sources: a folder holding ``tokenizer.json``, a Hugging Face fast tokenizer (saved with
``save_pretrained``), or a tokenizer object a front-end writes (``Frontend.tokenizer``: a KerasHub
``CausalLM``'s preprocessor carries one, converted in ``frontends/keras_hub/tokenizer.py``).
Whatever the source, the written ``tokenizer.json`` is then put in the form onnxruntime-genai
splits as the library does (``tokenizer_genai.py``).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
from typing import Any

from .errors import TokenizerError
from .frontends.registry import tokenizer_source
from .tokenizer_genai import for_genai

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
        _check_files(folder)
        return folder
    converted = tokenizer_source(tokenizer)  # a library's own tokenizer object, written by its front-end
    if converted is not None:
        return converted
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


#: The companions that are JSON (read by onnxruntime-genai, or by the export for special tokens).
JSON_COMPANIONS = ("tokenizer_config.json", "special_tokens_map.json", "vocab.json")


def _check_files(folder: pathlib.Path) -> None:
    """The folder's files parse: its ``tokenizer.json`` as a tokenizer (with the ``tokenizers``
    library where installed, else as JSON holding a ``model``), its JSON companions as JSON; a
    damaged or cut-short file is refused naming it, before anything is written."""
    fix = "the file is damaged or cut short: save the tokenizer there again (tokenizer.save_pretrained(folder))"
    for name in (REQUIRED, *JSON_COMPANIONS):
        path = folder / name
        if name != REQUIRED and not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
            parsed = json.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:
            raise TokenizerError(f"tokenizer file {str(path)!r} does not parse as JSON ({exc}); {fix}") from exc
        if name == REQUIRED:
            if not isinstance(parsed, dict) or not isinstance(parsed.get("model"), dict):
                raise TokenizerError(f"tokenizer file {str(path)!r} is JSON but not a Hugging Face tokenizer.json (it "
                                     f"has no \"model\" object); {fix}")
            _check_with_library(path, text, fix)


def _check_with_library(path: pathlib.Path, text: str, fix: str) -> None:
    try:
        from tokenizers import Tokenizer
    except ImportError:  # optional: the JSON check above is what runs without it
        return
    try:
        Tokenizer.from_str(text)
    except Exception as exc:  # the library's own parse error (a Rust panic's message, a ValueError)
        raise TokenizerError(f"tokenizer file {str(path)!r} does not load as a tokenizer ({exc}); {fix}") from exc


def write(source: Any, folder: pathlib.Path) -> None:
    """The tokenizer's files in ``folder``, its ``tokenizer.json`` in the form onnxruntime-genai splits as
    the library does."""
    if isinstance(source, pathlib.Path):
        for name in (REQUIRED, *COMPANIONS):
            if (source / name).is_file():
                shutil.copy2(source / name, folder / name)
    else:
        source.save_pretrained(str(folder))
        if not (folder / REQUIRED).is_file():
            raise TokenizerError(f"the tokenizer saved no {REQUIRED}; pass a fast tokenizer (use_fast=True)")
    _rewrite_for_genai(folder)


def _rewrite_for_genai(folder: pathlib.Path) -> None:
    path = folder / REQUIRED
    tokenizer_json = json.loads(path.read_text(encoding="utf-8"))
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    rewritten, notes = for_genai(tokenizer_json, str(config.get("tokenizer_class") or ""))
    if notes:  # only a file that needed it is rewritten
        path.write_text(json.dumps(rewritten, ensure_ascii=False, indent=2), encoding="utf-8")


