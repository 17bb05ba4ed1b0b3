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


_SOLVED_BEFORE_THE_PACKS_LOAD = r"""
import sys
import diffrax
import jax
import jax.numpy as jnp
import numpy as np

def field(t, y, args):
    return jnp.stack([y[1], -y[0] - 0.1 * y[1]])

def solve(y0):
    sol = diffrax.diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), t0=0.0, t1=2.0, dt0=0.1, y0=y0,
                              saveat=diffrax.SaveAt(t1=True),
                              stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6), max_steps=64)
    return sol.ys[0]

y0 = np.array([0.5, -0.2], np.float32)
expected = np.asarray(solve(y0))  # set up and run in JAX first: its jaxpr is cached with the callbacks
assert "jax2onnx" not in sys.modules and "jax2onnx_eqx" not in sys.modules

import onnx
import onnxruntime as ort
from jax2onnx import to_onnx

model = to_onnx(solve, [(2,)])
onnx.checker.check_model(model, full_check=True)
ops = {n.op_type for n in model.graph.node}
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
for start in (y0, np.array([-0.9, 0.3], np.float32)):
    got = session.run(None, {session.get_inputs()[0].name: start})[0]
    want = np.asarray(solve(start))
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5), (got, want)
print("MATCH", sorted(ops))
"""


def test_a_solve_run_before_the_packs_load_converts(tmp_path):
    """diffrax imported and its adaptive solve run before jax2onnx is imported (JAX has cached the
    jaxpr it traced then, with equinox's raising pure_callbacks): the export still converts (the
    checks dropped with a warning) and matches JAX."""
    import subprocess
    import sys

    script = tmp_path / "solve_first.py"
    script.write_text(_SOLVED_BEFORE_THE_PACKS_LOAD)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MATCH" in done.stdout and "Loop" in done.stdout, done.stdout
