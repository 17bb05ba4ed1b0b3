"""KV sharing (Gemma 3n, Gemma 4): a model's last layers attend to the keys and values an earlier
layer of their kind computed and compute none of their own. KerasHub still gives those layers a
slot in its stacked cache (zeros that no layer reads); the folder carries only the layers that hold
keys and values (``frontends.support.only_holders``: ``genai_config.json``'s ``num_hidden_layers``
counts them), so a shared layer costs no cache memory in onnxruntime-genai."""

from __future__ import annotations

from typing import Any


def holders(decoders: list[Any]) -> list[int]:
    """The indices of the decoder layers that compute their own keys and values."""
    return [i for i, layer in enumerate(decoders) if not getattr(layer, "is_kv_shared_layer", False)]
