"""Greedy-token agreement of an exported LM folder with the float32 JAX model: the figure
``jax2onnx.verify(..., greedy=...)`` puts in the precision section, for an ``export_causal_lm``
folder, whose KV-cache graph takes more inputs than token ids.

Both sides decode as they are deployed: the JAX model through :func:`~jax2onnx_llm.reference.greedy_generate`
(its own jitted cache loop), the folder through onnxruntime-genai's ``Generator``
(:mod:`~jax2onnx_llm.genai_run`). The result is core's :class:`~jax2onnx.verification.greedy.GreedyAgreement`,
judged by the same floor (90%).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from jax2onnx.frontend import HIGHEST, MIN_AGREEMENT, NEW_TOKENS, GreedyAgreement, precision_scope

from .errors import OptionError
from .frontends import decoder_spec
from .genai_run import folder_pad_token_id, greedy, left_pad, until_eos
from .reference import greedy_generate


def greedy_agreement(
    model: Any,
    folder: str | os.PathLike[str],
    prompts: Sequence[Sequence[int]],
    *,
    new_tokens: int = NEW_TOKENS,
    min_agreement: float = MIN_AGREEMENT,
) -> GreedyAgreement:
    """The share of ``new_tokens`` greedy tokens after each prompt that the exported ``folder``
    generates equal to ``model``'s (what ``export_causal_lm`` was given) in float32 JAX. A sequence
    ending early (its end token) counts its missing positions as unequal."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise OptionError("greedy_agreement: give at least one prompt, each of at least one token id")
    spec = decoder_spec(model)
    pad = folder_pad_token_id(folder)  # the id the folder's graph reads as padding
    lists = [[int(t) for t in p] for p in prompts]
    # float32 JAX on every host, as core's verify computes it: a TPU's default matmuls are bfloat16 passes
    with precision_scope(HIGHEST):
        expected = greedy_generate(spec, *left_pad(lists, pad), new_tokens)
    got = greedy(folder, lists, new_tokens, pad_token_id=pad)
    equal = 0
    for want_row, got_row in zip(expected, got):
        want = until_eos(want_row, spec.eos_token_id)
        have = until_eos(got_row, spec.eos_token_id)
        equal += sum(a == b for a, b in zip(want, have))
    total = len(lists) * new_tokens
    return GreedyAgreement("logits", len(lists), total, equal / total, min_agreement)


__all__ = ["greedy_agreement"]
