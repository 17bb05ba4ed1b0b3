"""The JAX reference of every comparison (``verify=True``, ``jax2onnx.verify``, ``allclose``): at
highest matmul precision by default, named in the report with its device, scoped to the reference
call; ``Verify(reference="accelerator-default")`` and the precision-effect recheck (issue #34).

The CPU computes float32 matmuls in float32 at any ``default_matmul_precision`` (checked below), so
an accelerator's default is simulated: ``_matmul`` rounds its operands to bfloat16, as a TPU's
one-pass matmul does, when the config says ``"bfloat16"``; the ``simulated_accelerator`` fixture
makes the reference's ``"accelerator-default"`` scope set that config (on a TPU the device does
it by itself; tests/accelerator runs the same checks there)."""

from __future__ import annotations

import contextlib
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx import Verify, allclose, to_onnx, verify
from jax2onnx.errors import InputSpecError
from jax2onnx.verification import compare as compare_module
from jax2onnx.verification import reference as references
from jax2onnx.verification.report import VerificationError

_rng = np.random.default_rng(0)
W1 = (_rng.standard_normal((30, 64)) * 0.3).astype(np.float32)
W2 = (_rng.standard_normal((64, 10)) * 0.3).astype(np.float32)
SPECS = [("B", 30)]
#: the dtype a simulated accelerator rounds matmul operands to at its default precision
_ROUNDING = {"dtype": jnp.bfloat16}


def _matmul(a, b):
    if jax.config.jax_default_matmul_precision == "bfloat16":  # the simulated accelerator's default
        a, b = a.astype(_ROUNDING["dtype"]).astype(a.dtype), b.astype(_ROUNDING["dtype"]).astype(b.dtype)
    return a @ b


def mlp(x):
    return _matmul(jnp.sin(_matmul(x, W1)), W2)


@pytest.fixture
def simulated_accelerator(monkeypatch):
    """The reference's accelerator-default scope runs at the simulated device's bfloat16 passes."""
    original = references.precision_scope

    @contextlib.contextmanager
    def scope(reference):
        if reference == references.ACCELERATOR_DEFAULT:
            with jax.default_matmul_precision("bfloat16"):
                yield
        else:
            with original(reference):
                yield

    monkeypatch.setattr(compare_module, "precision_scope", scope)
    return _ROUNDING


def test_the_cpu_ignores_the_matmul_precision_config_so_tests_simulate_it():
    x = np.asarray(_rng.standard_normal((8, 256)), np.float32)
    w = np.asarray(_rng.standard_normal((256, 8)), np.float32)
    with jax.default_matmul_precision("bfloat16"):
        low = np.asarray(jax.jit(lambda a, b: a @ b)(x, w))
    exact = np.asarray(jax.jit(lambda a, b: a @ b)(x, w))
    if jax.default_backend() == "cpu":
        np.testing.assert_array_equal(low, exact)
    rounded = x.astype(jnp.bfloat16).astype(np.float32) @ w.astype(jnp.bfloat16).astype(np.float32)
    assert np.abs(rounded - exact).max() > 1e-3  # what a TPU's default does, and the simulation


def test_reference_runs_at_highest_precision_and_the_report_names_device_and_precision(mini_registry):
    seen = []

    def fn(x):
        seen.append(jax.config.jax_default_matmul_precision)
        return mlp(x)

    model = to_onnx(mlp, SPECS)
    report = verify(fn, model, SPECS)
    assert report.ok, report.failures()
    assert seen and set(seen) == {"highest"}  # every trial's reference trace
    assert jax.config.jax_default_matmul_precision is None  # restored after the call
    info = report.reference
    assert info.platform == jax.devices()[0].platform and info.device_kind == jax.devices()[0].device_kind
    assert info.devices == 1 and info.matmul_precision == "highest"
    assert report.to_dict()["reference"] == {"platform": info.platform, "device_kind": info.device_kind,
                                             "devices": 1, "matmul_precision": "highest"}
    assert f"reference: JAX on {info.platform}" in str(report) and "matmul precision highest" in report.to_markdown()


def test_default_verify_passes_where_the_accelerator_default_would_fail(mini_registry, simulated_accelerator):
    """Issue #34's case: the exported graph is right; the accelerator's default numbers differ by
    bfloat16 passes. The default reference (highest) matches; against the accelerator's default
    float32's tolerances fail, and the report's recheck says it is precision."""
    model = to_onnx(mlp, SPECS, verify=True)  # passes: highest precision
    strict = verify(mlp, model, SPECS, reference="accelerator-default", rtol=1e-4, atol=1e-5)
    assert not strict.ok
    assert max(o.mismatches for o in strict.worst()) > 0
    assert strict.recheck is not None and strict.recheck.ok
    assert "precision effect, not a lowering" in str(strict)
    assert strict.to_dict()["recheck"]["ok"] is True


def test_accelerator_default_reference_uses_tolerances_that_fit_bfloat16_passes(mini_registry, simulated_accelerator):
    model = to_onnx(mlp, SPECS, verify=Verify(reference="accelerator-default"))  # passes within its tolerances
    report = verify(mlp, model, SPECS, reference="accelerator-default")
    assert report.ok and report.recheck is None
    worst = report.worst()[0]
    assert worst.max_abs_error > 1e-4  # the bfloat16 passes are there, and tolerated
    rms = np.sqrt(np.mean(np.asarray(jax.jit(mlp)(np.ones((5, 30), np.float32))) ** 2))
    assert worst.rtol == references.ACCELERATOR_TOLERANCES["float32"][0] and worst.atol > 1e-5 and rms > 0


def test_to_onnx_names_a_precision_effect_instead_of_blaming_a_lowering(mini_registry, simulated_accelerator):
    simulated_accelerator["dtype"] = jnp.float8_e5m2  # a coarser default than any tolerance allows
    with pytest.raises(VerificationError) as caught:
        to_onnx(mlp, SPECS, verify=Verify(reference="accelerator-default"))
    message = str(caught.value)
    assert "This is a precision effect, not a lowering" in message
    assert "A lowering computes something else" not in message
    assert "matmul precision" in message and caught.value.report.recheck.ok


def test_a_real_lowering_bug_is_still_blamed_on_the_lowering(wrong_registry_for_reference):
    with pytest.raises(VerificationError) as caught:
        to_onnx(mlp, SPECS, verify=Verify(reference="accelerator-default"))
    message = str(caught.value)
    assert "too, so this is not only precision" in message
    assert "A lowering computes something else than JAX here" in message
    with pytest.raises(VerificationError, match="Reference: JAX on .* matmul precision highest"):
        to_onnx(mlp, SPECS, verify=True)


@pytest.fixture
def wrong_registry_for_reference():
    from jax2onnx.plugin import Lowerings
    from mini_pack import MiniPack, pack_of, registry_in_use

    wrong = Lowerings()

    @wrong.register("sin", priority=1)  # a lowering bug: Cos where JAX computes sin
    def _sin_as_cos(ctx, x):
        return ctx.op.Cos(x)

    with registry_in_use(("jax2onnx-mini", MiniPack()), ("jax2onnx-wrong", pack_of(wrong))) as registry:
        yield registry


def test_allclose_and_compare_take_the_reference_and_name_it(mini_registry, simulated_accelerator, tmp_path):
    path = to_onnx(mlp, SPECS, return_mode="file", output_path=str(tmp_path / "m.onnx"))
    x = [np.asarray(_rng.standard_normal((4, 30)), np.float32)]
    ok, message = allclose(mlp, path, x, rtol=1e-4, atol=1e-5)
    assert ok and "matmul precision highest" in message
    result = allclose(mlp, path, x, rtol=1e-4, atol=1e-5, reference="accelerator-default")
    assert not result and "precision effect, not a lowering" in result.message
    assert result.comparison.recheck.ok and result.comparison.reference.matmul_precision == "default"


def test_the_precision_scope_is_restored_on_error_and_stays_in_its_thread():
    with pytest.raises(ZeroDivisionError), references.precision_scope("highest"):
        assert jax.config.jax_default_matmul_precision == "highest"
        1 / 0  # noqa: B018
    assert jax.config.jax_default_matmul_precision is None

    entered, release, seen = threading.Event(), threading.Event(), []

    def inside():
        with references.precision_scope("highest"):
            seen.append(jax.config.jax_default_matmul_precision)
            entered.set()
            release.wait(10)

    worker = threading.Thread(target=inside)
    worker.start()
    assert entered.wait(10)
    try:
        assert jax.config.jax_default_matmul_precision is None  # this thread is untouched
    finally:
        release.set()
        worker.join()
    assert seen == ["highest"]


def test_a_reference_that_raises_leaves_the_config_as_it_was(mini_registry):
    model = to_onnx(mlp, SPECS)

    def broken(x):
        raise RuntimeError("the model's own bug")

    with pytest.raises(RuntimeError, match="the model's own bug"):
        verify(broken, model, SPECS)
    assert jax.config.jax_default_matmul_precision is None


def test_bad_reference_names_the_choices(mini_registry):
    with pytest.raises(InputSpecError, match="'highest' .* or 'accelerator-default'"):
        Verify(reference="fast")
    model = to_onnx(mlp, SPECS)
    with pytest.raises(InputSpecError, match="reference='bf16' is not a reference"):
        verify(mlp, model, SPECS, reference="bf16")
    with pytest.raises(TypeError, match="GreedyCheck"):
        Verify(greedy="logits")
    assert Verify(reference=" Accelerator-Default ").reference == "accelerator-default"


def test_accelerator_tolerance_scales_with_the_output_and_leaves_other_dtypes():
    big = np.full((4,), 100.0)
    rtol, atol = references.tolerance("accelerator-default", "float32", (1e-4, 1e-5), big)
    assert rtol == 2e-2 and atol == pytest.approx(5.0)
    assert references.tolerance("accelerator-default", "float64", (1e-7, 1e-9), big) == (1e-7, 1e-9)
    assert references.tolerance("highest", "float32", (1e-4, 1e-5), big) == (1e-4, 1e-5)


def test_a_highest_reference_on_a_tpu_allows_its_approximate_transcendentals():
    """Measured on a TPU v5e: float32 tanh/log there are 8e-5/4e-4 relative off (matmuls at
    highest 1e-7), so a reference that ran on a TPU widens float32's tolerances; CPU and GPU
    references keep them, and other dtypes are untouched."""
    ones = np.ones((4,))
    assert references.tolerance("highest", "float32", (1e-4, 1e-5), ones, "tpu") == (1e-3, pytest.approx(1e-4))
    assert references.tolerance("highest", "float32", (1e-4, 1e-5), 100 * ones, "tpu")[1] == pytest.approx(1e-2)
    for platform in ("cpu", "gpu", None):
        assert references.tolerance("highest", "float32", (1e-4, 1e-5), ones, platform) == (1e-4, 1e-5)
    assert references.tolerance("highest", "float64", (1e-7, 1e-9), ones, "tpu") == (1e-7, 1e-9)


def test_a_matmul_pinned_below_float32_is_named_when_the_reference_ran_on_an_accelerator(mini_registry):
    """The highest-precision context reaches only matmuls that leave precision= unset: a mismatch of
    a function that pins Precision.DEFAULT on a TPU is named as that, not only as a lowering."""
    from types import SimpleNamespace

    from jax2onnx.export.verify import pinned_matmul_precisions, raise_if_failed
    from jax2onnx.verification.report import ExportReport, OutputCheck, Trial, summarize

    def pinned(x):
        return jnp.dot(jnp.sin(jnp.dot(x, W1, precision=jax.lax.Precision.DEFAULT)), W2, precision="highest")

    x = np.ones((2, 30), np.float32)
    closed = jax.make_jaxpr(jax.jit(pinned))(x)  # inside a nested jit body too
    assert pinned_matmul_precisions(closed) == ["dot_general DEFAULT"]
    assert pinned_matmul_precisions(jax.make_jaxpr(mlp)(x)) == []
    summary = summarize(to_onnx(pinned, SPECS))
    failing = [Trial({"x": [2, 30]}, [OutputCheck("output", [2, 10], "float32", 0.1, 0.1, 3, 20, 1e-4, 1e-5)])]
    on_tpu = ExportReport(failing, summary, reference=references.ReferenceInfo("tpu", "TPU v5 lite", 1, "highest"))
    with pytest.raises(VerificationError, match=r"pins a matmul precision itself \(dot_general DEFAULT\).* on tpu"):
        raise_if_failed(on_tpu, SimpleNamespace(path=None), SimpleNamespace(closed=closed, n_plain=1))
    on_cpu = ExportReport(failing, summary, reference=references.ReferenceInfo("cpu", "cpu", 1, "highest"))
    with pytest.raises(VerificationError) as caught:  # the CPU multiplies float32 in float32 whatever is pinned
        raise_if_failed(on_cpu, SimpleNamespace(path=None), SimpleNamespace(closed=closed, n_plain=1))
    assert "pins" not in str(caught.value) and "A lowering computes something else" in str(caught.value)
