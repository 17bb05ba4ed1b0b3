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


def test_a_key_passed_in_is_not_blamed(monkeypatch):
    """A key that is an input draws the same numbers in JAX and the graph: a mismatch there is the
    lowering's (or the platform's), never "draws random numbers" (the TPU run of issue #34 said so
    wrongly for ``jax.random.normal(key, ...)`` with the key an input)."""
    import jax
    import jax2onnx.export.verify as verify_stage

    def noisy(key, x):
        return x + jax.random.normal(jax.random.split(key)[0], x.shape)

    assert verify_stage.random_primitives(jax.make_jaxpr(noisy)(jax.random.PRNGKey(0), jax.numpy.ones(3))) == []
    own = jax.make_jaxpr(lambda x: x + jax.random.normal(jax.random.PRNGKey(1), x.shape))(jax.numpy.ones(3))
    assert "random_bits" in verify_stage.random_primitives(own)

    real = verify_stage.run_verify
    monkeypatch.setattr(verify_stage, "run_verify", lambda fn, *a, **k: real(lambda *xs: fn(*xs) + 1.0, *a, **k))
    with pytest.raises(VerificationError) as info:
        to_onnx(noisy, [jax.ShapeDtypeStruct((2,), jax.numpy.uint32), (3,)], verify=True)
    assert "draws random numbers" not in str(info.value) and "A lowering computes something else" in str(info.value)
