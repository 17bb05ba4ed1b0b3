"""Keras runs on the JAX backend here: the variable must be set before Keras is first imported."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
if os.environ["KERAS_BACKEND"] != "jax":
    raise RuntimeError(f"KERAS_BACKEND={os.environ['KERAS_BACKEND']!r}: these tests need KERAS_BACKEND=jax")
