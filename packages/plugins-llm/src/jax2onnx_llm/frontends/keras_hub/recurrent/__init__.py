"""KerasHub decoders whose layers carry state beyond attention keys and values, exported through
:mod:`jax2onnx_llm.stateful` (onnxruntime-genai's conv / recurrent state inputs): Qwen 3.5 (dense and
MoE) with Gated DeltaNet ``linear_attention`` layers (``qwen3_5.py``, its math in ``gated_delta.py``)
and RWKV-7 (``rwkv7.py``).
The KerasHub adapter hands a model here when :func:`claims` says it is one of them."""

from __future__ import annotations

from typing import Any

from ....stateful import StatefulDecoderSpec

#: KerasHub CausalLM classes whose stateful layers this folder exports
FAMILIES = ("Qwen3_5CausalLM", "Qwen3_5MoeCausalLM", "RWKV7CausalLM")


def claims(model: Any) -> bool:
    """A Qwen 3.5 model with at least one ``linear_attention`` layer (one of attention layers only
    needs no state and goes the generic way)."""
    name = type(model).__name__
    if name == "RWKV7CausalLM":
        return True
    layer_types = getattr(getattr(model, "backbone", None), "layer_types", None) or []
    return name in FAMILIES and any(str(t) == "linear_attention" for t in layer_types)


def decoder_spec(model: Any, name: str) -> StatefulDecoderSpec:
    if name == "RWKV7CausalLM":
        from .rwkv7 import decoder_spec as rwkv7_spec

        return rwkv7_spec(model, name)
    from .qwen3_5 import decoder_spec as qwen3_5_spec

    return qwen3_5_spec(model, name)
