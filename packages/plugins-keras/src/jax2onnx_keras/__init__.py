"""jax2onnx-keras plugin pack: Keras 3 layers on the JAX backend as fused ONNX ops."""

__version__ = "0.18.0"
