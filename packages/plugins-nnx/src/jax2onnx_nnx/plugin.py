"""Entry point of jax2onnx-nnx: the pack as one plugin object over its modules (one family each)."""

from jax2onnx.plugin import PackModules

plugin = PackModules(
    "jax2onnx_nnx",
    [
        "normalization",
        "linear",
        "conv",
        "pooling",
        "dropout",
        "embed",
        "attention",
        "activations",
        "instance_norm",
        "module_state",
    ],
    library_modules=["flax"],
)
