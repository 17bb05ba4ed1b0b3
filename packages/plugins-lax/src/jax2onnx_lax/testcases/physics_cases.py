"""Physics-style testcases for the lax pack (no lowerings): the control flow and autodiff patterns
simulation code uses, checked in float32 and, where it matters most, float64."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax2onnx.testing import Component, Testcase


def heat_equation_2d(u):
    """100 explicit Euler steps of the periodic 2-D heat equation (5-point stencil)."""
    alpha = 0.1

    def step(_, v):
        lap = jnp.roll(v, 1, 0) + jnp.roll(v, -1, 0) + jnp.roll(v, 1, 1) + jnp.roll(v, -1, 1) - 4.0 * v
        return v + alpha * lap

    return lax.fori_loop(0, 100, step, u)


def horner_with_derivative(coeffs, x):
    """p(x) and p'(x) by Horner's rule: a reverse scan over the coefficients with two carries
    (value and derivative), also returning every partial value."""

    def step(carry, c):
        p, dp = carry
        return (p * x + c, dp * x + p), p

    zero = jnp.zeros_like(x)
    (p, dp), partial = lax.scan(step, (zero, zero), coeffs, reverse=True)
    return p, dp, partial


def newton_cube_root(a):
    """Newton's method for a**(1/3), iterating until the update is below tolerance (data-dependent
    trip count, capped)."""
    tol = jnp.asarray(1e-5, a.dtype)

    def keep_going(state):
        k, _, delta = state
        return (k < 60) & (jnp.max(jnp.abs(delta)) > tol)

    def step(state):
        k, x, _ = state
        new = x - (x * x * x - a) / (3.0 * x * x)
        return k + 1, new, new - x

    _, root, _ = lax.while_loop(keep_going, step, (0, jnp.ones_like(a), jnp.full_like(a, jnp.inf)))
    return root


def morse_forces(positions):
    """Forces on independent particles in a Morse well: minus the gradient of the energy, vmapped."""

    def energy(r):
        dist = jnp.sqrt(jnp.sum(r * r) + 1e-12)
        return 2.0 * (1.0 - jnp.exp(-1.5 * (dist - 1.0))) ** 2

    return -jax.vmap(jax.grad(energy))(positions)


def _positive(rng, shape, dtype):
    return rng.uniform(0.5, 3.0, size=shape).astype(dtype)


def physics_example(name: str, fn: Any, input_shapes: Sequence[Any], *, onnx: list[str], since: str,
                    description: str, more: Sequence[Testcase] = (), **testcase: Any) -> Component:
    """The worked example ``physics.<name>``: its own testcase ``physics_<name>`` (``fn`` on
    ``input_shapes``, ``testcase`` its further fields), then ``more``."""
    return Component(name=f"physics.{name}", onnx=onnx, since=since, kind="example", description=description,
                     testcases=[Testcase(f"physics_{name}", fn, input_shapes, **testcase), *more])


components = [
    physics_example("heat_equation_2d", heat_equation_2d, [("N", "N")], onnx=["Loop"], since="v0.1.0",
                    description="100-step periodic 5-point stencil (jnp.roll, add, mul) in lax.fori_loop",
                    expected_ops=["Loop"], atol=1e-4),
    physics_example("horner_reverse_scan", horner_with_derivative, [(6,), ("B",)], onnx=["Scan"], since="v0.1.0",
                    description="polynomial value and derivative: lax.scan, two carries, reverse=True",
                    expected_ops=["Scan"]),
    physics_example("newton_cube_root", newton_cube_root, [("B",)], onnx=["Loop"], since="v0.1.0",
                    description="Newton iteration in lax.while_loop that stops on the size of the update",
                    input_generator=_positive, expected_ops=["Loop"]),
    physics_example("morse_forces", morse_forces, [("N", 3)], onnx=["Exp", "Sqrt"], since="v0.1.0",
                    description="force = -grad(energy), vmapped over particles (jax.vmap + jax.grad inside the "
                                "exported function)",
                    expected_ops=["Exp"]),
]
