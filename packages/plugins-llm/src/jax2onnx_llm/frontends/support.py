"""What the family adapters share: naming the supported classes of a library."""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedModelError


def supported_family(model: Any, families: dict[str, str], library: str) -> tuple[str, str]:
    """``model``'s class name and its family in ``families`` (class name -> family), or a clear error
    naming the classes ``library`` (as the message calls it) supports here."""
    name = type(model).__name__
    family = families.get(name)
    if family is None:
        raise UnsupportedModelError(
            f"{library} {name} is not a supported causal LM: use one of {sorted(families)}, or wrap the decoder in a "
            "jax2onnx_llm.DecoderSpec"
        )
    return name, family
