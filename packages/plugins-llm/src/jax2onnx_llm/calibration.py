"""Calibration data for ``export_causal_lm(..., precision=Precision("int4", calibration=...))``:
token-id batches or text, turned into batches of the exported step's inputs (a prefill from an
empty cache: ``input_ids``, an all-ones ``attention_mask``, zero-length past keys/values, or the
zeroed shared buffer), which the core's calibrated int4 runs layer by layer.

Accepted items (any mix): an integer array ``[batch, sequence]`` of token ids (``[sequence]`` is
one sequence), or a ``str`` encoded with the export's tokenizer (the ``tokenizer=`` argument or
the model's own). Each item is one batch, so items may differ in length.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any

import numpy as np

from .errors import OptionError
from .spec import DecoderSpec


def with_calibration_batches(precision: Any, spec: DecoderSpec, tokenizer: Any, cache: str, max_length: int) -> Any:
    """``precision`` with its calibration items as the step's input batches (unchanged when it is
    not a ``Precision`` carrying calibration data)."""
    from jax2onnx import Precision

    if not isinstance(precision, Precision) or precision.calibration is None:
        return precision
    items = precision.calibration
    if isinstance(items, (str, np.ndarray)) or not isinstance(items, (list, tuple)):
        raise OptionError(f"calibration takes a list of token-id arrays ([batch, sequence]) or texts, got "
                          f"{type(items).__name__}; write [item] for one")
    if not items:
        return precision
    batches = [_batch(_ids(item, i, spec, tokenizer, max_length), spec, cache, max_length) for i, item in enumerate(items)]
    return dataclasses.replace(precision, calibration=batches)


def _ids(item: Any, i: int, spec: DecoderSpec, tokenizer: Any, max_length: int) -> np.ndarray:
    if isinstance(item, str):
        if tokenizer is None or tokenizer is False:
            raise OptionError(f"calibration item {i} is text, and this export has no tokenizer to encode it: pass "
                              "tokenizer= (or give token ids, integer arrays [batch, sequence])")
        ids = _encode(tokenizer, item)[None, :]
        what = f"calibration text {i}"
    else:
        ids = np.asarray(item)
        what = f"calibration item {i}"
        if ids.dtype.kind not in "iu":
            raise OptionError(f"{what} is {ids.dtype} of shape {ids.shape}; give token ids as an integer array "
                              "(int32) [batch, sequence], or text")
        if ids.ndim == 1:
            ids = ids[None, :]
        if ids.ndim != 2:
            raise OptionError(f"{what} has shape {ids.shape}; give token ids as [batch, sequence] (or one sequence "
                              "as [sequence])")
    if ids.shape[1] == 0 or ids.shape[0] == 0:
        raise OptionError(f"{what} has shape {ids.shape}: no tokens; give at least one")
    if ids.shape[1] > max_length:
        raise OptionError(f"{what} is {ids.shape[1]} tokens long, over max_length={max_length}; give sequences of "
                          f"at most {max_length} tokens")
    if ids.min() < 0 or ids.max() >= spec.vocab_size:
        raise OptionError(f"{what} holds token id {int(ids.max() if ids.max() >= spec.vocab_size else ids.min())}, "
                          f"outside the model's vocabulary 0..{spec.vocab_size - 1}")
    return ids.astype(np.int32)


def _encode(tokenizer: Any, text: str) -> np.ndarray:
    if isinstance(tokenizer, (str, os.PathLike)):  # a folder holding tokenizer.json (or the file)
        from tokenizers import Tokenizer

        path = pathlib.Path(tokenizer)
        tokenizer = Tokenizer.from_file(str(path if path.is_file() else path / "tokenizer.json"))
    if hasattr(tokenizer, "encode"):  # a Hugging Face tokenizer (a list) or a tokenizers.Tokenizer (an Encoding)
        out = tokenizer.encode(text)
        out = getattr(out, "ids", out)
    else:  # a KerasHub tokenizer: called on the text
        out = tokenizer(text)
    return np.asarray(out).astype(np.int64).reshape(-1)


def _batch(ids: np.ndarray, spec: DecoderSpec, cache: str, max_length: int) -> tuple[np.ndarray, ...]:
    b, s = ids.shape
    kv_len = 0 if cache == "concat" else max_length
    dtype = np.dtype(spec.dtype)
    kv = np.zeros((b, spec.num_kv_heads, kv_len, spec.head_size), dtype)
    return (ids, np.ones((b, s), np.int32), *([kv] * (2 * spec.num_layers)))


__all__ = ["with_calibration_batches"]
