"""Entry point of jax2onnx-jnp: forwards core's hooks to the pack's modules."""

from __future__ import annotations

from jax2onnx import hookimpl
from jax2onnx.plugin import PackModules

_pack = PackModules("jax2onnx_jnp", ["linalg", "activations", "nn_misc", "reductions", "selection", "indexing", "sorting", "creation", "pad", "shape_ops", "attention"])


@hookimpl
def jax2onnx_lowerings():
    return _pack.lowerings()


@hookimpl
def jax2onnx_patches():
    return _pack.patches()


@hookimpl
def jax2onnx_components():
    return _pack.components()
