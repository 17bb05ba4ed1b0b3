"""jax2onnx-nnx plugin pack."""

__version__ = "0.1.0"
