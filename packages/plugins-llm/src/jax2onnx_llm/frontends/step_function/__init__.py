"""Decoders written as JAX functions: a :class:`~jax2onnx_llm.DecoderSpec` itself, or any object
whose ``__jax2onnx_decoder__()`` returns one (the examples pack's NNX Llama). Asked before the
libraries' front-ends: a model that says what decoder it is is taken at its word."""

from __future__ import annotations

from typing import Any

from ...errors import UnsupportedModelError
from ...spec import DecoderSpec
from ..registry import Frontend

HOOK = "__jax2onnx_decoder__"


def claims(model: Any) -> bool:
    return isinstance(model, DecoderSpec) or callable(getattr(model, HOOK, None))


def decoder_spec(model: Any) -> DecoderSpec:
    if isinstance(model, DecoderSpec):
        return model
    spec = getattr(model, HOOK)()
    if not isinstance(spec, DecoderSpec):
        raise UnsupportedModelError(
            f"{type(model).__name__}.{HOOK}() returned {type(spec).__name__}, not a DecoderSpec: return one")
    return spec


frontend = Frontend(
    name="step_function",
    takes=f"a jax2onnx_llm.DecoderSpec (a decoder step written as a JAX function), or an object whose {HOOK}() "
          "returns one (an NNX model)",
    claims=claims, decoder_spec=decoder_spec, precedence=1,
)
