"""Entry point of jax2onnx-keras: the pack as one plugin object over its modules (one family each)."""

from jax2onnx.plugin import PackModules

plugin = PackModules("jax2onnx_keras", ["core", "normalization", "conv", "pooling", "attention", "rnn"],
                      library_modules=["keras"])
