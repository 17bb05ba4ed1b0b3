"""Entry point of jax2onnx-llm: the fused attention lowerings (``attend``'s, and each built-in front-end's
attention-layer patches and lowerings, ``Frontend.lowerings``), KerasHub's mixture-of-experts blocks as MoE."""

from jax2onnx.plugin import PackModules

from .frontends.registry import builtin_lowerings

plugin = PackModules("jax2onnx_llm", ["fused", *builtin_lowerings(), "keras_moe"])
