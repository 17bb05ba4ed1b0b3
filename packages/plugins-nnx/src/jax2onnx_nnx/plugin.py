"""Entry point of jax2onnx-nnx: forwards core's hooks to the pack's modules."""

from __future__ import annotations

from jax2onnx import hookimpl
from jax2onnx.plugin import PackModules

_pack = PackModules("jax2onnx_nnx", ["normalization", "linear", "conv", "pooling", "dropout", "embed", "attention", "activations", "instance_norm", "models", "module_state"])


@hookimpl
def jax2onnx_lowerings():
    return _pack.lowerings()


@hookimpl
def jax2onnx_patches():
    return _pack.patches()


@hookimpl
def jax2onnx_callable_adapters():
    return _pack.callable_adapters()


@hookimpl
def jax2onnx_components():
    return _pack.components()
