"""Google's ``gemma`` library (google-deepmind/gemma, PyPI ``gemma``): its Flax Linen Gemma 2 / Gemma 3
text transformers (``gm.nn.Gemma2_*``, ``gm.nn.Gemma3_*``, or ``gm.nn.Transformer`` with a config) and
Gemma 3n's (``gm.nn.Gemma3n_*``), exported with their ``params`` (``export_causal_lm(model, folder,
params=params, ...)``). The adapters (``adapter.py``, ``gemma3n.py``) run the library's own modules;
``attention.py`` lowers their attention core to the target's fused op; ``tokenizer.py`` writes the
library's SentencePiece tokenizer."""

from __future__ import annotations

from typing import Any

from ...spec import DecoderSpec
from ..registry import Frontend


def claims(model: Any) -> bool:
    from .adapter import gemma4_class, transformer_class

    # Gemma 3n's transformer is a Transformer too; Gemma 4's (gemma >= 4) is claimed to be refused by name
    return any(base is not None and isinstance(model, base) for base in (transformer_class(), gemma4_class()))


def decoder_spec(model: Any, params: Any = None) -> DecoderSpec:
    from .adapter import gemma3n_class

    gemma3n = gemma3n_class()
    if gemma3n is not None and isinstance(model, gemma3n):
        from .gemma3n import decoder_spec as gemma3n_spec

        return gemma3n_spec(model, params)
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
    takes="a gemma library Linen transformer (gm.nn.Gemma2_*, gm.nn.Gemma3_*, gm.nn.Gemma3n_* text) with params=",
    claims=claims, decoder_spec=decoder_spec, lowerings=(f"{__name__}.attention",),
    claims_tokenizer=claims_tokenizer, tokenizer=tokenizer,
)
