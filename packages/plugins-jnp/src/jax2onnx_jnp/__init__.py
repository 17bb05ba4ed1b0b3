"""jax2onnx-jnp plugin pack."""

__version__ = "0.1.0"
