"""jax2onnx-lax plugin pack."""

__version__ = "0.18.0"
