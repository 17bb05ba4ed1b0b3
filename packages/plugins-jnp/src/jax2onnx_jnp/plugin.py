"""Entry point of jax2onnx-jnp: the pack as one plugin object over its modules (one family each)."""

from jax2onnx.plugin import PackModules

plugin = PackModules(
    "jax2onnx_jnp",
    [
        "linalg",
        "linalg_inverse",
        "activations",
        "nn_misc",
        "reductions",
        "selection",
        "indexing",
        "sorting",
        "creation",
        "pad",
        "roll",
        "shape_ops",
        "attention",
    ],
)
