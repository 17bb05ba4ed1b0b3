"""Front-ends: each turns one source of causal LMs into a :class:`~jax2onnx_llm.spec.DecoderSpec`.

Each front-end is a folder here (its adapter, and the attention / state lowerings of its library's
layers beside it) whose package registers a :class:`Frontend`; another distribution registers one
in the ``jax2onnx_llm.frontends`` entry-point group. :func:`decoder_spec` asks them which claims a
model (``registry.py``); no front-end imports another's folder.
"""

from .registry import ENTRY_POINT_GROUP, Frontend, decoder_spec, registered, speech_to_text, vision_language

__all__ = ["ENTRY_POINT_GROUP", "Frontend", "decoder_spec", "registered", "speech_to_text", "vision_language"]
