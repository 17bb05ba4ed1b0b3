"""KerasHub's newest Gemma decoders, whose cache or layers the shared protocol (``generic.py``) does
not cover alone: Gemma 3n (AltUp, LAuReL, per-layer inputs, KV sharing, a heads-first cache:
``gemma3n.py``) and Gemma 4 (KV-shared layers carrying a cache slot nobody reads: ``gemma4.py``).
What both share, the folder's cache holding only the layers that compute keys and values, is
``kv_sharing.py`` (which layers) and ``frontends.support.only_holders`` (the cache without the others,
shared with the gemma library's Gemma 3n)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....spec import DecoderSpec


def _gemma3n(model: Any, name: str) -> DecoderSpec:
    from .gemma3n import decoder_spec

    return decoder_spec(model, name)


def _gemma4(model: Any, name: str) -> DecoderSpec:
    from .gemma4 import decoder_spec

    return decoder_spec(model, name)


#: KerasHub ``CausalLM`` class name -> ``decoder_spec(model, name)``
FAMILIES: dict[str, Callable[[Any, str], DecoderSpec]] = {"Gemma3nCausalLM": _gemma3n, "Gemma4CausalLM": _gemma4}
