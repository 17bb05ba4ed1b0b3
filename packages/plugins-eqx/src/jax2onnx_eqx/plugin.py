"""Entry point of jax2onnx-eqx: the pack as one plugin object over its modules (one family each)."""

from jax2onnx.plugin import PackModules

plugin = PackModules("jax2onnx_eqx", ["internals", "linear", "conv", "pooling", "normalization", "attention"],
                      library_modules=["equinox"])
