"""Entry point of jax2onnx-lax: forwards core's hooks to the lowering modules (one family each)."""

from __future__ import annotations

from jax2onnx import hookimpl
from jax2onnx.plugin import PackModules

_pack = PackModules(
    "jax2onnx_lax",
    [
        "elementwise",
        "reductions",
        "comparisons",
        "bitwise",
        "conversions",
        "cumulative",
        "transcendental",
        "special",
        "float_bits",
        "shape",
        "slicing",
        "stacking",
        "indexing",
        "scatter",
        "linalg",
        "conv",
        "windows",
        "window_grads",
        "sort",
        "fft",
        "complex_cases",
        "control_flow",
        "while_loop",
        "scan",
        "physics_cases",
    ],
)


@hookimpl
def jax2onnx_lowerings():
    return _pack.lowerings()


@hookimpl
def jax2onnx_components():
    return _pack.components()
