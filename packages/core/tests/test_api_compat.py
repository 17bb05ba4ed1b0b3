"""``to_onnx`` is a drop-in for the published jax2onnx 0.17.1: same signature, each keyword works."""

from __future__ import annotations

import inspect
import json

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import allclose, to_onnx
from jax2onnx.errors import InputSpecError
from jax2onnx.export.api_compat import is_normalization_lowering

#: jax2onnx 0.17.1's ``to_onnx`` (user_interface.py, read from the published wheel):
#: (name, kind, default); "<required>" for no default.
SIGNATURE_0_17_1 = [
    ("fn", "POSITIONAL_OR_KEYWORD", "<required>"),
    ("inputs", "POSITIONAL_OR_KEYWORD", "<required>"),
    ("input_params", "POSITIONAL_OR_KEYWORD", None),
    ("model_name", "POSITIONAL_OR_KEYWORD", "jax_model"),
    ("opset", "POSITIONAL_OR_KEYWORD", 23),
    ("enable_double_precision", "KEYWORD_ONLY", False),
    ("record_primitive_calls_file", "KEYWORD_ONLY", None),
    ("return_mode", "KEYWORD_ONLY", "proto"),
    ("output_path", "KEYWORD_ONLY", None),
    ("inputs_as_nchw", "KEYWORD_ONLY", None),
    ("outputs_as_nchw", "KEYWORD_ONLY", None),
    ("input_names", "KEYWORD_ONLY", None),
    ("output_names", "KEYWORD_ONLY", None),
    ("export_mode", "KEYWORD_ONLY", "standard"),
    ("normalization_mode", "KEYWORD_ONLY", "auto"),
]


def test_signature_matches_0_17_1():
    params = list(inspect.signature(to_onnx).parameters.values())
    ours = [(p.name, p.kind.name, "<required>" if p.default is p.empty else p.default) for p in params]
    # 0.17's parameters come first, in order, with the same kinds and defaults ...
    assert ours[: len(SIGNATURE_0_17_1)] == SIGNATURE_0_17_1
    # ... and anything we add is keyword-only with a default, so no 0.17 call changes meaning.
    for name, kind, default in ours[len(SIGNATURE_0_17_1) :]:
        assert kind == "KEYWORD_ONLY" and default != "<required>", name


def _sin(x):
    return jnp.sin(x) * 2.0


def test_positional_order_is_fn_inputs_params_name_opset(mini_registry):
    model = to_onnx(_sin, [("B", 3)], None, "positional", 21)
    assert model.graph.name == "positional"
    assert next(o.version for o in model.opset_import if o.domain == "") == 21


def test_return_mode_proto_is_the_default(mini_registry):
    assert isinstance(to_onnx(_sin, [("B", 3)]), onnx.ModelProto)
    assert isinstance(to_onnx(_sin, [("B", 3)], return_mode="proto"), onnx.ModelProto)


def test_return_mode_ir(mini_registry):
    model = to_onnx(_sin, [("B", 3)], return_mode="ir")
    assert isinstance(model, ir.Model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    assert allclose(_sin, proto, [np.random.rand(4, 3).astype(np.float32)])


def test_return_mode_file_writes_and_returns_the_path(mini_registry, tmp_path):
    path = tmp_path / "sub" / "m.onnx"
    got = to_onnx(_sin, [("B", 3)], return_mode="file", output_path=path)
    assert got == str(path)
    loaded = onnx.load(got)
    assert allclose(_sin, loaded, [np.random.rand(2, 3).astype(np.float32)])


def test_return_mode_file_needs_a_path(mini_registry):
    with pytest.raises(InputSpecError, match="output_path"):
        to_onnx(_sin, [("B", 3)], return_mode="file")


def test_bad_return_mode_is_named(mini_registry):
    with pytest.raises(ValueError, match="return_mode='bytes'.*'proto', 'ir', 'file'"):
        to_onnx(_sin, [("B", 3)], return_mode="bytes")


def _two_in_two_out(x, y):
    return x + y, x * y


def test_input_and_output_names(mini_registry):
    model = to_onnx(_two_in_two_out, [("B", 3), ("B", 3)], input_names=["a:0", "b"], output_names=["sum", "prod"])
    assert [i.name for i in model.graph.input] == ["a:0", "b"]
    assert [o.name for o in model.graph.output] == ["sum", "prod"]
    onnx.checker.check_model(model, full_check=True)
    x, y = np.random.rand(2, 3).astype(np.float32), np.random.rand(2, 3).astype(np.float32)
    assert allclose(_two_in_two_out, model, [x, y])


def test_names_that_clash_with_internal_values_are_still_exact(mini_registry):
    # The default names ("x", "output_0") taken by other values: those are renamed, not the request.
    model = to_onnx(_two_in_two_out, [("B", 3), ("B", 3)], input_names=["output_0", "x"], output_names=["y", "x_"])
    assert [i.name for i in model.graph.input] == ["output_0", "x"]
    assert [o.name for o in model.graph.output] == ["y", "x_"]
    onnx.checker.check_model(model, full_check=True)


def test_an_output_that_is_an_input_gets_its_own_name(mini_registry):
    model = to_onnx(lambda x: (x, jnp.sin(x)), [(3,)], input_names=["inp"], output_names=["same", "sin"])
    assert [o.name for o in model.graph.output] == ["same", "sin"]
    onnx.checker.check_model(model, full_check=True)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"input_names": ["a"]}, "input_names has 1 name.*2 positional"),
        ({"input_names": ["a", "a"]}, "names 'a' twice"),
        ({"input_names": "ab"}, "list of strings"),
        ({"input_names": ["a", 3]}, r"input_names\[1\] must be a string"),
        ({"input_names": ["a", ""]}, "empty"),
        ({"output_names": ["s"]}, "output_names has 1 name.*returns 2 array"),
        ({"output_names": ["s", "p", "q"]}, "output_names has 3"),
        ({"input_names": ["a", "b"], "output_names": ["a", "p"]}, "both as an input and as an output"),
    ],
)
def test_io_name_mistakes_are_explained(mini_registry, kwargs, match):
    with pytest.raises(InputSpecError, match=match):
        to_onnx(_two_in_two_out, [("B", 3), ("B", 3)], **kwargs)


def test_io_names_colliding_with_input_params(mini_registry):
    def f(x, scale=1.0):
        return x * scale

    with pytest.raises(InputSpecError, match="collide with input_params"):
        to_onnx(f, [("B", 3)], input_params={"scale": 2.0}, input_names=["scale"])


_CHANNEL_SCALE = np.array([1.0, 2.0, 3.0], np.float32)


def _nhwc_fn(x):  # NHWC in, NHWC out; a per-channel scale makes a wrong layout visible
    return jnp.sin(x) * _CHANNEL_SCALE


def test_inputs_and_outputs_as_nchw(mini_registry):
    model = to_onnx(_nhwc_fn, [("B", 4, 5, 3)], inputs_as_nchw=[0], outputs_as_nchw=[0])
    dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["B", 3, 4, 5]
    x = np.random.rand(2, 4, 5, 3).astype(np.float32)
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {model.graph.input[0].name: x.transpose(0, 3, 1, 2)})
    np.testing.assert_allclose(y, np.asarray(_nhwc_fn(x)).transpose(0, 3, 1, 2), rtol=1e-6)


def test_inputs_as_nchw_alone(mini_registry):
    model = to_onnx(lambda x: jnp.sin(x), [(1, 4, 5, 3)], inputs_as_nchw=[0])
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    out = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, 4, 5] and out == [1, 4, 5, 3]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"inputs_as_nchw": [1]}, "inputs_as_nchw index 1 is out of range"),
        ({"inputs_as_nchw": [0, 0]}, "twice"),
        ({"inputs_as_nchw": ["0"]}, "must be ints"),
        ({"outputs_as_nchw": [2]}, "outputs_as_nchw index 2 is out of range"),
    ],
)
def test_layout_index_mistakes(mini_registry, kwargs, match):
    with pytest.raises(InputSpecError, match=match):
        to_onnx(_nhwc_fn, [(1, 4, 5, 3)], **kwargs)


def test_layout_on_a_non_image_is_explained(mini_registry):
    with pytest.raises(InputSpecError, match="inputs_as_nchw lists input 0, which has rank 2"):
        to_onnx(_sin, [("B", 3)], inputs_as_nchw=[0])
    with pytest.raises(InputSpecError, match="outputs_as_nchw lists output 0, which has rank 2"):
        to_onnx(_sin, [("B", 3)], outputs_as_nchw=[0])


def test_record_primitive_calls_file(mini_registry, tmp_path):
    path = tmp_path / "calls.json"

    def f(x):
        return jax.jit(jnp.sin)(x) * 2.0

    to_onnx(f, [("B", 3)], record_primitive_calls_file=str(path))
    records = json.loads(path.read_text())
    prims = [(r["primitive"], r["depth"]) for r in records]
    assert ("sin", 1) in prims and ("mul", 0) in prims  # nested bodies are walked
    sin = next(r for r in records if r["primitive"] == "sin")
    assert sin["inputs"][0]["shape"] == ["B", 3] and sin["inputs"][0]["dtype"] == "float32"


def test_export_mode_web_is_one_file(mini_registry, tmp_path):
    path = tmp_path / "web.onnx"
    w = np.random.rand(3, 600).astype(np.float32)  # above the sidecar threshold of some exporters
    f = lambda x: jnp.sin(x) @ w  # noqa: E731
    assert to_onnx(f, [("B", 3)], return_mode="file", output_path=path, export_mode="web") == str(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["web.onnx"]
    with pytest.raises(InputSpecError, match="self-contained"):
        to_onnx(f, [("B", 3)], output_path=path, export_mode="web", external_data=True)
    with pytest.raises(ValueError, match="export_mode='wasm'"):
        to_onnx(f, [("B", 3)], export_mode="wasm")


def test_normalization_mode_values(mini_registry):
    for mode in ("auto", "prefer_native", "force_decomposed", " AUTO "):
        assert isinstance(to_onnx(_sin, [("B", 3)], normalization_mode=mode), onnx.ModelProto)
    with pytest.raises(ValueError, match="normalization_mode='native'"):
        to_onnx(_sin, [("B", 3)], normalization_mode="native")


def test_which_lowerings_force_decomposed_drops():
    for name in ("call:jax2onnx_nnx.layer_norm", "call:jax2onnx_nnx.batch_norm", "call:jax2onnx_keras.group_norm",
                 "call:jax2onnx_jnp.standardize", "call:jax2onnx_keras.layer_normalization", "call:jax2onnx_nnx.instance_norm"):
        assert is_normalization_lowering(name), name
    for name in ("call:jax2onnx_nnx.linear", "call:jax2onnx_jnp.linalg_norm", "sin", "call:x.normal", "call:x.norm"):
        assert not is_normalization_lowering(name), name


@pytest.mark.parametrize("opset", [5, 12, 99])
def test_opset_out_of_range_names_the_range(mini_registry, opset):
    top = onnx.defs.onnx_opset_version()
    with pytest.raises(InputSpecError, match=rf"opset={opset} is not supported: jax2onnx exports opsets 13 to {top}") as info:
        to_onnx(_sin, [("B", 3)], opset=opset)
    if opset > top:
        assert "upgrade onnx" in str(info.value)


@pytest.mark.parametrize("opset", ["23", 23.0, True, None])
def test_opset_must_be_an_int(mini_registry, opset):
    with pytest.raises(InputSpecError, match="opset must be an int from 13"):
        to_onnx(_sin, [("B", 3)], opset=opset)


def test_every_opset_in_range_is_stamped(mini_registry):
    for opset in (17, onnx.defs.onnx_opset_version()):
        model = to_onnx(_sin, [("B", 3)], opset=np.int64(opset))
        assert next(o.version for o in model.opset_import if o.domain == "") == opset
        onnx.checker.check_model(model, full_check=True)


def test_bad_inputs_are_named_before_names_are_counted(mini_registry):
    with pytest.raises(InputSpecError, match="inputs must be a list of input specs"):
        to_onnx(_sin, "B,3", input_names=["x"])
