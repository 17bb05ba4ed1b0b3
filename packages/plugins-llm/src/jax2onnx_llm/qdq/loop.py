"""Greedy generation over the two static graphs, as onnxruntime-genai's sliding-window pipeline
drives them: the prompt in windows of ``P`` tokens through the prefill graph (the first one padded
on the left), then one token per step through the decode graph. Each run's present (the cache slid
by the window, :mod:`.window`) is the next run's past, as onnxruntime-genai's shared past/present
buffer makes it.

``run_prefill``/``run_decode`` take the graph's inputs as a list of arrays and return its outputs
(an onnxruntime session's, or the JAX step's for the reference and the calibration probe).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..spec import DecoderSpec
from .window import cache_shape

Run = Callable[[list[np.ndarray]], Sequence[np.ndarray]]


def greedy(run_prefill: Run, run_decode: Run, prompt: Sequence[int], new_tokens: int, *, spec: DecoderSpec,
           window: int, max_length: int, record: Callable[[str, list[np.ndarray]], None] | None = None) -> list[int]:
    """``new_tokens`` greedy tokens after ``prompt`` (``spec``: its sizes and pad id);
    ``record(graph, inputs)``: called with each run's inputs (``"prefill"`` or ``"decode"``)."""
    prompt = [int(t) for t in prompt]
    if not prompt or len(prompt) + new_tokens > max_length:
        raise ValueError(f"a prompt of {len(prompt)} tokens and {new_tokens} new ones: give 1 to "
                         f"{max_length} tokens in all (max_length)")
    pad_token_id = spec.pad_token_id
    cache = [np.zeros(cache_shape(spec, max_length), np.float32) for _ in range(2 * spec.num_layers)]
    mask = np.zeros((1, max_length), np.int32)  # over the cache's slots, newest at the end

    def run(graph: str, ids: list[int], real: int) -> np.ndarray:
        nonlocal mask, cache
        w = len(ids)
        mask = np.concatenate([mask[:, w:], np.zeros((1, w - real), np.int32), np.ones((1, real), np.int32)], axis=1)
        inputs = [np.array([ids], np.int32), mask, *cache]
        if record is not None:
            record(graph, inputs)
        logits, *present = (run_prefill if graph == "prefill" else run_decode)(inputs)
        cache = [np.asarray(p) for p in present]
        return np.asarray(logits)[0, -1]

    first = len(prompt) % window or window  # the first window holds the remainder, padded on the left
    chunks = [prompt[:first], *(prompt[i:i + window] for i in range(first, len(prompt), window))]
    for chunk in chunks:
        logits = run("prefill", [pad_token_id] * (window - len(chunk)) + chunk, len(chunk))
    tokens = [int(np.argmax(logits))]
    while len(tokens) < new_tokens:
        tokens.append(int(np.argmax(run("decode", [tokens[-1]], 1))))
    return tokens


__all__ = ["greedy"]
