"""verify=True on a TPU or GPU host (issue #34): correct exports of an MLP and a 4-layer transformer
whose parameters live on the accelerator pass, against a reference computed there at highest
matmul precision; the report names that device; the accelerator's own default numbers are compared
with their own tolerances, and float32's tolerances against them fail as a precision effect."""

from __future__ import annotations

import jax
import pytest
from accelerator_models import (
    BACKEND,
    MLP_SPECS,
    TRANSFORMER_SPECS,
    assert_on_the_accelerator,
    mlp,
    requires_accelerator,
    requires_tpu,
    transformer,
)
from jax2onnx import Verify, to_onnx, verify

pytestmark = requires_accelerator

MODELS = {"mlp": (mlp, MLP_SPECS), "transformer": (transformer, TRANSFORMER_SPECS)}


@pytest.mark.parametrize("name", list(MODELS))
def test_verify_true_passes_for_parameters_on_the_accelerator(name):
    build, specs = MODELS[name]
    model = build()
    assert_on_the_accelerator(model)
    exported = to_onnx(model, specs, verify=True)  # raises VerificationError on a mismatch
    report = verify(model, exported, specs)
    assert report.ok, report.failures()
    device = jax.devices()[0]
    assert report.reference.platform == BACKEND and report.reference.device_kind == device.device_kind
    assert report.reference.matmul_precision == "highest"
    print(f"{name}: {report.reference}; worst abs error {max(o.max_abs_error for o in report.worst()):.3g}")


@pytest.mark.parametrize("name", list(MODELS))
def test_the_accelerators_default_numbers_pass_with_their_own_tolerances(name):
    build, specs = MODELS[name]
    model = build()
    exported = to_onnx(model, specs, verify=Verify(reference="accelerator-default"))
    report = verify(model, exported, specs, reference="accelerator-default")
    assert report.ok, report.failures()
    assert report.reference.matmul_precision == str(jax.config.jax_default_matmul_precision or "default")
    print(f"{name} at the accelerator's default: worst abs error {max(o.max_abs_error for o in report.worst()):.3g}")


@requires_tpu
def test_float32_tolerances_against_the_tpus_default_fail_as_a_precision_effect():
    """The issue's report: 49/50 elements outside rtol=1e-4 against the TPU's default precision.
    Asked for exactly that comparison, the report says it is precision, not a lowering."""
    model = mlp()
    exported = to_onnx(model, MLP_SPECS)
    report = verify(model, exported, MLP_SPECS, reference="accelerator-default", rtol=1e-4, atol=1e-5)
    assert not report.ok
    assert report.recheck is not None and report.recheck.ok, report.recheck
    assert "precision effect, not a lowering" in str(report)
