"""jax2onnx-eqx plugin pack."""

__version__ = "0.1.0"
