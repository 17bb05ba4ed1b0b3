"""``to_onnx`` is a front door over typed stages: every argument lives in ``ExportOptions``, the
stages run by hand give the same model, and only front doors look up the global registry."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib

import jax.numpy as jnp
import jax2onnx
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import to_onnx
from jax2onnx.errors import InputSpecError
from jax2onnx.export.lowering import lower
from jax2onnx.export.optimize import optimize
from jax2onnx.export.options import FRONT_END_OPTIONS, Export, ExportOptions, OptionTypeError
from jax2onnx.export.trace import Traced, trace
from jax2onnx.export.write import Artifact, write

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def _fn(x):
    return jnp.transpose(x @ W)


def test_export_options_hold_every_argument_of_to_onnx_with_its_default():
    params = [(p.name, p.default) for p in list(inspect.signature(to_onnx).parameters.values())[2:]]  # not fn, inputs
    fields = [f.name for f in dataclasses.fields(ExportOptions)]
    # to_onnx's arguments in order, then the front-end-only ones (set by export_causal_lm, not keywords)
    assert fields == [name for name, _ in params] + list(FRONT_END_OPTIONS)
    checked = [(p.name, p.default) for p in inspect.signature(ExportOptions.check).parameters.values()][1:]
    assert checked[:len(params)] == params  # check() takes each argument with to_onnx's default (after `inputs`)
    assert [name for name, _ in checked[len(params):]] == list(FRONT_END_OPTIONS)
    assert ExportOptions.check(inputs=[]) == ExportOptions()  # ... and normalizes it to the field's default


def test_export_options_are_checked_once_and_frozen():
    options = ExportOptions.check(inputs=[(2, 4)], opset=18, input_names=["x"], inputs_as_nchw=None)
    assert (options.opset, options.input_names, options.inputs_as_nchw) == (18, ("x",), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.opset = 19  # type: ignore[misc]
    with pytest.raises(OptionTypeError, match="verify must be True, False, a jax2onnx.Verify"):
        ExportOptions.check(inputs=[(2, 4)], verify="yes")
    # web: one self-contained file, decided here, not in the write stage
    assert ExportOptions.check(inputs=[(2, 4)], export_mode="web").external_data is False


def test_the_stages_by_hand_give_what_to_onnx_gives(mini_registry):
    export = Export(ExportOptions.check(inputs=[("B", 4)], output_names=["y"]), mini_registry)
    traced = trace(export, _fn, [("B", 4)])
    assert isinstance(traced, Traced) and traced.n_plain == 1
    model = optimize(export, lower(export, traced))
    artifact = write(export, model)
    assert isinstance(artifact, Artifact) and artifact.path is None and not artifact.external_data
    by_hand = artifact.result("proto")
    onnx.checker.check_model(by_hand, full_check=True)
    assert [o.name for o in by_hand.graph.output] == ["y"]
    whole = to_onnx(_fn, [("B", 4)], output_names=["y"])
    assert by_hand.SerializeToString() == whole.SerializeToString()


class _NegateOutput(ir.passes.InPlacePass):
    """A rewrite a front-end might plug in: the output negated (visibly changes the numbers)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        out = graph.outputs[0]
        neg = ir.node("Neg", [out])
        graph.append(neg)
        neg.outputs[0].name, neg.outputs[0].type, neg.outputs[0].shape = "negated", out.type, out.shape
        graph.outputs[0] = neg.outputs[0]
        return ir.passes.PassResult(model, True)


def test_a_front_ends_rewrite_pass_runs_in_the_rewrite_slot_before_names_and_validation(mini_registry):
    seen = []

    def factory(options):
        seen.append(options.target.name)
        return _NegateOutput()

    options = ExportOptions.check(inputs=[(2, 4)], output_names=["y"], rewrite_passes=[factory])
    assert options.rewrite_passes == (factory,)
    export = Export(options, mini_registry)
    traced = trace(export, _fn, [(2, 4)])
    proto = write(export, optimize(export, lower(export, traced))).result("proto")
    assert seen == ["onnx"]  # built from the checked options
    onnx.checker.check_model(proto, full_check=True)
    assert [o.name for o in proto.graph.output] == ["y"]  # the I/O names are applied after the rewrite
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    (got,) = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got, -np.asarray(_fn(x)), rtol=1e-5, atol=1e-5)


def test_rewrite_passes_and_external_data_file_are_checked_with_the_fix():
    with pytest.raises(OptionTypeError, match=r"rewrite_passes\[0\] must be a callable"):
        ExportOptions.check(inputs=[], rewrite_passes=[_NegateOutput()])  # a pass, not a factory
    with pytest.raises(OptionTypeError, match="rewrite_passes must be a list"):
        ExportOptions.check(inputs=[], rewrite_passes=_NegateOutput)
    with pytest.raises(InputSpecError, match="pass output_path"):
        ExportOptions.check(inputs=[], external_data_file="w.data")
    with pytest.raises(InputSpecError, match="plain file name"):
        ExportOptions.check(inputs=[], output_path="m.onnx", external_data_file="sub/w.data")
    with pytest.raises(InputSpecError, match="model file's own name"):
        ExportOptions.check(inputs=[], output_path="d/m.onnx", external_data_file="m.onnx")


def test_a_factory_that_returns_no_pass_is_named(mini_registry):
    export = Export(ExportOptions.check(inputs=[(2, 4)], rewrite_passes=[lambda options: None]), mini_registry)
    model = lower(export, trace(export, _fn, [(2, 4)]))
    with pytest.raises(InputSpecError, match="returned NoneType, not an onnx_ir pass"):
        optimize(export, model)


def test_external_data_file_names_the_weights_file(mini_registry, tmp_path):
    path = tmp_path / "model.onnx"
    options = ExportOptions.check(inputs=[(2, 4)], output_path=path, external_data=True, external_data_file="model.onnx.data")
    export = Export(options, mini_registry)
    big = np.ones((4, 512), np.float32)  # 8 KB: over the 1 KB below which a weight stays inline
    artifact = write(export, optimize(export, lower(export, trace(export, lambda x: x @ big, [(2, 4)]))))
    assert artifact.external_data and sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    locations = {e.value for t in artifact.proto.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"model.onnx.data"}


def test_only_front_doors_look_up_the_global_registry():
    root = pathlib.Path(jax2onnx.__file__).parent
    front_doors = {"export/program.py", "lower/registry.py", "cli/commands.py", "cli/coverage.py",
                   "testing/pytest_plugin.py"}
    users = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Name) and n.id == "get_registry" for n in ast.walk(tree)):
            users.add(path.relative_to(root).as_posix())
    assert users and users <= front_doors, sorted(users - front_doors)
