"""equinox's error checks follow EQX_ON_ERROR: ``nan`` becomes a graph computation matching JAX,
``off`` leaves nothing, ``raise``/``breakpoint`` are dropped with a warning naming the check (ONNX can
neither raise nor break); trace-time-known failures still raise."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax2onnx import compat, to_onnx
from jax2onnx_eqx.internals import DroppedCheckWarning


def _run(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {model.graph.input[0].name: x})


def _dropped_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, DroppedCheckWarning)]


def test_a_check_that_fails_at_trace_time_raises_at_export():
    def f(x):
        return eqx.error_if(x, True, "the model was configured wrongly")  # a static predicate

    with pytest.raises(Exception, match="the model was configured wrongly"):
        to_onnx(f, [(3,)])


def test_a_runtime_check_is_dropped_with_a_warning_and_the_graph_returns_the_unchecked_value():
    def f(x):
        return eqx.error_if(x * 2.0, x < 0, "negative input")

    with pytest.warns(DroppedCheckWarning, match="'negative input' dropped .*EQX_ON_ERROR=raise"):
        model = to_onnx(f, [("B", 3)])
    assert [n.op_type for n in model.graph.node] == ["Mul"]
    x = np.array([[-1.0, 2.0, 3.0]], dtype=np.float32)  # would fail the check in JAX
    np.testing.assert_array_equal(_run(model, x)[0], x * 2.0)
    # JAX itself still checks (the export replaces nothing of equinox).
    with pytest.raises(Exception, match="negative input"):
        eqx.filter_jit(f)(jnp.asarray(x))


def test_the_warning_is_once_per_check_and_export():
    def f(x):
        x = eqx.error_if(x, x < 0, "negative input")
        x = eqx.error_if(x + 1.0, x < 0, "negative input")  # the same check again
        return eqx.error_if(x, x > 100.0, "too large")

    for _ in range(2):  # and again at the next export
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            to_onnx(f, [("B", 3)])
        dropped = _dropped_warnings(record)
        assert len(dropped) == 2, dropped
        assert "'negative input'" in dropped[0] and "'too large'" in dropped[1], dropped


def test_a_check_traced_before_the_export_is_dropped_with_the_same_warning():
    """A jaxpr made outside the export (equinox's cond with its raising callbacks), replayed inside
    it: the cond lowering drops the check with the patch's warning."""
    from jax.extend.core import jaxpr_as_fun

    closed = jax.make_jaxpr(lambda x: eqx.error_if(x * 3.0, x < 0, "traced before"))(jnp.ones((7, 2), jnp.float32))
    replay = jaxpr_as_fun(closed)

    with pytest.warns(DroppedCheckWarning, match="'traced before' dropped"):
        model = to_onnx(lambda x: replay(x)[0], [(7, 2)])
    assert "If" not in {n.op_type for n in model.graph.node}
    x = -np.ones((7, 2), np.float32)
    np.testing.assert_array_equal(_run(model, x)[0], x * 3.0)


def test_a_jit_the_user_ran_before_is_traced_again_with_the_check_seen():
    """JAX caches a jit's jaxpr; the export traces apart from the user's cache (core's
    compat.export_trace_context), so a function run before the export is traced again under the
    patch, not replayed from JAX's cache."""
    checked = jax.jit(lambda x: eqx.error_if(x * 3.0, x < 0, "run before"))
    checked(jnp.ones((5, 2), jnp.float32))

    with pytest.warns(DroppedCheckWarning, match="'run before' dropped"):
        model = to_onnx(checked, [(5, 2)])
    assert "If" not in {n.op_type for n in model.graph.node}


def _skip_unless_jax_traces(f, shape, mode):
    """The floor cell pairs equinox's and JAX's oldest versions, some of which cannot trace a mode at
    all (breakpoint mode's jax.pure_callback(vectorized=...) on JAX >= 0.6): nothing to export then."""
    try:
        jax.make_jaxpr(f)(jnp.ones(shape, jnp.float32))
    except Exception as exc:  # noqa: BLE001 - any refusal of JAX itself
        pytest.skip(f"equinox {eqx.__version__} with JAX {jax.__version__} cannot trace EQX_ON_ERROR={mode} "
                    f"itself: {type(exc).__name__}: {str(exc)[:120]}")


def test_breakpoint_mode_is_dropped_with_a_warning(monkeypatch):
    monkeypatch.setattr("equinox._errors.EQX_ON_ERROR", "breakpoint")

    def f(x):
        return eqx.error_if(x - 1.0, x < 0, "negative in breakpoint mode")

    _skip_unless_jax_traces(f, (4,), "breakpoint")
    with pytest.warns(DroppedCheckWarning, match="negative in breakpoint mode.*open a debugger"):
        model = to_onnx(f, [(4,)])
    assert [n.op_type for n in model.graph.node] == ["Sub"]


def test_off_mode_leaves_no_check_and_no_warning(monkeypatch):
    monkeypatch.setattr("equinox._errors.EQX_ON_ERROR", "off")

    def f(x):
        return eqx.error_if(x * 2.0, x < 0, "switched off")

    _skip_unless_jax_traces(f, (2, 3), "off")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = to_onnx(f, [("B", 3)])
    assert not _dropped_warnings(record)
    assert [n.op_type for n in model.graph.node] == ["Mul"]


@pytest.mark.parametrize("double", [False, True])
def test_nan_mode_is_a_graph_computation_matching_jax(monkeypatch, double):
    """EQX_ON_ERROR=nan (read by equinox at import into equinox._errors): the check returns NaN
    (integers: their maximum) where the predicate holds anywhere; JAX and the graph agree on both
    sides of it, and nothing is dropped."""
    monkeypatch.setattr("equinox._errors.EQX_ON_ERROR", "nan")

    def f(x, n):
        y = eqx.error_if(jnp.sin(x) * 2.0, jnp.any(x < 0), "negative input")
        k = eqx.branched_error_if(n + 1, n > 5, jnp.int32(0), ["n out of range"])
        return y, k

    with compat.x64_enabled(double):
        ftype = np.float64 if double else np.float32
        specs = [jax.ShapeDtypeStruct((11, 3), ftype), jax.ShapeDtypeStruct((11,), np.int32)]
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            model = to_onnx(f, specs, enable_double_precision=double)
        assert not _dropped_warnings(record)
        onnx.checker.check_model(model, full_check=True)
        assert "If" in {n.op_type for n in model.graph.node}
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        passing = (rng.uniform(0.1, 1.0, (11, 3)).astype(ftype), np.arange(11, dtype=np.int32) % 5)
        failing = (-passing[0], passing[1] + 3)
        for x, n in (passing, failing):
            got = sess.run(None, {model.graph.input[0].name: x, model.graph.input[1].name: n})
            want = jax.jit(f)(x, n)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6, atol=1e-6)
        got_failing = sess.run(None, {model.graph.input[0].name: failing[0], model.graph.input[1].name: failing[1]})
        assert np.isnan(got_failing[0]).all() and (got_failing[1] == np.iinfo(np.int32).max).all()


@pytest.mark.parametrize("wrap", [jax.jit, eqx.filter_jit])
def test_exporting_leaves_the_users_jitted_function_checking(wrap):
    """The export traces with the check dropped; JAX's jit cache must not hand that trace to the
    user's own later calls of the same jitted function (core's compat.export_trace_context)."""
    f = wrap(lambda x: eqx.error_if(x * 2.0, x < 0, "negative after export"))
    with pytest.warns(DroppedCheckWarning):
        to_onnx(f, [(3,)])
    with pytest.raises(Exception, match="negative after export"):
        jax.block_until_ready(f(-jnp.ones(3, jnp.float32)))
