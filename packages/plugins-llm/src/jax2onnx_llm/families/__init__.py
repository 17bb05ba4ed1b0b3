"""Family adapters: each turns a library's causal LM into a :class:`~jax2onnx_llm.spec.DecoderSpec`.

Detection is by the object's module, so no library is imported unless the model comes from it.
"""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedModelError
from ..spec import DecoderSpec
from . import keras_hub, transformers_flax


def decoder_spec(model: Any) -> DecoderSpec:
    if isinstance(model, DecoderSpec):
        return model
    hook = getattr(model, "__jax2onnx_decoder__", None)
    if callable(hook):
        spec = hook()
        if not isinstance(spec, DecoderSpec):
            raise UnsupportedModelError(
                f"{type(model).__name__}.__jax2onnx_decoder__() returned {type(spec).__name__}, not a DecoderSpec"
            )
        return spec
    module = type(model).__module__ or ""
    if module.startswith("transformers."):
        return transformers_flax.decoder_spec(model)
    if module.startswith("keras_hub."):
        return keras_hub.decoder_spec(model)
    raise UnsupportedModelError(
        f"{type(model).__module__}.{type(model).__qualname__} is no causal LM this pack knows: pass a Hugging Face "
        "Flax causal LM (GPT-2, Llama, Mistral, Gemma, GPT-Neo, GPT-J, OPT, Bloom, XGLM), a KerasHub CausalLM, or wrap your decoder in a "
        "jax2onnx_llm.DecoderSpec"
    )
