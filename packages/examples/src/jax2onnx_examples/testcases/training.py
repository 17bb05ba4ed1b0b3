"""Gradients and training steps exported as ONNX graphs (docs/guide/training.md).

An NNX model's parameters (and an optax optimizer's state) become graph inputs and outputs: the
exported function takes the flat leaves of ``(params, opt_state)`` and the batch, and returns the
new leaves and the loss, so a runtime trains by feeding each step's outputs to the next.
:func:`adam_step` builds that function; ``tests/test_training.py`` runs it 20 times in onnxruntime
against JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax2onnx.testing import Component, Testcase

N_IN, N_HIDDEN, N_OUT = 4, 8, 2


class TinyRegressor(nnx.Module):
    """Linear → tanh → Linear: small enough for many steps in a test, deep enough for backprop."""

    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(N_IN, N_HIDDEN, rngs=rngs)
        self.out = nnx.Linear(N_HIDDEN, N_OUT, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out(jnp.tanh(self.hidden(x)))


def _split(seed: int = 0, abstract: bool = False) -> tuple[Any, Any]:
    """(graphdef, params); ``abstract``: shapes and dtypes only (nothing computed, for the specs)."""
    make = lambda: TinyRegressor(nnx.Rngs(seed))  # noqa: E731
    return nnx.split(nnx.eval_shape(make) if abstract else make(), nnx.Param)


def _mse(graphdef: Any) -> Callable[[Any, jax.Array, jax.Array], jax.Array]:
    def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((nnx.merge(graphdef, params)(x) - y) ** 2)

    return loss


def leaf_specs(tree: Any) -> list[jax.ShapeDtypeStruct]:
    """One ``to_onnx`` input spec per array leaf of ``tree`` (its shape and dtype)."""
    return [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in jax.tree_util.tree_leaves(tree)]


def grad_specs() -> list[Any]:
    """The inputs of :func:`grad_fn`'s function: the parameter leaves, then x and y (batch B)."""
    return [*leaf_specs(_split(abstract=True)[1]), ("B", N_IN), ("B", N_OUT)]


def adam_specs() -> list[Any]:
    """The inputs of :func:`adam_step`'s function: the leaves of (params, opt_state), x, y."""
    params = _split(abstract=True)[1]
    return [*leaf_specs((params, jax.eval_shape(optax.adam(1e-2).init, params))), ("B", N_IN), ("B", N_OUT)]


def grad_fn(value: bool = False) -> Callable[..., Any]:
    """``fn(*param_leaves, x, y)``: the gradient leaves of the MSE loss (after the loss when
    ``value``: ``jax.value_and_grad``); inputs as :func:`grad_specs`."""
    graphdef, params = _split()
    leaves, treedef = jax.tree_util.tree_flatten(params)
    loss = _mse(graphdef)
    n = len(leaves)

    def fn(*args: jax.Array) -> Any:
        p = jax.tree_util.tree_unflatten(treedef, args[:n])
        if value:
            val, grads = jax.value_and_grad(loss)(p, *args[n:])
            return (val, *jax.tree_util.tree_leaves(grads))
        return tuple(jax.tree_util.tree_leaves(jax.grad(loss)(p, *args[n:])))

    return fn


def adam_step(learning_rate: float = 1e-2, seed: int = 0) -> tuple[Callable[..., Any], list[Any], list[np.ndarray]]:
    """``(step, specs, state)``: ``step(*state, x, y)`` is one optax Adam step on the MSE loss,
    returning ``(*new_state, loss)``; ``state`` is the flat leaves of ``(params, opt_state)`` at
    initialization (``opt_state`` holds Adam's step count, first and second moments)."""
    graphdef, params = _split(seed)
    tx = optax.adam(learning_rate)
    state = (params, tx.init(params))
    leaves, treedef = jax.tree_util.tree_flatten(state)
    loss = _mse(graphdef)
    n = len(leaves)

    def step(*args: jax.Array) -> Any:
        p, opt_state = jax.tree_util.tree_unflatten(treedef, args[:n])
        val, grads = jax.value_and_grad(loss)(p, *args[n:])
        updates, opt_state = tx.update(grads, opt_state, p)
        return (*jax.tree_util.tree_leaves((optax.apply_updates(p, updates), opt_state)), val)

    return step, adam_specs(), [np.asarray(a) for a in leaves]


def _non_negative(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Random inputs for a training step: Adam's second moment is a square (non-negative, it goes
    under a square root), its step count a small integer; parameters and data may be anything."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 5, size=shape).astype(dtype)
    return np.abs(rng.standard_normal(shape)).astype(dtype)


components = [
    Component(
        name="training.grad",
        kind="example",
        description="jax.grad and jax.value_and_grad of an NNX model's MSE loss; the parameters are graph inputs.",
        onnx=["MatMul", "Tanh", "ReduceSum"],
        since="v0.1.0",
        testcases=[
            Testcase("nnx_loss_grad", factory=grad_fn, input_shapes=grad_specs()),
            Testcase("nnx_loss_value_and_grad", factory=lambda: grad_fn(value=True), input_shapes=grad_specs()),
        ],
    ),
    Component(
        name="training.adam_step",
        kind="example",
        description="One optax Adam step: parameters and optimizer state in, updated parameters, state and loss out.",
        onnx=["MatMul", "Sqrt", "Pow"],
        since="v0.1.0",
        testcases=[
            Testcase("nnx_adam_step", factory=lambda: adam_step()[0], input_shapes=adam_specs(),
                     input_generator=_non_negative),
        ],
    ),
]
