"""Entry point of jax2onnx-examples: the pack as one plugin object over its modules (one family each)."""

from jax2onnx.plugin import PackModules

plugin = PackModules(
    "jax2onnx_examples",
    [
        "mlp",
        "cnn",
        "autoencoder",
        "attention",
        "vit",
        "vit_flat",
        "loops",
        "select_sort",
        "onnx_functions_basic",
        "onnx_functions_transformer",
        "gpt2",
        "training",
    ],
)
