"""jax2onnx-linen plugin pack."""

__version__ = "0.18.0"
