"""Hugging Face transformers 4.x Flax causal LMs: the adapter (``adapter.py``, ``more_families.py``)
runs the library's own module with its own static cache; ``attention.py`` / ``attention_more.py``
lower each cached attention layer to the target's fused attention op."""

from __future__ import annotations

import sys
from typing import Any

from ...spec import DecoderSpec
from ..registry import Frontend


def claims(model: Any) -> bool:
    """A ``FlaxPreTrainedModel`` (only looked up when transformers is imported: a model of it can exist
    only then)."""
    transformers = sys.modules.get("transformers")
    try:
        base = transformers.FlaxPreTrainedModel if transformers is not None else None
    except (AttributeError, ImportError, RuntimeError):  # a transformers without (working) Flax models
        return False
    return base is not None and isinstance(model, base)


def decoder_spec(model: Any) -> DecoderSpec:
    from .adapter import decoder_spec as adapt

    return adapt(model)


def _families() -> str:
    from .adapter import FAMILIES

    return ", ".join(FAMILIES)


frontend = Frontend(
    name="hf_flax",
    takes=f"a Hugging Face transformers 4.x Flax causal LM ({_families()})",
    claims=claims, decoder_spec=decoder_spec,
    lowerings=(f"{__name__}.attention", f"{__name__}.attention_more"),
)
