"""The public staged API (jax2onnx.ExportProgram): the stages one by one, each at most once, a pass
added in the rewrite slot, save/verify/summary on the result, and the same model as to_onnx."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import ExportProgram, InputSpecError, export_program, to_onnx

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def _fn(x):  # what the test-only mini pack lowers (core lowers nothing itself)
    return jnp.sin(x @ W) * 2.0


class _Rename(ir.passes.InPlacePass):
    """Marks the graph so the test can see it ran (and when: before the I/O names are applied)."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def call(self, model):
        self.seen.append([v.name for v in model.graph.outputs])
        model.metadata_props["test:rewrite_slot"] = "ran"
        return ir.passes.PassResult(model, False)


def test_stages_run_in_order_once_each_and_give_to_onnx_s_model(mini_registry, tmp_path):
    program = ExportProgram(_fn, [("B", 4)], output_names=["y"])
    assert program.traced is None and program.model is None and program.artifact is None
    program.trace()
    traced = program.traced
    assert traced is not None and program.model is None
    program.lower()
    lowered = program.model
    assert isinstance(lowered, ir.Model)
    program.optimize().optimize()  # a second call runs nothing
    assert program.traced is traced and program.model is lowered
    proto = program.model_proto
    onnx.checker.check_model(proto, full_check=True)
    reference = to_onnx(_fn, [("B", 4)], output_names=["y"])
    assert [n.op_type for n in proto.graph.node] == [n.op_type for n in reference.graph.node]
    report = program.verify()
    assert report, report.failures()
    saved = program.save(tmp_path / "m.onnx")
    assert onnx.load(saved).graph.output[0].name == "y"
    summary = program.summary()
    assert summary.target == "onnx"


def test_a_rewrite_slot_pass_runs_before_the_io_names(mini_registry):
    seen: list[list[str]] = []
    program = ExportProgram(_fn, [("B", 4)], output_names=["y"]).add_rewrite_pass(lambda options: _Rename(seen))
    proto = program.write().model_proto
    assert len(seen) == 1 and seen[0] != ["y"]  # the names came after it
    assert {p.key: p.value for p in proto.metadata_props}["test:rewrite_slot"] == "ran"
    with pytest.raises(RuntimeError, match="add it before optimize"):
        program.add_rewrite_pass(lambda options: _Rename(seen))


def test_export_program_runs_every_stage_and_checks_options_first(mini_registry):
    traced = []

    def fn(x):
        traced.append(1)
        return x + 1.0

    program = export_program(fn, [(2,)], target="onnxruntime")
    assert program.artifact is not None and program.options.target.name == "onnxruntime"
    with pytest.raises(InputSpecError, match="target must be one of"):
        ExportProgram(fn, [(2,)], target="tpu")
    assert traced == [1]  # the bad options never traced
