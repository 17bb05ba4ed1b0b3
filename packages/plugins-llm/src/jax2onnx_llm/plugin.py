"""Entry point of jax2onnx-llm: the fused attention lowerings (``attend``'s, and the Hugging Face and
KerasHub attention layers' patches and lowerings, KerasHub's mixture-of-experts blocks as MoE)."""

from jax2onnx.plugin import PackModules

plugin = PackModules("jax2onnx_llm", ["fused", "hf_attention", "hf_attention_more", "keras_attention", "keras_core_attention",
                                         "keras_moe"])
