"""Entry point of jax2onnx-llm: the fused attention lowering (``target="onnxruntime"``)."""

from jax2onnx.plugin import PackModules

plugin = PackModules("jax2onnx_llm", ["fused"])
