"""KerasHub ``CausalLM`` models under the JAX backend: GPT-2, Gemma and Llama by their own adapter
(``adapter.py``), every other decoder-only ``CausalLM`` through KerasHub's cached-generation protocol
(``generic.py``), Gemma 3n and Gemma 4 by ``gemma_family/``; their attention layers as the target's fused op (``attention.py``: whole layers;
``core_attention.py``: a layer's softmax core; ``alibi_attention.py``: ALiBi layers), and their
tokenizers as ``tokenizer.json`` (``tokenizer.py``)."""

from __future__ import annotations

import sys
from typing import Any

from ...spec import DecoderSpec
from ..registry import Frontend


def _library() -> Any:
    """keras_hub when it is imported (a model or tokenizer of it can exist only then), else None."""
    return sys.modules.get("keras_hub")


def claims(model: Any) -> bool:
    keras_hub = _library()
    return keras_hub is not None and isinstance(model, keras_hub.models.CausalLM)


def vision_language(model: Any) -> Any:
    """The model's vision-language parts for a KerasHub ``PaliGemmaCausalLM`` (``pali_gemma.py``), or a
    ``Gemma3CausalLM`` (``gemma3_vision.py``) or ``Gemma4CausalLM`` (``gemma4_vision.py``) whose backbone
    has a vision encoder, else None."""
    keras_hub = _library()
    if keras_hub is None:
        return None
    if isinstance(model, keras_hub.models.PaliGemmaCausalLM):
        from . import pali_gemma

        return pali_gemma
    if isinstance(model, keras_hub.models.Gemma3CausalLM) and getattr(model.backbone, "vision_encoder", None) is not None:
        from . import gemma3_vision

        return gemma3_vision
    if isinstance(model, keras_hub.models.Gemma4CausalLM) and getattr(model.backbone, "vision_encoder", None) is not None:
        from . import gemma4_vision

        return gemma4_vision
    return None


def speech_to_text(model: Any) -> Any:
    """The model's speech-to-text parts for a KerasHub ``WhisperBackbone`` (``whisper.py``) or a
    ``MoonshineAudioToText`` / ``MoonshineBackbone`` (``moonshine.py``), else None."""
    keras_hub = _library()
    if keras_hub is None:
        return None
    if isinstance(model, keras_hub.models.WhisperBackbone):
        from . import whisper

        return whisper
    moonshine_classes = tuple(c for c in (getattr(keras_hub.models, "MoonshineAudioToText", None),
                                          getattr(keras_hub.models, "MoonshineBackbone", None)) if c is not None)
    if moonshine_classes and isinstance(model, moonshine_classes):  # a keras-hub before Moonshine has neither
        from . import moonshine

        return moonshine
    return None


def decoder_spec(model: Any) -> DecoderSpec:
    from ...errors import UnsupportedModelError
    from .adapter import decoder_spec as adapt

    if vision_language(model) is not None:
        raise UnsupportedModelError(
            f"KerasHub {type(model).__name__} is a vision-language model: export it with "
            "jax2onnx_llm.multimodal.export_multimodal_lm (vision, embedding and decoder graphs); export_causal_lm "
            "writes text decoders")
    if speech_to_text(model) is not None:
        raise UnsupportedModelError(
            f"KerasHub {type(model).__name__} is a speech-to-text model: export it with "
            "jax2onnx_llm.multimodal.export_speech_to_text (encoder and decoder graphs); export_causal_lm writes text "
            "decoders")
    return adapt(model)


def claims_tokenizer(tokenizer: Any) -> bool:
    keras_hub = _library()
    return keras_hub is not None and isinstance(tokenizer, keras_hub.tokenizers.Tokenizer)


def tokenizer(tokenizer: Any) -> Any:
    from .tokenizer import from_keras_hub

    return from_keras_hub(tokenizer)


frontend = Frontend(
    name="keras_hub",
    takes="a KerasHub CausalLM under the JAX backend (GPT2CausalLM, GemmaCausalLM, LlamaCausalLM, and every other "
          "decoder-only CausalLM following KerasHub's cached-generation protocol, Gemma3nCausalLM and Gemma4CausalLM "
          "text included)",
    claims=claims, decoder_spec=decoder_spec, claims_tokenizer=claims_tokenizer, tokenizer=tokenizer,
    lowerings=(f"{__name__}.attention", f"{__name__}.core_attention"), vision_language=vision_language,
    speech_to_text=speech_to_text,
)
