"""jax2onnx-mypack: a jax2onnx plugin pack (made from jax2onnx's templates/plugin-pack)."""

__version__ = "0.1.0"
