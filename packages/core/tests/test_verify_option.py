"""``to_onnx(..., verify=True)``: the export report run on the result; a mismatch is an error
naming the output and its error figures, a match returns the model as without ``verify``."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import MissingDependencyError, Weights, to_onnx
from jax2onnx.errors import InputSpecError
from jax2onnx.plugin import Lowerings
from jax2onnx.verification.report import VerificationError
from mini_pack import MiniPack, pack_of, registry_in_use


def _fn(x, w):
    return jnp.sin(x) @ w, (x * x).sum(axis=1)


SPECS = [("B", 4), (4, 3)]

_wrong = Lowerings()


@_wrong.register("sin", priority=1)  # outranks the mini pack's correct "sin"
def _sin_as_cos(ctx, x):
    return ctx.op.Cos(x)  # deliberately wrong: a lowering bug verify must catch


@pytest.fixture
def wrong_registry():
    with registry_in_use(("jax2onnx-mini", MiniPack()), ("jax2onnx-wrong", pack_of(_wrong))) as registry:
        yield registry


def test_verify_true_returns_the_same_model(mini_registry):
    plain = to_onnx(_fn, SPECS)
    verified = to_onnx(_fn, SPECS, verify=True)
    assert isinstance(verified, onnx.ModelProto)
    assert verified.SerializeToString() == plain.SerializeToString()


def test_verify_keeps_each_return_mode(mini_registry, tmp_path):
    assert isinstance(to_onnx(_fn, SPECS, return_mode="ir", verify=True), ir.Model)
    path = tmp_path / "m.onnx"
    assert to_onnx(_fn, SPECS, return_mode="file", output_path=path, verify=True) == str(path)
    assert path.exists()


def test_a_wrong_lowering_raises_naming_the_output_and_figures(wrong_registry):
    # Without verify the wrong model comes back silently: that is what verify=True is for.
    assert isinstance(to_onnx(_fn, SPECS, output_names=["proj", "energy"]), onnx.ModelProto)
    with pytest.raises(VerificationError) as info:
        to_onnx(_fn, SPECS, output_names=["proj", "energy"], verify=True)
    msg = str(info.value)
    assert "does not match" in msg and "output 'proj' (float32[5, 3])" in msg
    assert "max abs error" in msg and "max rel error" in msg and "rtol=0.0001" in msg
    assert "energy" not in msg  # x * x has no sin in it: that output matches and is not blamed
    assert "x[2, 4], w[4, 3]; x[5, 4], w[4, 3]" in msg  # the two sizes of the symbolic dim
    proj = next(o for o in info.value.report.worst() if o.name == "proj")
    assert proj.mismatches > 0 and proj.max_abs_error > 0.01


def test_a_failed_verification_keeps_the_written_file_and_says_so(wrong_registry, tmp_path):
    path = tmp_path / "m.onnx"
    with pytest.raises(VerificationError, match="kept for inspection") as info:
        to_onnx(_fn, SPECS, output_path=path, verify=True)
    assert str(path) in str(info.value) and path.exists()


def test_missing_onnxruntime_says_what_to_install_before_converting(core_only_registry, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    # core alone lowers nothing: an error about sin would mean the conversion ran first.
    with pytest.raises(MissingDependencyError, match=r"jax2onnx-core\[runtime\]") as info:
        to_onnx(_fn, SPECS, verify=True)
    assert "verify=True" in str(info.value)


def test_verify_must_be_a_bool_a_verify_or_a_greedy_check(mini_registry):
    with pytest.raises(InputSpecError, match="verify must be True, False, a jax2onnx.Verify"):
        to_onnx(_fn, SPECS, verify="yes")


def test_verify_sees_the_graph_layout_with_inputs_as_nchw(mini_registry):
    fn = lambda x: jnp.sin(x).sum(axis=-1)  # noqa: E731 - NHWC in, sums the channels
    model = to_onnx(fn, [("B", 4, 5, 3)], inputs_as_nchw=[0], verify=True)
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["B", 3, 4, 5]


def test_verify_with_weights_reads_them_for_the_jax_side(mini_registry, tmp_path):
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    abstract = {"w": jax.ShapeDtypeStruct((4, 3), jnp.float32)}
    fn = lambda params, x: jnp.sin(x @ params["w"])  # noqa: E731
    path = tmp_path / "w.onnx"
    to_onnx(fn, [Weights(abstract, {"w": w}), ("B", 4)], output_path=path, external_data=True, verify=True)
    # A source whose values change after the export read them: the file holds w, the JAX side
    # reads w + 1, so verification must fail (it compares against what the source holds now).
    export_reads = []
    to_onnx(fn, [Weights(abstract, lambda name: export_reads.append(name) or w), ("B", 4)], output_path=path,
            external_data=True)
    calls = []

    def drifting(name):
        calls.append(name)
        return w if len(calls) <= len(export_reads) else w + 1.0

    with pytest.raises(VerificationError, match="output 'output'"):
        to_onnx(fn, [Weights(abstract, drifting), ("B", 4)], output_path=path, external_data=True, verify=True)
    assert len(calls) == len(export_reads) + 1  # verify read the one leaf once more


def test_verify_with_python_number_input_params(mini_registry):
    # 0.5 is a float64 Python number; the graph input is float32: verify must feed it as such.
    fn = lambda x, *, scale=0.5: jnp.sin(x) * scale  # noqa: E731
    model = to_onnx(fn, [("B", 3)], input_params={"scale": 0.5}, verify=True)
    assert [i.name for i in model.graph.input] == ["x", "scale"]
