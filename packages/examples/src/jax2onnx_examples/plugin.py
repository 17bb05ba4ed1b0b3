"""Entry point of jax2onnx-examples: forwards core's hooks to the pack's modules."""

from __future__ import annotations

from jax2onnx import hookimpl
from jax2onnx.plugin import PackModules

_pack = PackModules(
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
    ],
)


@hookimpl
def jax2onnx_lowerings():
    return _pack.lowerings()


@hookimpl
def jax2onnx_patches():
    return _pack.patches()


@hookimpl
def jax2onnx_components():
    return _pack.components()
