"""Entry point of jax2onnx-linen: the pack as one plugin object over its modules (one family each)."""

from jax2onnx.plugin import PackModules

plugin = PackModules("jax2onnx_linen", ["linear", "normalization", "attention", "conv", "pooling", "embed", "activations"],
                      library_modules=["flax"])
