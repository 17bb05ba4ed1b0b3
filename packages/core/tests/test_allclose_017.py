"""``allclose`` / ``allclose_onnxruntime_web`` keep the published jax2onnx 0.17.1's signatures and
``(bool, str)`` results: 0.17-style calls (tuple unpacking, sampled shape tuples, positional
tolerances, the keyword-only flags) run unchanged."""

from __future__ import annotations

import inspect
import os
import shutil

import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx import allclose, allclose_onnxruntime_web, to_onnx
from jax2onnx.errors import InputSpecError
from jax2onnx.export.allclose_compat import AllcloseResult, sample_inputs
from jax2onnx.targets.web.runner import WEB_RUNNER
from jax2onnx.verification.compare import Comparison

#: Read from the published 0.17.1 wheel (jax2onnx/user_interface.py): (name, kind, default).
ALLCLOSE_0_17_1 = [
    ("fn", "POSITIONAL_OR_KEYWORD", "<required>"),
    ("onnx_model_path", "POSITIONAL_OR_KEYWORD", "<required>"),
    ("inputs", "POSITIONAL_OR_KEYWORD", "<required>"),
    ("input_params", "POSITIONAL_OR_KEYWORD", None),
    ("rtol", "POSITIONAL_OR_KEYWORD", 1e-3),
    ("atol", "POSITIONAL_OR_KEYWORD", 1e-5),
    ("enable_double_precision", "KEYWORD_ONLY", False),
    ("inputs_as_nchw", "KEYWORD_ONLY", None),
    ("outputs_as_nchw", "KEYWORD_ONLY", None),
]
ALLCLOSE_WEB_0_17_1 = [
    ("onnx_model_path", "POSITIONAL_OR_KEYWORD", "<required>"),
    ("inputs", "POSITIONAL_OR_KEYWORD", "<required>"),
    ("input_params", "POSITIONAL_OR_KEYWORD", None),
    ("rtol", "POSITIONAL_OR_KEYWORD", 1e-3),
    ("atol", "POSITIONAL_OR_KEYWORD", 1e-5),
    ("inputs_as_nchw", "KEYWORD_ONLY", None),
    ("node_command", "KEYWORD_ONLY", "node"),
    ("runner", "KEYWORD_ONLY", None),
]


def _signature(fn):
    return [(p.name, p.kind.name, "<required>" if p.default is p.empty else p.default)
            for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize(("fn", "recorded"), [(allclose, ALLCLOSE_0_17_1), (allclose_onnxruntime_web, ALLCLOSE_WEB_0_17_1)])
def test_signature_matches_0_17_1(fn, recorded):
    ours = _signature(fn)
    assert ours[: len(recorded)] == recorded
    for name, kind, default in ours[len(recorded):]:  # our additions change no 0.17 call
        assert kind == "KEYWORD_ONLY" and default != "<required>", name


def _sin(x):
    return jnp.sin(x)


@pytest.fixture
def sin_model(mini_registry, tmp_path):
    return to_onnx(_sin, inputs=[("B", 10)], return_mode="file", output_path=str(tmp_path / "my_model.onnx"))


def test_0_17_docstring_example_unpacks_a_tuple_and_samples_shapes(sin_model):
    is_match, msg = allclose(_sin, sin_model, inputs=[(5, 10)], atol=1e-5)
    assert is_match is True and isinstance(msg, str) and "match" in msg


def test_positional_tolerances_and_params(sin_model):
    x = np.linspace(-3, 3, 20, dtype=np.float32).reshape(2, 10)
    result = allclose(_sin, sin_model, [x], None, 1e-3, 1e-5)
    assert isinstance(result, tuple) and len(result) == 2 and result[0] is True


def test_a_mismatch_is_false_and_says_by_how_much(sin_model):
    x = np.full((3, 10), 0.5, np.float32)
    is_match, msg = allclose(lambda v: jnp.sin(v) + 0.25, sin_model, [x])
    assert is_match is False and "0.25" in msg and "output 0" in msg


def test_result_is_falsy_on_mismatch_so_assert_allclose_checks(sin_model):
    x = np.full((3, 10), 0.5, np.float32)
    bad = allclose(lambda v: jnp.cos(v), sin_model, [x])
    good = allclose(_sin, sin_model, [x])
    assert not bad and good
    assert isinstance(good, AllcloseResult) and isinstance(good.comparison, Comparison)
    assert good == (True, good.message) and good.is_match


def test_symbolic_dims_in_shape_tuples_are_sampled():
    (a, b) = sample_inputs([("B", 3), (4,)])
    assert a.shape == (2, 3) and b.shape == (4,) and a.dtype == np.float32
    (c,) = sample_inputs([(2, 2)], double=True)
    assert c.dtype == np.float64


def test_nchw_flags_feed_and_read_the_model_in_nchw(mini_registry, tmp_path):
    def nhwc(x):
        return jnp.sin(x) * 2.0

    path = to_onnx(nhwc, [(1, 4, 5, 3)], inputs_as_nchw=[0], outputs_as_nchw=[0], return_mode="file",
                   output_path=str(tmp_path / "nchw.onnx"))
    x = np.random.default_rng(0).random((1, 4, 5, 3)).astype(np.float32)
    is_match, msg = allclose(nhwc, path, [x], inputs_as_nchw=[0], outputs_as_nchw=[0])
    assert is_match, msg
    # without the flags the NHWC array does not fit the NCHW graph input
    with pytest.raises(Exception, match="(?i)dimension|shape|invalid"):
        allclose(nhwc, path, [x])


def test_double_precision_flag(mini_registry, tmp_path):
    path = to_onnx(lambda x: x * 3.0, [(2, 3)], enable_double_precision=True, return_mode="file",
                   output_path=str(tmp_path / "f64.onnx"))
    is_match, msg = allclose(lambda x: x * 3.0, path, [(2, 3)], enable_double_precision=True)
    assert is_match, msg


def test_inputs_none_names_the_argument(sin_model):
    with pytest.raises(InputSpecError, match="inputs must be a list"):
        allclose(_sin, sin_model, None)


def test_web_says_what_is_missing(sin_model, tmp_path):
    is_match, msg = allclose_onnxruntime_web(sin_model, [(5, 10)], node_modules=str(tmp_path))
    if shutil.which("node") is None:
        assert is_match is False and "Node.js" in msg
    else:
        assert is_match is False and "npm install onnxruntime-web" in msg
    is_match, msg = allclose_onnxruntime_web(sin_model, [(5, 10)], runner="chrome")
    assert is_match is False and "runner='node'" in msg


WEB_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "web")


def test_the_web_runner_is_where_allclose_runs_it():
    """The Node.js script allclose_onnxruntime_web starts is a file core ships (checked whether or
    not onnxruntime-web is installed: a moved script fails here, not only where npm ran)."""
    assert os.path.isfile(WEB_RUNNER), WEB_RUNNER
    with open(WEB_RUNNER, encoding="utf-8") as f:
        assert "onnxruntime-web" in f.read()


@pytest.mark.skipif(shutil.which("node") is None or not os.path.isdir(os.path.join(WEB_DIR, "node_modules", "onnxruntime-web")),
                    reason="needs Node.js and `npm ci --prefix tests/web` (nox -s web)")
def test_web_runs_the_model_in_onnxruntime_web(mini_registry, tmp_path):
    path = str(tmp_path / "web.onnx")
    to_onnx(_sin, [("B", 10)], export_mode="web", output_path=path)
    is_match, msg = allclose_onnxruntime_web(path, [(5, 10)], None, 1e-5, 1e-5, node_modules=WEB_DIR)
    assert is_match, msg
    assert "onnxruntime-web" in msg


#: 0.17.1's onnx_function (user_interface.py).
ONNX_FUNCTION_0_17_1 = [
    ("target", "POSITIONAL_OR_KEYWORD", None),
    ("unique", "KEYWORD_ONLY", False),
    ("namespace", "KEYWORD_ONLY", None),
    ("name", "KEYWORD_ONLY", None),
    ("type", "KEYWORD_ONLY", None),
]


def test_onnx_function_signature_matches_0_17_1():
    from jax2onnx import onnx_function

    assert _signature(onnx_function) == ONNX_FUNCTION_0_17_1


def test_onnx_function_0_17_keywords(mini_registry):
    from jax2onnx import onnx_function

    @onnx_function(unique=True, namespace="custom", name="ignored", type="ScaledSin")
    def block(x):
        return jnp.sin(x) * 2.0

    model = to_onnx(lambda x: block(block(x)), [(3,)])
    assert [f.name for f in model.functions] == ["ScaledSin"]  # type= wins over name=, as in 0.17
    assert [n.op_type for n in model.graph.node] == ["ScaledSin", "ScaledSin"]
    with pytest.raises(InputSpecError, match="'custom' domain only"):
        onnx_function(namespace="my.domain")
