"""Calibration data for the two static graphs: each graph's inputs as the JAX step generates from
prompts (:func:`.loop.greedy` over :func:`.window.window_step`), so the activation ranges are the
ones real prompts, padding and a filling cache produce.

Prompts: ``Precision("qdq", calibration=[...])``'s token-id arrays ``[batch, sequence]`` (each row
a prompt, cut to ``max_length - 2`` tokens so that it generates at least two) or texts (encoded with
the tokenizer); none: the probe set, :data:`PROBE_PROMPTS` prompts
of random token ids (numpy seed 0), of lengths spread over ``1..P + 1`` so that the prefill graph
sees padded and full windows. Each prompt then generates up to :data:`PROBE_TOKENS` tokens.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..calibration import _ids as calibration_ids
from ..spec import DecoderSpec
from .loop import greedy
from .window import window_step

PROBE_PROMPTS = 4
PROBE_TOKENS = 8
#: each graph's metadata entry naming its calibration data
METADATA_KEY = "jax2onnx_llm.calibration"


def probe_prompts(spec: DecoderSpec, window: int, max_length: int) -> list[list[int]]:
    rng = np.random.default_rng(0)
    longest = min(window + 1, max_length - PROBE_TOKENS)
    lengths = np.unique(np.linspace(1, max(longest, 1), PROBE_PROMPTS).astype(int))
    return [rng.integers(0, spec.vocab_size, int(n)).tolist() for n in lengths]


def calibration_batches(spec: DecoderSpec, calibration: Any, tokenizer: Any, *, window: int,
                        max_length: int) -> tuple[dict[int, list[tuple[np.ndarray, ...]]], str]:
    """``({window: batches}, what)``: the batches of the prefill graph (``window``) and the decode graph
    (1), and what they came from (recorded in each graph's metadata, :data:`METADATA_KEY`)."""
    if calibration:
        # each prompt leaves room for two generated tokens, so that the decode graph sees it too
        prompts = [row.tolist()[:max_length - 2] for i, item in enumerate(calibration)
                   for row in calibration_ids(item, i, spec, tokenizer, max_length)]
    else:
        prompts = probe_prompts(spec, window, max_length)
    what = (f"{len(prompts)} given prompt(s)" if calibration else
            f"the probe set: {len(prompts)} prompts of random token ids (numpy seed 0), lengths "
            f"{', '.join(str(len(p)) for p in prompts)}")
    what += f", each generating up to {PROBE_TOKENS} tokens through the JAX step"
    step = jax.jit(window_step(spec))

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(x) for x in step(*inputs)]

    seen: dict[int, list[tuple[np.ndarray, ...]]] = {window: [], 1: []}

    def record(graph: str, inputs: list[np.ndarray]) -> None:
        seen[window if graph == "prefill" else 1].append(tuple(np.array(x) for x in inputs))

    for prompt in prompts:
        greedy(run, run, prompt, min(PROBE_TOKENS, max_length - len(prompt)), spec=spec, window=window,
               max_length=max_length, record=record)
    return seen, what


__all__ = ["METADATA_KEY", "PROBE_PROMPTS", "PROBE_TOKENS", "calibration_batches", "probe_prompts"]
