"""jax2onnx-lax plugin pack."""

__version__ = "0.1.0"
