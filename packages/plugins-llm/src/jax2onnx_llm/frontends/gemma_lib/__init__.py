"""Google's ``gemma`` library (google-deepmind/gemma, PyPI ``gemma``): its Flax Linen Gemma 2 / Gemma 3
text transformers (``gm.nn.Gemma2_*``, ``gm.nn.Gemma3_*``, or ``gm.nn.Transformer`` with a config),
exported with their ``params`` (``export_causal_lm(model, folder, params=params, ...)``). The adapter
(``adapter.py``) runs the library's own modules; ``attention.py`` lowers their attention core to the
target's fused op; ``tokenizer.py`` writes the library's SentencePiece tokenizer."""

from __future__ import annotations

from typing import Any

from ...spec import DecoderSpec
from ..registry import Frontend


def claims(model: Any) -> bool:
    from .adapter import transformer_class

    base = transformer_class()  # Gemma 3n's too (refused by the adapter, naming it)
    return base is not None and isinstance(model, base)


def decoder_spec(model: Any, params: Any = None) -> DecoderSpec:
    from .adapter import decoder_spec as adapt

    return adapt(model, params)


def claims_tokenizer(tokenizer: Any) -> bool:
    from .tokenizer import claims_tokenizer as claims_it

    return claims_it(tokenizer)


def tokenizer(tokenizer: Any) -> Any:
    from .tokenizer import from_gemma

    return from_gemma(tokenizer)


frontend = Frontend(
    name="gemma_lib",
    takes="a gemma library Linen transformer (gm.nn.Gemma2_*, gm.nn.Gemma3_* text) with params=",
    claims=claims, decoder_spec=decoder_spec, lowerings=(f"{__name__}.attention",),
    claims_tokenizer=claims_tokenizer, tokenizer=tokenizer,
)
