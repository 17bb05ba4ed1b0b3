"""Helpers for the pack's testcases: Keras on the JAX backend, layers with weights that make a
test able to fail (Keras initialises biases to zero and scales to one)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def import_keras() -> Any:
    """``keras``, on the JAX backend (set before Keras is first imported)."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    if keras.backend.backend() != "jax":
        raise RuntimeError(
            f"Keras was imported with the {keras.backend.backend()!r} backend; jax2onnx exports Keras models on "
            "the JAX backend: set KERAS_BACKEND=jax before importing keras"
        )
    return keras


def randomize(layer: Any, seed: int = 0) -> Any:
    """Every variable of ``layer`` drawn from U(-1, 1); variances from U(0.5, 1.5) (they must be
    positive), so a lowering that drops a bias or swaps mean and variance fails."""
    rng = np.random.default_rng(seed)
    for v in layer.variables:
        if np.dtype(v.dtype).kind != "f":  # a seed generator's state, a counter
            continue
        shape = tuple(v.shape)
        if "variance" in v.path:
            value = rng.uniform(0.5, 1.5, shape)
        else:
            value = rng.uniform(-1.0, 1.0, shape)
        v.assign(value.astype(v.dtype))
    return layer


def _concrete(shape: Sequence[Any], fill: int = 2) -> tuple[int, ...]:
    return tuple(fill if d is None else int(d) for d in shape)


def keras_model(
    build: Callable[[Any], Any],
    *input_shapes: Sequence[Any],
    wrap: Callable[[Any], Any] | None = None,
    seed: int = 0,
    dtype: Any = np.float32,
) -> Callable[[], Callable[..., Any]]:
    """A testcase factory: the layer ``build(keras)``, built on ``input_shapes`` (without the batch
    axis; ``None`` for a free size), weights randomised, called with ``training=False``."""

    def factory() -> Callable[..., Any]:
        keras = import_keras()
        layer = build(keras)
        layer(*[np.zeros((1, *_concrete(s)), dtype) for s in input_shapes])  # builds the weights
        randomize(layer, seed)

        def fn(*xs: Any) -> Any:
            return layer(*xs, training=False)

        return wrap(fn) if wrap is not None else fn

    return factory


def check_ops(*ops: str, max_transposes: int | None = None) -> Callable[[Any, Any], None]:
    """A testcase ``check``: ``ops`` appear in the graph and at most ``max_transposes`` Transposes
    (the same in every variant these float32-only cases run)."""

    def check(proto: Any, variant: Any) -> None:
        from jax2onnx.testing.runner import op_types

        found = op_types(proto)
        missing = [o for o in ops if o not in found]
        assert not missing, f"expected {missing} in the graph, found {sorted(found)}"
        if max_transposes is not None:
            n = sum(1 for node in proto.graph.node if node.op_type == "Transpose")
            assert n <= max_transposes, f"{n} Transposes, expected at most {max_transposes}"

    return check
