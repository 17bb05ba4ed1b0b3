"""jax2onnx-examples plugin pack."""

__version__ = "0.18.0"
