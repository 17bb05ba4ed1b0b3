"""Entry point of jax2onnx-lax: the pack as one plugin object over its modules (one family each)."""

from jax2onnx.plugin import PackModules

plugin = PackModules(
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
        "linalg_factor",
        "linalg_solve",
        "linalg_eig",
        "linalg_misc",
        "special_functions",
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
