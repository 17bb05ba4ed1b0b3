"""An exported optax Adam step trains in onnxruntime as it does in JAX: 20 steps, each step's
outputs (parameters, optimizer state) fed back as the next step's inputs (docs/guide/training.md)."""

from __future__ import annotations

import jax
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax2onnx import to_onnx
from jax2onnx_examples.testcases.training import N_IN, N_OUT, adam_step

STEPS = 20


@pytest.mark.parametrize("opset", [None, 13])
def test_adam_step_matches_jax_over_20_steps(opset):
    step, specs, state = adam_step(learning_rate=0.05)
    model = to_onnx(step, specs, **({} if opset is None else {"opset": opset}))
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    n = len(state)
    assert len(names) == n + 2 and len(session.get_outputs()) == n + 1

    rng = np.random.default_rng(0)
    jit_step = jax.jit(step)
    ours, theirs = list(state), list(state)
    losses = []
    for k in range(STEPS):
        # a new batch each step, of a new size every few steps: the batch dim is symbolic
        batch = 8 + (k % 3)
        x = rng.standard_normal((batch, N_IN)).astype(np.float32)
        y = np.sin(x[:, :N_OUT]) + 0.1 * rng.standard_normal((batch, N_OUT)).astype(np.float32)
        out = session.run(None, dict(zip(names, [*ours, x, y])))
        ref = [np.asarray(a) for a in jit_step(*theirs, x, y)]
        ours, theirs = out[:n], ref[:n]
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i)
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"state leaf {i} after step {k + 1}")
        np.testing.assert_allclose(out[n], ref[n], rtol=1e-5, err_msg=f"loss of step {k + 1}")
        losses.append(float(out[n]))
    count = [a for a in ours if a.dtype.kind == "i"]
    assert [int(c) for c in count] == [STEPS]  # Adam's step count went round the loop as an int
    assert np.mean(losses[-5:]) < np.mean(losses[:5])  # and the steps trained the model
