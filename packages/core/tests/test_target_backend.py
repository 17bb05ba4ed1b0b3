"""A target is a whole backend, added as one object (docs/architecture.md, "Adding a target"): a
target registered here, in this test alone, runs end to end through ``to_onnx`` and verification
with nothing else edited: its rewrite family runs, its kernel table is the one the lowering and
the passes read, its precision forms decide ``precision=``, its final check refuses what it
cannot run, its verification runner runs the model, and ``jax2onnx check --target`` knows it."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import Precision, to_onnx
from jax2onnx.errors import TargetUnsupportedError
from jax2onnx.ir.runtime import installed
from jax2onnx.passes.rules import Rule, RuleFamily, no_match
from jax2onnx.precision.options import parse_precision
from jax2onnx.rewrite import REWRITES_KEY
from jax2onnx.targets import Target, available_targets, get_target, register_target, target_names
from jax2onnx.targets import base as target_registry
from jax2onnx.targets.precision_forms import Float16, Int8DequantizeLinear
from jax2onnx.verification.compare import run_onnx

NAME = "test-npu"
CALLS: dict[str, int] = {"kernel_table": 0, "sessions": 0}


def _neg_match(graph, node: ir.Node):
    x = node.inputs[0]
    if x is None or x.dtype != ir.DataType.FLOAT:
        return no_match("not a float32 Neg")
    return x


def _neg_as_sub(graph, node: ir.Node, x: ir.Value) -> list[ir.Node]:
    """``-x`` as ``0 - x``: the form this made-up runtime runs."""
    zero = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(np.array(0.0, np.float32)))],
                   name=f"{node.name}_zero")
    sub = ir.Node("", "Sub", [zero.outputs[0], x], name=f"{node.name}_sub")
    out = node.outputs[0]
    sub.outputs[0].type, sub.outputs[0].shape = out.type, out.shape
    graph.insert_before(node, [zero, sub])
    name = out.name
    for i, v in enumerate(graph.outputs):
        if v is out:
            graph.outputs[i] = sub.outputs[0]
    ir.convenience.replace_all_uses_with(out, sub.outputs[0])
    out.name = None
    sub.outputs[0].name = name
    return [zero, sub]


class NegAsSub(RuleFamily):
    name = "test_npu"

    def rules(self) -> list[Rule]:
        return [Rule("neg_as_sub", frozenset({"Neg"}), _neg_match, _neg_as_sub)]


def _kernel_table():
    CALLS["kernel_table"] += 1
    return installed()


def _no_sin(model) -> list[str]:
    return [f"{node.op_type} ({NAME} has no sine unit)" for node in model.graph if node.op_type == "Sin"]


@dataclasses.dataclass(frozen=True)
class CountingTarget(Target):
    """A target whose verification runner counts the sessions it starts."""

    def inference_session(self, ort, model, options=None):
        CALLS["sessions"] += 1
        return super().inference_session(ort, model, options)


@pytest.fixture
def npu(monkeypatch):
    """The test target, registered for this test only (the registry is restored after it)."""
    available_targets()  # the built-in ones first, as in any process
    monkeypatch.setattr(target_registry, "_TARGETS", dict(target_registry._TARGETS))
    monkeypatch.setattr(target_registry, "_ALIASES", dict(target_registry._ALIASES))
    CALLS.update(kernel_table=0, sessions=0)
    return register_target(CountingTarget(
        name=NAME, summary="a made-up NPU: no sine unit, negation as subtraction",
        rewrites=(NegAsSub,), precision_forms=(Float16(), Int8DequantizeLinear()),
        check_graph=_no_sin, kernel_table=_kernel_table))


def _fn(x):
    return -(x * 2.0) + jnp.cos(x)


def test_a_target_registered_in_a_test_runs_end_to_end(mini_registry, npu):
    assert NAME in target_names() and get_target(NAME) is npu
    model = to_onnx(_fn, [("B", 8)], target=NAME)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert "Neg" not in ops and "Sub" in ops  # its rewrite family ran
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["jax2onnx:target"] == NAME and "neg_as_sub" in meta[REWRITES_KEY]
    assert CALLS["kernel_table"] >= 2  # the lowering and the kernel-coverage pass read its table
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)
    (got,) = run_onnx(model, [x])  # the model records its target: that target's runner runs it
    assert CALLS["sessions"] == 1
    np.testing.assert_allclose(got, np.asarray(_fn(x)), rtol=1e-6, atol=1e-6)


class _Lacking:
    """The installed kernel table less some (op, dtype) kernels: a runtime without them."""

    def __init__(self, lacks: dict[str, tuple[str, ...]]) -> None:
        self.base = installed()
        self.lacks = {op: frozenset(np.dtype(d) for d in dtypes) for op, dtypes in lacks.items()}

    def __getattr__(self, name):
        return getattr(self.base, name)

    def missing(self, opset=None):
        table = dict(self.base.missing(opset))
        for op, dtypes in self.lacks.items():
            table[op] = table.get(op, frozenset()) | dtypes
        return table

    def dtypes(self, op, opset=None, exact=False):
        return self.base.dtypes(op, opset, exact) - self.lacks.get(op, frozenset())

    def supports(self, op, dtype, opset=None):
        return np.dtype(dtype) not in self.lacks.get(op, ()) and self.base.supports(op, dtype, opset)


def _lacking(name: str, lacks: dict[str, tuple[str, ...]]) -> Target:
    """A target like the test's, whose kernel table lacks ``lacks`` (registered for the test alone:
    the ``npu`` fixture restores the registry)."""
    table = _Lacking(lacks)
    return register_target(Target(name=name, summary=f"a runtime without {lacks}", precision_forms=(Float16(),),
                                  kernel_table=lambda: table))


def _casts_to(model: onnx.ModelProto) -> set[int]:
    return {a.i for n in model.graph.node if n.op_type == "Cast" for a in n.attribute if a.name == "to"}


def test_its_kernel_table_decides_the_lowering_and_the_kernel_casts(mini_registry, npu):
    """A runtime without float32 Cos: the export computes Cos on a carrier its table has (float64)
    and casts back; the default target's export has no Cast. Only the target's table says so."""
    lacking = _lacking("no-f32-cos", {"Cos": ("float32",)})
    plain = to_onnx(_fn, [("B", 8)])
    carried = to_onnx(_fn, [("B", 8)], target=lacking.name)
    onnx.checker.check_model(carried, full_check=True)
    assert onnx.TensorProto.DOUBLE not in _casts_to(plain)
    assert {onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT} <= _casts_to(carried)
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)
    (got,) = run_onnx(carried, [x])
    np.testing.assert_allclose(got, np.asarray(_fn(x)), rtol=1e-6, atol=1e-6)


def test_its_kernel_table_decides_the_float16_plan(mini_registry, npu):
    """float16 under a runtime without a float16 Mul: the plan keeps Mul in float32 for want of a
    kernel (the precision's detail says so); the table the installed onnxruntime serves decides
    the default target's plan."""
    w = np.linspace(-1, 1, 8, dtype=np.float32)
    lacking = _lacking("no-f16-mul", {"Mul": ("float16",)})
    model = to_onnx(lambda x: x * w, [("B", 8)], target=lacking.name, precision="float16")
    detail = {p.key: p.value for p in model.metadata_props}["jax2onnx.precision.detail"]
    assert "Mul (kernel)" in detail, detail
    mul = next(n for n in model.graph.node if n.op_type == "Mul")
    assert {i.name: i.data_type for i in model.graph.initializer}.get(mul.input[1]) != onnx.TensorProto.FLOAT16
    plain = to_onnx(lambda x: x * w, [("B", 8)], precision="float16")
    plain_detail = {p.key: p.value for p in plain.metadata_props}["jax2onnx.precision.detail"]
    assert ("Mul (kernel)" in plain_detail) == (not installed().supports("Mul", np.float16, 23)), plain_detail
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)
    (got,) = run_onnx(model, [x])
    np.testing.assert_allclose(got, x * w, rtol=1e-3, atol=1e-3)


def test_its_precision_forms_and_checks_decide(mini_registry, npu):
    w = np.linspace(-1, 1, 64 * 16, dtype=np.float32).reshape(64, 16)
    half = to_onnx(lambda x: x @ w, [("B", 64)], target=NAME, precision="float16")
    assert onnx.TensorProto.FLOAT16 in {i.data_type for i in half.graph.initializer}
    assert npu.fit_precision(parse_precision("int8"), 23).int8_kernel == "DequantizeLinear"  # its one int8 form
    with pytest.raises(TargetUnsupportedError, match=f"precision='int4' has no form target='{NAME}'"):
        to_onnx(lambda x: x @ w, [("B", 64)], target=NAME, precision="int4")
    with pytest.raises(TargetUnsupportedError, match=f"activations='dynamic' has no int8 form target='{NAME}'"):
        to_onnx(lambda x: x @ w, [("B", 64)], target=NAME, precision=Precision("int8", activations="dynamic"))
    with pytest.raises(TargetUnsupportedError, match="Sin .test-npu has no sine unit"):
        to_onnx(jnp.sin, [("B", 8)], target=NAME)


def test_the_cli_checks_a_model_against_it(mini_registry, npu, tmp_path, capsys):
    from jax2onnx.cli import main

    path = tmp_path / "sin.onnx"
    to_onnx(jnp.sin, [("B", 8)], output_path=path)
    assert main(["check", "--target", NAME, str(path)]) != 0
    assert "has no sine unit" in capsys.readouterr().out


def test_a_target_lists_only_forms_it_runs():
    from jax2onnx.targets.precision_forms import Int4MatMulNBits

    with pytest.raises(ValueError, match=r"Int4MatMulNBits, which writes com.microsoft::MatMulNBits, an op it does not "
                                         r"run: add \('com.microsoft', 'MatMulNBits'\) to its ops"):
        register_target(Target(name="never-registered", summary="x", precision_forms=(Int4MatMulNBits(),)))


def test_a_pack_family_is_held_by_the_targets_running_its_op(monkeypatch, npu):
    """``jax2onnx.rewrite.register_rewrite`` files a family by the op it writes; a front-end asks
    the export's target for it and gets it only where the target runs that op."""
    from jax2onnx.rewrite import register_rewrite

    monkeypatch.setattr(target_registry, "_PACK_REWRITES", {})

    def factory(options):
        return NegAsSub(23)

    register_rewrite("test_contrib_family", factory, op="FusedThing", domain="com.microsoft")
    register_rewrite("test_contrib_family", lambda options: None, op="Other", domain="")  # the first stays
    holders = [t.name for t in available_targets() if t.requested_rewrites(["test_contrib_family"])]
    assert holders == [t.name for t in available_targets() if t.allows("FusedThing", "com.microsoft")]
    assert holders and NAME not in holders
    assert get_target(holders[0]).requested_rewrites(["missing", "test_contrib_family"]) == (factory,)


def test_a_target_allowing_one_contrib_op_refuses_the_rest_of_its_domain(mini_registry, npu):
    """``ops`` allows single (domain, op) pairs of a domain the target does not run whole (the web
    target's MatMulNBits): its int4 form of that op may be listed, and any other op of the domain is
    refused by the final check, naming the ops it does run; the 4-bit table gather it lacks is not
    chosen for ``embeddings="auto"`` (int8 rows), and refused where asked for."""
    from jax2onnx.targets.precision_forms import Int4MatMulNBits

    one = register_target(Target(name="test-one-contrib-op", summary="the standard ops and the 4-bit matmul",
                                 ops=frozenset({("com.microsoft", "MatMulNBits")}),
                                 precision_forms=(Int8DequantizeLinear(), Int4MatMulNBits())))
    assert one.allows("MatMulNBits", "com.microsoft") and not one.allows("GatherBlockQuantized", "com.microsoft")
    assert one.fit_precision(parse_precision("int4"), 23).int4_kernel == "MatMulNBits"  # its form of that op
    assert one.fit_precision(parse_precision("int4"), 23).embeddings == "int8"
    with pytest.raises(TargetUnsupportedError, match="embeddings='int4' gathers 4-bit rows with "
                                                     "com.microsoft::GatherBlockQuantized, which target="):
        to_onnx(lambda a: a * 2.0, [("B", 64)], target=one.name, precision=Precision("int4", embeddings="int4"))
    with pytest.raises(TargetUnsupportedError, match="int8_kernel='MatMulNBits' names an? int8 form target="
                                                     "'test-one-contrib-op' does not list .it runs com.microsoft::"
                                                     "MatMulNBits in other forms only"):
        to_onnx(lambda a: a * 2.0, [("B", 64)], target=one.name, precision=Precision("int8", int8_kernel="MatMulNBits"))
    gather = onnx.helper.make_node("GatherBlockQuantized", ["q", "ids", "s"], ["y"], domain="com.microsoft",
                                   block_size=32, bits=4)
    graph = onnx.helper.make_graph(
        [gather], "g", [onnx.helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 64])],
        [onnx.numpy_helper.from_array(np.zeros((8, 32), np.uint8), "q"),
         onnx.numpy_helper.from_array(np.ones((8, 2), np.float32), "s")])
    other = ir.serde.deserialize_model(onnx.helper.make_model(graph, opset_imports=[
        onnx.helper.make_opsetid("", 21), onnx.helper.make_opsetid("com.microsoft", 1)]))
    assert one.findings(other) == ["com.microsoft::GatherBlockQuantized (target='test-one-contrib-op' runs only "
                                   "MatMulNBits of domain 'com.microsoft', not the whole domain)"]
    with pytest.raises(TargetUnsupportedError, match="runs only MatMulNBits of domain 'com.microsoft'"):
        one.check_model(other)
    assert get_target("onnxruntime").findings(other) == []  # the whole domain there


def test_a_target_pair_of_ops_is_checked_when_registered():
    for ops in ({("com.microsoft", "MatMulNBits")}, frozenset({"MatMulNBits"}), frozenset({("com.microsoft", "")})):
        with pytest.raises(ValueError, match="ops takes a frozenset of \\(domain, op\\) pairs"):
            register_target(Target(name="never-registered", summary="x", ops=ops))
