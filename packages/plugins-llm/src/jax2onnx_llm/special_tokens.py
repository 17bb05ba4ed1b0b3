"""The special token ids a folder names (bos, eos, pad): resolved once, before anything is written,
and used for both the graph and ``genai_config.json``.

Why one resolution. onnxruntime-genai (0.18) sends an all-ones ``attention_mask`` for a left-padded
batch, so the graph finds a row's padding itself, as the leading tokens equal to the pad id
(:func:`jax2onnx_llm.export.flat_step`); onnxruntime-genai's users pad with ``genai_config.json``'s
``pad_token_id``. The two must be the same id, whichever way it was given or left out, or a padded
batch generates other tokens than each prompt alone.

Each id is taken from the first of: the ``export_causal_lm`` argument, the model (its config,
generation config or preprocessor), the tokenizer written into the folder; the pad id falls back to
the (first) end token, as Hugging Face checkpoints without one are padded. Every id must be inside
the model's vocabulary: onnxruntime-genai refuses a folder naming one outside it when it loads it.

A pad id that is also the start token of models whose prompts start with it (KerasHub's GPT-NeoX:
start = end = pad = 0; KerasHub's fixed pad id 0 over a vocabulary whose id 0 is the start token) would
make the graph take every prompt's leading start token for padding, so unless ``pad_token_id=`` was
given, the folder pads with the first end token that is not the start token, else the last vocabulary
id that is not: any id serves for padding as long as no prompt starts with it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any

from .errors import OptionError
from .spec import DecoderSpec

#: the spec's field -> (the Hugging Face tokenizer's attribute, the KerasHub tokenizer's attribute)
_TOKENIZER_ATTRS = {
    "bos_token_id": ("bos_token_id", "start_token_id"),
    "eos_token_id": ("eos_token_id", "end_token_id"),
    "pad_token_id": ("pad_token_id", "pad_token_id"),
}


def resolve(spec: DecoderSpec, tokenizer: Any, given: dict[str, Any]) -> DecoderSpec:
    """``spec`` with its bos/eos/pad ids resolved (``given``: the arguments that were not ``None``)
    and checked against its vocabulary. ``tokenizer``: what ``export_causal_lm`` writes (an object,
    a folder, or ``None``/``False``)."""
    from_tokenizer = tokenizer_ids(tokenizer)
    ids: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field in _TOKENIZER_ATTRS:
        for source, value in ((f"the {field}= argument", given.get(field)),
                              (f"the {spec.family} model", getattr(spec, field)),
                              ("the tokenizer", from_tokenizer.get(field))):
            if value is not None:
                ids[field], sources[field] = value, source
                break
    eos = ids.get("eos_token_id")
    if eos is None or (isinstance(eos, (list, tuple)) and not eos):
        raise OptionError(
            f"this {spec.family} model names no end-of-sequence token (onnxruntime-genai needs one): "
            "pass eos_token_id=... (jax2onnx llm: --eos-token-id; or a tokenizer/preprocessor that has one)"
        )
    for field, value in ids.items():
        _check_in_vocabulary(field, value, sources[field], spec.vocab_size)
    resolved: dict[str, Any] = {k: [int(t) for t in v] if isinstance(v, (list, tuple)) else int(v) for k, v in ids.items()}
    eos_ids = resolved["eos_token_id"] if isinstance(resolved["eos_token_id"], list) else [resolved["eos_token_id"]]
    if "pad_token_id" not in resolved:
        resolved["pad_token_id"] = eos_ids[0]
    bos = resolved.get("bos_token_id")
    starts_with_bos = spec.prompts_start_with_bos or tokenizer_adds_bos(tokenizer)
    if resolved["pad_token_id"] == bos and starts_with_bos and "pad_token_id" not in given:
        resolved["pad_token_id"] = next(t for t in [*eos_ids, spec.vocab_size - 1, spec.vocab_size - 2] if t != bos)
    return dataclasses.replace(spec, **resolved)


def _check_in_vocabulary(field: str, value: Any, source: str, vocab_size: int) -> None:
    for token in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(token, bool) or not isinstance(token, int) and not hasattr(token, "__index__"):
            raise OptionError(f"{field}={value!r} (from {source}): give an int token id (a list for eos_token_id)")
        if not 0 <= int(token) < vocab_size:
            raise OptionError(
                f"{field} ({int(token)}, from {source}) must be in range [0, {vocab_size}) of the model's vocabulary, "
                f"or onnxruntime-genai refuses the folder: pass {field}=<an id below {vocab_size}> to export_causal_lm "
                f"(jax2onnx llm: --{field.replace('_', '-')} <id>; or set one in the model's config)"
            )


def tokenizer_ids(tokenizer: Any) -> dict[str, int]:
    """The special ids a tokenizer names: a Hugging Face tokenizer's ``*_token_id``, a KerasHub
    tokenizer's ``start/end/pad_token_id``, or a folder's ``tokenizer_config.json`` tokens looked up
    in its ``tokenizer.json``. Empty for no tokenizer."""
    if tokenizer is None or tokenizer is False:
        return {}
    if isinstance(tokenizer, (str, os.PathLike)):
        return _folder_ids(pathlib.Path(tokenizer))
    found = {}
    for field, (hf_attr, keras_attr) in _TOKENIZER_ATTRS.items():
        # by the attribute the tokenizer has (neither library's tokenizers have the other's names)
        value = getattr(tokenizer, hf_attr, None)
        value = getattr(tokenizer, keras_attr, None) if value is None else value
        if value is not None:
            found[field] = int(value)
    return found


def tokenizer_adds_bos(tokenizer: Any) -> bool:
    """Whether the tokenizer puts its start token first when it encodes a prompt (transformers'
    ``add_bos_token``: Llama-style tokenizers; a folder's ``tokenizer_config.json``)."""
    if isinstance(tokenizer, (str, os.PathLike)):
        try:
            config = json.loads((_folder(pathlib.Path(tokenizer)) / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return config.get("add_bos_token") is True
    return getattr(tokenizer, "add_bos_token", False) is True


def _folder(path: pathlib.Path) -> pathlib.Path:
    """The folder a ``tokenizer=`` path names (the folder itself, or its ``tokenizer.json``)."""
    return path.parent if path.name == "tokenizer.json" else path


def _folder_ids(path: pathlib.Path) -> dict[str, int]:
    folder = _folder(path)
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no config: the folder names no special tokens (a missing tokenizer.json is tokenizers.resolve's error)
        return {}
    vocab = {t["content"]: t["id"] for t in tokenizer.get("added_tokens", [])}
    model_vocab = tokenizer.get("model", {}).get("vocab")
    if isinstance(model_vocab, list):  # Unigram (SentencePiece): [piece, score] by id
        model_vocab = {entry[0]: i for i, entry in enumerate(model_vocab)}
    if isinstance(model_vocab, dict):
        vocab = {**model_vocab, **vocab}
    found = {}
    for field in _TOKENIZER_ATTRS:
        token = config.get(field.replace("_id", ""))
        token = token.get("content") if isinstance(token, dict) else token
        if isinstance(token, str) and token in vocab:
            found[field] = int(vocab[token])
    return found
