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
import pytest
from jax2onnx import to_onnx
from jax2onnx.export.lowering import lower
from jax2onnx.export.optimize import optimize
from jax2onnx.export.options import Export, ExportOptions, OptionTypeError
from jax2onnx.export.trace import Traced, trace
from jax2onnx.export.write import Artifact, write

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def _fn(x):
    return jnp.transpose(x @ W)


def test_export_options_hold_every_argument_of_to_onnx_with_its_default():
    params = [(p.name, p.default) for p in list(inspect.signature(to_onnx).parameters.values())[2:]]  # not fn, inputs
    assert [name for name, _ in params] == [f.name for f in dataclasses.fields(ExportOptions)]
    checked = [(p.name, p.default) for p in inspect.signature(ExportOptions.check).parameters.values()][1:]
    assert checked == params  # check() takes each argument with to_onnx's default (after `inputs`)
    assert ExportOptions.check(inputs=[]) == ExportOptions()  # ... and normalizes it to the field's default


def test_export_options_are_checked_once_and_frozen():
    options = ExportOptions.check(inputs=[(2, 4)], opset=18, input_names=["x"], inputs_as_nchw=None)
    assert (options.opset, options.input_names, options.inputs_as_nchw) == (18, ("x",), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.opset = 19  # type: ignore[misc]
    with pytest.raises(OptionTypeError, match="verify must be True or False"):
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


def test_only_front_doors_look_up_the_global_registry():
    root = pathlib.Path(jax2onnx.__file__).parent
    front_doors = {"export/conversion.py", "lower/registry.py", "cli/commands.py", "cli/coverage.py",
                   "testing/pytest_plugin.py"}
    users = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Name) and n.id == "get_registry" for n in ast.walk(tree)):
            users.add(path.relative_to(root).as_posix())
    assert users and users <= front_doors, sorted(users - front_doors)
