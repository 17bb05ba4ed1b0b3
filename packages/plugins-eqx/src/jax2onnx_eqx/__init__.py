"""jax2onnx-eqx plugin pack."""

__version__ = "0.18.0"
