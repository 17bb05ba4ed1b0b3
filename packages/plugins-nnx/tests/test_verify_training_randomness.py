"""``to_onnx(..., verify=True)`` on a model in training mode (Dropout draws new numbers on every
call) says that the randomness is why JAX and the model differ, not a lowering; in eval mode the
same model verifies."""

from __future__ import annotations

import pytest
from flax import nnx
from jax2onnx import to_onnx
from jax2onnx.verification.report import VerificationError
from jax2onnx_nnx.testcases.models import QuickstartMLP


def test_training_mode_dropout_is_named_as_the_cause():
    model = QuickstartMLP(30, 20, 10, rngs=nnx.Rngs(0))  # training mode: Dropout active
    with pytest.raises(VerificationError) as info:
        to_onnx(model, [("B", 30)], verify=True)
    message = str(info.value)
    assert "draws random numbers" in message and "random_bits" in message and "model.eval()" in message
    assert "A lowering computes something else" not in message


def test_eval_mode_verifies():
    model = QuickstartMLP(30, 20, 10, rngs=nnx.Rngs(0))
    model.eval()
    proto = to_onnx(model, [("B", 30)], verify=True)
    assert [n.op_type for n in proto.graph.node] == ["Gemm", "BatchNormalization", "Gelu", "Gemm"]


def test_a_deterministic_mismatch_still_blames_the_lowering(monkeypatch):
    """Without randomness in the trace, the message keeps pointing at a lowering."""
    import jax.numpy as jnp
    import jax2onnx.export.verify as verify_stage

    real = verify_stage.run_verify  # the verify stage's engine: compare against fn(x) + 1 instead
    monkeypatch.setattr(verify_stage, "run_verify", lambda fn, *a, **k: real(lambda x: fn(x) + 1.0, *a, **k))
    with pytest.raises(VerificationError, match="A lowering computes something else"):
        to_onnx(lambda x: jnp.sin(x), [("B", 3)], verify=True)
