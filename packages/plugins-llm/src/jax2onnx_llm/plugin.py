"""Entry point of jax2onnx-llm: the fused attention lowerings (``attend``'s, and the Hugging Face
attention layers' patches and lowering)."""

from jax2onnx.plugin import PackModules

plugin = PackModules("jax2onnx_llm", ["fused", "library_attention"])
