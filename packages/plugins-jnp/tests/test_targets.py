"""to_onnx(..., target=...) and the TensorRT lint (jax2onnx check --target tensorrt)."""

import inspect

import jax
import jax.numpy as jnp
import onnx
import pytest
from jax2onnx import to_onnx, verify
from jax2onnx.cli.commands import main as cli
from jax2onnx.errors import InputSpecError, Jax2OnnxError, TargetUnsupportedError
from jax2onnx.targets.tensorrt.lint import check_tensorrt, tensorrt_table
from onnx import helper


def _meta(model):
    return {p.key: p.value for p in model.metadata_props}


def test_tensorrt_refuses_rfft_in_one_line_naming_dft_and_tensorrt():
    with pytest.raises(TargetUnsupportedError) as info:
        to_onnx(lambda x: jnp.fft.rfft(x).real, [("B", 16)], target="tensorrt")
    text = str(info.value)
    assert "\n" not in text and "DFT" in text and "TensorRT" in text
    assert isinstance(info.value, Jax2OnnxError)


def test_tensorrt_refuses_float64_naming_the_primitive_and_the_users_line():
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(TargetUnsupportedError, match=rf"sin at .*test_targets.py:{line}.*float64.*TensorRT"):
        to_onnx(lambda x: jnp.sin(x), [("B", 4)], target="tensorrt", enable_double_precision=True)


def test_tensorrt_export_stays_within_the_parsers_table_and_matches_jax():
    def fn(x):
        return jax.nn.gelu(x @ jnp.ones((8, 8), x.dtype), approximate=False) + jnp.cumsum(x, axis=1)

    model = to_onnx(fn, [("B", 8)], target="tensorrt")
    opset = {o.domain: o.version for o in model.opset_import}[""]
    assert opset == tensorrt_table()["opset_max"]
    assert check_tensorrt(model) == []
    assert _meta(model)["jax2onnx:target"] == "tensorrt"
    report = verify(fn, model, [("B", 8)])
    assert report, report.failures()


def test_web_target_is_export_mode_web():
    model = to_onnx(lambda x: x * 3, [("B", 4)], target="web")
    assert _meta(model)["jax2onnx:target"] == "web"
    with pytest.raises(InputSpecError, match="self-contained"):
        to_onnx(lambda x: x * 3, [("B", 4)], target="web", external_data=True)
    assert _meta(to_onnx(lambda x: x * 3, [("B", 4)], export_mode="web"))["jax2onnx:target"] == "web"
    with pytest.raises(InputSpecError, match="export_mode='web'"):
        to_onnx(lambda x: x * 3, [("B", 4)], export_mode="web", target="onnxruntime")


def test_unknown_target_names_the_choices():
    with pytest.raises(InputSpecError, match="'onnx', 'onnxruntime', 'tensorrt', 'web'"):
        to_onnx(lambda x: x, [("B", 4)], target="tpu")


def _graph_model(nodes, inputs, outputs, opset=20, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_lint_finds_reductions_dynamic_scan_loops_custom_ops_and_float64():
    f = onnx.TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    scatter = helper.make_node("ScatterND", ["x", "i", "u"], ["s"], reduction="add", name="scatter")
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Identity", ["c"], ["scan"])],
                             "body", [vi("it", onnx.TensorProto.INT64, []), vi("cond", onnx.TensorProto.BOOL, []),
                                      vi("c", f, [2])], [vi("cond_out", onnx.TensorProto.BOOL, []), vi("c_out", f, [2]),
                                                        vi("scan", f, [2])])
    body.node.insert(0, helper.make_node("Identity", ["cond"], ["cond_out"]))
    loop = helper.make_node("Loop", ["n", "", "c0"], ["c_last", "scanned"], body=body, name="loop")
    custom = helper.make_node("FastGelu", ["y"], ["z"], domain="com.microsoft", name="fast")
    cast = helper.make_node("Cast", ["y"], ["d"], to=onnx.TensorProto.DOUBLE, name="to_double")
    model = _graph_model([scatter, loop, custom, cast],
                         [vi("x", f, [4]), vi("i", onnx.TensorProto.INT64, [1, 1]), vi("u", f, [1]),
                          vi("n", onnx.TensorProto.INT64, []), vi("c0", f, [2]), vi("y", f, [2])],
                         [vi("s", f, [4]), vi("c_last", f, [2]), vi("scanned", f, [None, 2]), vi("z", f, [2]),
                          vi("d", onnx.TensorProto.DOUBLE, [2])])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    found = {(x.op, x.node) for x in check_tensorrt(model)}
    assert found == {("ScatterND", "scatter"), ("Loop", "loop"), ("FastGelu", "fast"), ("Cast", "to_double")}


def test_check_command_lists_what_tensorrt_cannot_take(tmp_path, capsys):
    bad = tmp_path / "fft.onnx"
    onnx.save(to_onnx(lambda x: jnp.fft.rfft(x).real, [("B", 16)]), bad)
    assert cli(["check", "--target", "tensorrt", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "DFT" in out and "opset 23" in out
    good = tmp_path / "good.onnx"
    onnx.save(to_onnx(lambda x: jnp.tanh(x) * 2, [("B", 16)], opset=20), good)
    assert cli(["check", "--target", "tensorrt", str(good)]) == 0
    assert "nothing" in capsys.readouterr().out


def test_the_report_names_the_target_and_counts_the_rewrites():
    def gelu(x):  # jax.nn.gelu(x, approximate=False)'s arithmetic written out: the rewrite stage's to find
        return 0.5 * x * jax.lax.erfc(-x * jnp.sqrt(0.5).astype(x.dtype))

    def fn(x, y):  # two functions of x inside a larger one, and one of y
        return gelu(x) + jax.scipy.stats.norm.cdf(x) + gelu(y)

    model = to_onnx(fn, [("B", 8), ("B", 8)], target="onnxruntime")
    report = verify(fn, model, [("B", 8), ("B", 8)])
    assert report, report.failures()
    assert report.summary.target == "onnxruntime"
    assert report.summary.rewrites == {"gelu_exact": 2, "normal_cdf": 1}
    text = str(report)
    assert "target: onnxruntime" in text and "rewrites: gelu_exact 2, normal_cdf 1" in text
    assert "| target | onnxruntime |" in report.to_markdown()
    assert report.summary.to_dict()["rewrites"] == {"gelu_exact": 2, "normal_cdf": 1}
