"""jax2onnx-nnx plugin pack."""

__version__ = "0.18.0"
