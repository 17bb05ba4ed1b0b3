"""Entry point of jax2onnx-examples: the examples are testcases only (``testcases/``, one module per
example family), so the pack lowers nothing and an export imports none of them."""

from jax2onnx.plugin import Demo, PackModules

plugin = PackModules(
    "jax2onnx_examples",
    [],
    demos=[Demo("quickstart", "jax2onnx_examples.quickstart:main", "convert and verify the quickstart MLP")],
)
