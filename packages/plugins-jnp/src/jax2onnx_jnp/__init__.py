"""jax2onnx-jnp plugin pack."""

__version__ = "0.18.0"
