"""diffrax ODE solves (equinox's loops, error checks and buffers underneath) export and match JAX,
float64 included. diffrax is a test dependency of this pack (installed by its nox sessions), not a
dependency of the pack itself: without it these tests are reported as skipped."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx.testing import Testcase, run_variant
from jax2onnx.testing.runner import variants_of

diffrax = pytest.importorskip("diffrax")


def _damped_oscillator(t, y, args):
    return jnp.stack([y[1], -y[0] - 0.1 * y[1]])


def _solve(controller):
    def solve(y0):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(_damped_oscillator), diffrax.Tsit5(), t0=0.0, t1=2.0, dt0=0.1,
                                  y0=y0, saveat=diffrax.SaveAt(t1=True), stepsize_controller=controller(),
                                  max_steps=64)
        return sol.ys[0]

    return solve


def _fixed():
    return _solve(diffrax.ConstantStepSize)


def _adaptive():
    return _solve(lambda: diffrax.PIDController(rtol=1e-8, atol=1e-8))


def _start(rng, shape, dtype):
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


CASES = [
    # 20 fixed Tsit5 steps: equinox's bounded while_loop, maybe_set buffers, dropped error checks.
    Testcase("diffrax_tsit5_fixed_steps", factory=_fixed, input_shapes=[(2,)], input_generator=_start,
             expected_ops=["Loop"]),
    # Adaptive steps: the step loop is a while_loop whose trip count depends on the PID controller.
    Testcase("diffrax_tsit5_pid_controller", factory=_adaptive, input_shapes=[(2,)], input_generator=_start,
             expected_ops=["Loop"]),
    # Batched initial conditions: equinox binds its loop primitives as `vprim`.
    Testcase("diffrax_tsit5_fixed_steps_vmapped", factory=lambda: jax.vmap(_fixed()), input_shapes=[("B", 2)],
             input_generator=_start, run_static=False),
]
VARIANTS = [v for case in CASES for v in variants_of(case, "jax2onnx-eqx", "eqx.diffrax")]


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_diffrax_solve(variant):
    result = run_variant(variant)
    assert all(np.isfinite(d) for d in result.max_abs_diff)
